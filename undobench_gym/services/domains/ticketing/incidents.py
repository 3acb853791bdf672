"""Incident changes: open one for an alert, set its severity or assignee, resolve and
reopen it. Each is one transaction; none of them notifies anybody."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from undobench_gym.services.domains._service.kit import (
    Effect,
    Id,
    PathId,
    error,
    flush_or_409,
    get_or_404,
    now,
    row,
    run_mutation,
    seed_of,
    write_route,
)
from undobench_gym.services.domains.ticketing.common import (
    SEVERITY_PATTERN,
    require_no_escalation,
    require_open,
)
from undobench_gym.services.domains.ticketing.fixture import incident_id as new_incident_id
from undobench_gym.services.domains.ticketing.models import Incident, Policy, Responder
from undobench_gym.services.domains.ticketing.views import IncidentOut

router = APIRouter(prefix="/v1")
REF_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"
#: One incident per alert reference.
OPEN_INCIDENT = Effect("incident.open", "create_unique", ("external_ref",), "constraint")
SET_SEVERITY = Effect("incident.severity", "set", ("incident_id", "severity"))
ASSIGN_INCIDENT = Effect("incident.assign", "set", ("incident_id", "responder_id"))
RESOLVE_INCIDENT = Effect("incident.resolve", "set", ("incident_id",))
REOPEN_INCIDENT = Effect("incident.reopen", "set", ("incident_id",), compensation=True)

#: Makes a change to an incident (its row given); says whether it changed anything.
Change = Callable[[Session, Incident], bool]


class IncidentIn(BaseModel):
    external_ref: str = Field(max_length=64, pattern=REF_PATTERN)
    title: str = Field(min_length=1, max_length=200)
    service: str = Field(min_length=1, max_length=64)
    severity: str = Field(pattern=SEVERITY_PATTERN)
    policy_id: Id


@write_route(router, "POST", "/incidents", "open_incident", OPEN_INCIDENT, IncidentOut, 201)
def open_incident(request: Request, body: IncidentIn) -> JSONResponse:
    """Open an incident for an alert. One incident per alert reference (external_ref): a
    repeat is refused with 409. Opening pages nobody."""

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        found = s.scalar(select(Incident).where(Incident.external_ref == body.external_ref))
        if found is not None:
            raise error(
                409,
                "resource_exists",
                f"Incident {found.id} for alert {body.external_ref} already exists "
                f"({found.status}); read it with get_incident instead of opening it again",
            )
        get_or_404(s, Policy, body.policy_id, "policy")
        inc = Incident(
            id=new_incident_id(seed_of(s), body.external_ref),
            escalation_level=0,
            status="open",
            assignee_id=None,
            created=now(s),
            **body.model_dump(),
        )
        s.add(inc)
        OPEN_INCIDENT.commit(s, body.model_dump(), key)
        # a concurrent open won the unique reference
        flush_or_409(s, f"Alert {body.external_ref} has an incident")
        return 201, row(inc)

    return run_mutation(
        request,
        route="open_incident",
        native=OPEN_INCIDENT.native,
        payload=body.model_dump(),
        apply=apply,
    )


def _change(
    request: Request, route: str, effect: Effect, payload: dict[str, Any], change: Change
) -> JSONResponse:
    """Change the incident `payload` names in one transaction and answer with it; a change
    that changed something writes `effect`'s commit-log row (the payload is its args)."""

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        inc = get_or_404(s, Incident, payload["incident_id"], "incident")
        if change(s, inc):
            effect.commit(s, payload, key)
        return 200, row(inc)

    return run_mutation(request, route=route, native=effect.native, payload=payload, apply=apply)


def _set_field(
    request: Request,
    route: str,
    effect: Effect,
    incident_id: str,
    value: str,
    check: Callable[[Session], Any] | None = None,
) -> JSONResponse:
    """Set the field named last in `effect`'s identity on an open incident."""
    field = effect.identity[-1]

    def change(s: Session, inc: Incident) -> bool:
        require_open(inc, f"change its {field}")
        if check is not None:
            check(s)
        setattr(inc, "assignee_id" if field == "responder_id" else field, value)
        return True

    return _change(request, route, effect, {"incident_id": incident_id, field: value}, change)


class SeverityIn(BaseModel):
    severity: str = Field(pattern=SEVERITY_PATTERN)


@write_route(
    router, "PUT", "/incidents/{incident_id}/severity", "set_severity", SET_SEVERITY, IncidentOut
)
def set_severity(request: Request, incident_id: PathId, body: SeverityIn) -> JSONResponse:
    """Set an open incident's severity (sev1 is the worst). Setting it again is harmless."""
    return _set_field(request, "set_severity", SET_SEVERITY, incident_id, body.severity)


class AssigneeIn(BaseModel):
    responder_id: Id


@write_route(
    router,
    "PUT",
    "/incidents/{incident_id}/assignee",
    "assign_incident",
    ASSIGN_INCIDENT,
    IncidentOut,
)
def assign_incident(request: Request, incident_id: PathId, body: AssigneeIn) -> JSONResponse:
    """Assign an open incident to a responder. Assigning does not page them; setting the
    same assignee again is harmless."""
    return _set_field(
        request,
        "assign_incident",
        ASSIGN_INCIDENT,
        incident_id,
        body.responder_id,
        lambda s: get_or_404(s, Responder, body.responder_id, "responder"),
    )


class ResolveIn(BaseModel):
    resolution: str = Field(min_length=1, max_length=500)


@write_route(
    router,
    "POST",
    "/incidents/{incident_id}/resolve",
    "resolve_incident",
    RESOLVE_INCIDENT,
    IncidentOut,
)
def resolve_incident(request: Request, incident_id: PathId, body: ResolveIn) -> JSONResponse:
    """Mark an incident resolved with a resolution summary. This notifies nobody: send a
    resolution notice for that. Resolving a resolved incident only updates the summary."""

    def change(s: Session, inc: Incident) -> bool:
        require_no_escalation(s, incident_id)
        if inc.status != "resolved":
            inc.status, inc.resolved = "resolved", now(s)
        inc.resolution = body.resolution
        return True

    payload = {"incident_id": incident_id, **body.model_dump()}
    return _change(request, "resolve_incident", RESOLVE_INCIDENT, payload, change)


class ReopenIn(BaseModel):
    reason: str = Field(min_length=1, max_length=500)


@write_route(
    router,
    "POST",
    "/incidents/{incident_id}/reopen",
    "reopen_incident",
    REOPEN_INCIDENT,
    IncidentOut,
)
def reopen_incident(request: Request, incident_id: PathId, body: ReopenIn) -> JSONResponse:
    """Reopen a resolved incident (for one resolved by mistake). An incident that is not
    resolved is returned as it is."""

    def change(s: Session, inc: Incident) -> bool:
        if inc.status != "resolved":
            return False
        inc.status, inc.resolved, inc.resolution = "open", None, None
        return True

    payload = {"incident_id": incident_id, **body.model_dump()}
    return _change(request, "reopen_incident", REOPEN_INCIDENT, payload, change)
