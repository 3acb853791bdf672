"""Incident changes: open one for an alert, set its severity or assignee, resolve and
reopen it. Each is one transaction; none of them notifies anybody."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from .._service.kit import (
    Id,
    PathId,
    effect_meta,
    error,
    get_or_404,
    now,
    record_commit,
    row,
    run_mutation,
    seed_of,
)
from .common import SEVERITY_PATTERN, open_incident_or_409, require_no_escalation
from .fixture import incident_id as new_incident_id
from .models import Incident, Policy, Responder
from .views import IncidentOut

router = APIRouter(prefix="/v1")
REF_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"


class IncidentIn(BaseModel):
    external_ref: str = Field(max_length=64, pattern=REF_PATTERN)
    title: str = Field(min_length=1, max_length=200)
    service: str = Field(min_length=1, max_length=64)
    severity: str = Field(pattern=SEVERITY_PATTERN)
    policy_id: Id


@router.post(
    "/incidents",
    operation_id="open_incident",
    status_code=201,
    openapi_extra=effect_meta("incident.open", "create_unique", ["external_ref"], "constraint"),
    response_model=IncidentOut,
)
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
        record_commit(
            s,
            op="incident.open",
            effect_class="create_unique",
            identity={"external_ref": body.external_ref},
            args=body.model_dump(),
            key=key,
        )
        try:
            s.flush()
        except IntegrityError as exc:  # a concurrent open won the unique reference
            raise error(
                409, "resource_exists", f"Alert {body.external_ref} has an incident"
            ) from exc
        return 201, row(inc)

    return run_mutation(
        request, route="open_incident", native=False, payload=body.model_dump(), apply=apply
    )


def _set_field(
    request: Request,
    route: str,
    incident_id: str,
    op: str,
    field: str,
    value: str,
    check: Callable[[Session], Any] | None = None,
) -> JSONResponse:
    identity = {"incident_id": incident_id, field: value}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        inc = open_incident_or_409(s, incident_id, f"change its {field}")
        if check is not None:
            check(s)
        setattr(inc, "assignee_id" if field == "responder_id" else field, value)
        record_commit(s, op=op, effect_class="set", identity=identity, args=identity, key=key)
        return 200, row(inc)

    return run_mutation(request, route=route, native=False, payload=identity, apply=apply)


class SeverityIn(BaseModel):
    severity: str = Field(pattern=SEVERITY_PATTERN)


@router.put(
    "/incidents/{incident_id}/severity",
    operation_id="set_severity",
    openapi_extra=effect_meta("incident.severity", "set", ["incident_id", "severity"]),
    response_model=IncidentOut,
)
def set_severity(request: Request, incident_id: PathId, body: SeverityIn) -> JSONResponse:
    """Set an open incident's severity (sev1 is the worst). Setting it again is harmless."""
    return _set_field(
        request, "set_severity", incident_id, "incident.severity", "severity", body.severity
    )


class AssigneeIn(BaseModel):
    responder_id: Id


@router.put(
    "/incidents/{incident_id}/assignee",
    operation_id="assign_incident",
    openapi_extra=effect_meta("incident.assign", "set", ["incident_id", "responder_id"]),
    response_model=IncidentOut,
)
def assign_incident(request: Request, incident_id: PathId, body: AssigneeIn) -> JSONResponse:
    """Assign an open incident to a responder. Assigning does not page them; setting the
    same assignee again is harmless."""
    return _set_field(
        request,
        "assign_incident",
        incident_id,
        "incident.assign",
        "responder_id",
        body.responder_id,
        lambda s: get_or_404(s, Responder, body.responder_id, "responder"),
    )


class ResolveIn(BaseModel):
    resolution: str = Field(min_length=1, max_length=500)


@router.post(
    "/incidents/{incident_id}/resolve",
    operation_id="resolve_incident",
    openapi_extra=effect_meta("incident.resolve", "set", ["incident_id"]),
    response_model=IncidentOut,
)
def resolve_incident(request: Request, incident_id: PathId, body: ResolveIn) -> JSONResponse:
    """Mark an incident resolved with a resolution summary. This notifies nobody: send a
    resolution notice for that. Resolving a resolved incident only updates the summary."""
    identity = {"incident_id": incident_id}
    payload = {**identity, **body.model_dump()}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        inc = get_or_404(s, Incident, incident_id, "incident")
        require_no_escalation(s, incident_id)
        if inc.status != "resolved":
            inc.status, inc.resolved = "resolved", now(s)
        inc.resolution = body.resolution
        record_commit(
            s, op="incident.resolve", effect_class="set", identity=identity, args=payload, key=key
        )
        return 200, row(inc)

    return run_mutation(
        request, route="resolve_incident", native=False, payload=payload, apply=apply
    )


class ReopenIn(BaseModel):
    reason: str = Field(min_length=1, max_length=500)


@router.post(
    "/incidents/{incident_id}/reopen",
    operation_id="reopen_incident",
    openapi_extra=effect_meta("incident.reopen", "set", ["incident_id"], compensation=True),
    response_model=IncidentOut,
)
def reopen_incident(request: Request, incident_id: PathId, body: ReopenIn) -> JSONResponse:
    """Reopen a resolved incident (for one resolved by mistake). An incident that is not
    resolved is returned as it is."""
    identity = {"incident_id": incident_id}
    payload = {**identity, **body.model_dump()}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        inc = get_or_404(s, Incident, incident_id, "incident")
        if inc.status == "resolved":
            inc.status, inc.resolved, inc.resolution = "open", None, None
            record_commit(
                s,
                op="incident.reopen",
                effect_class="set",
                identity=identity,
                args=payload,
                key=key,
                compensation=True,
            )
        return 200, row(inc)

    return run_mutation(
        request, route="reopen_incident", native=False, payload=payload, apply=apply
    )
