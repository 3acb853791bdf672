"""Ticketing service routes: incidents, responders, escalation policies and paging.

Read-only routes and incident changes live here; paging, notices and the multi-step
escalation live in `paging` and `escalations`.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from .._service.context import DomainService, now, seed_of
from .._service.db import insert_fixture
from .._service.mutation import READ_ONLY, effect_meta, error, record_commit, run_mutation
from . import escalations, paging
from .common import (
    SEVERITY_PATTERN,
    Ctx,
    Id,
    PathId,
    get_or_404,
    incident_view,
    open_incident_or_409,
    row,
)
from .fixture import build_fixture, incident_id
from .models import (
    TABLES,
    Comment,
    Escalation,
    Incident,
    Notice,
    Page,
    Policy,
    PolicyLevel,
    Responder,
)

router = APIRouter(prefix="/v1")
STATUS_PATTERN = "^(open|acknowledged|resolved)$"
REF_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"


# ---- read-only routes --------------------------------------------------------------


@router.get("/responders", operation_id="list_responders", openapi_extra=READ_ONLY)
def list_responders(
    ctx: Ctx, team: str | None = Query(None, max_length=64)
) -> list[dict[str, Any]]:
    """List on-call responders, optionally for one team."""
    with Session(ctx.engine) as s:
        q = select(Responder).order_by(Responder.team, Responder.name)
        if team:
            q = q.where(Responder.team == team)
        return [row(r) for r in s.scalars(q)]


def _policy_view(s: Session, p: Policy) -> dict[str, Any]:
    q = select(PolicyLevel).where(PolicyLevel.policy_id == p.id).order_by(PolicyLevel.level)
    return {**row(p), "levels": [row(lv) for lv in s.scalars(q)]}


@router.get("/policies", operation_id="list_policies", openapi_extra=READ_ONLY)
def list_policies(ctx: Ctx) -> list[dict[str, Any]]:
    """List escalation policies with their ordered levels of responders."""
    with Session(ctx.engine) as s:
        return [_policy_view(s, p) for p in s.scalars(select(Policy).order_by(Policy.name))]


@router.get("/policies/{policy_id}", operation_id="get_policy", openapi_extra=READ_ONLY)
def get_policy(ctx: Ctx, policy_id: PathId) -> dict[str, Any]:
    """Retrieve one escalation policy: level 1 is paged first, then level 2, and so on."""
    with Session(ctx.engine) as s:
        return _policy_view(s, get_or_404(s, Policy, policy_id, "policy"))


@router.get("/incidents", operation_id="list_incidents", openapi_extra=READ_ONLY)
def list_incidents(
    ctx: Ctx,
    status: str | None = Query(None, pattern=STATUS_PATTERN),
    service: str | None = Query(None, max_length=64),
    external_ref: str | None = Query(None, max_length=64),
) -> list[dict[str, Any]]:
    """List incidents, optionally by status, affected service or alert reference."""
    with Session(ctx.engine) as s:
        q = select(Incident).order_by(Incident.created, Incident.id)
        if status:
            q = q.where(Incident.status == status)
        if service:
            q = q.where(Incident.service == service)
        if external_ref:
            q = q.where(Incident.external_ref == external_ref)
        return [row(i) for i in s.scalars(q)]


@router.get("/incidents/{incident_id}", operation_id="get_incident", openapi_extra=READ_ONLY)
def get_incident(ctx: Ctx, incident_id: PathId) -> dict[str, Any]:
    """Retrieve one incident with its pages, escalations, comments and notices."""
    with Session(ctx.engine) as s:
        return incident_view(s, get_or_404(s, Incident, incident_id, "incident"))


# ---- incident changes --------------------------------------------------------------


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
            id=incident_id(seed_of(s), body.external_ref),
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
    check: Any = None,
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
)
def assign_incident(request: Request, incident_id: PathId, body: AssigneeIn) -> JSONResponse:
    """Assign an open incident to a responder. Assigning does not page them; setting the
    same assignee again is harmless."""

    def check(s: Session) -> None:
        get_or_404(s, Responder, body.responder_id, "responder")

    return _set_field(
        request,
        "assign_incident",
        incident_id,
        "incident.assign",
        "responder_id",
        body.responder_id,
        check,
    )


class ResolveIn(BaseModel):
    resolution: str = Field(min_length=1, max_length=500)


@router.post(
    "/incidents/{incident_id}/resolve",
    operation_id="resolve_incident",
    openapi_extra=effect_meta("incident.resolve", "set", ["incident_id"]),
)
def resolve_incident(request: Request, incident_id: PathId, body: ResolveIn) -> JSONResponse:
    """Mark an incident resolved with a resolution summary. This notifies nobody: send a
    resolution notice for that. Resolving a resolved incident only updates the summary."""
    identity = {"incident_id": incident_id}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        inc: Incident = get_or_404(s, Incident, incident_id, "incident")
        escalations.require_no_escalation(s, incident_id)
        if inc.status != "resolved":
            inc.status, inc.resolved = "resolved", now(s)
        inc.resolution = body.resolution
        args = {**identity, **body.model_dump()}
        record_commit(
            s, op="incident.resolve", effect_class="set", identity=identity, args=args, key=key
        )
        return 200, row(inc)

    return run_mutation(
        request,
        route="resolve_incident",
        native=False,
        payload={**identity, **body.model_dump()},
        apply=apply,
    )


class ReopenIn(BaseModel):
    reason: str = Field(min_length=1, max_length=500)


@router.post(
    "/incidents/{incident_id}/reopen",
    operation_id="reopen_incident",
    openapi_extra=effect_meta("incident.reopen", "set", ["incident_id"], compensation=True),
)
def reopen_incident(request: Request, incident_id: PathId, body: ReopenIn) -> JSONResponse:
    """Reopen a resolved incident (for one resolved by mistake). An incident that is not
    resolved is returned as it is."""
    identity = {"incident_id": incident_id}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        inc: Incident = get_or_404(s, Incident, incident_id, "incident")
        if inc.status == "resolved":
            inc.status, inc.resolved, inc.resolution = "open", None, None
            record_commit(
                s,
                op="incident.reopen",
                effect_class="set",
                identity=identity,
                args={**identity, **body.model_dump()},
                key=key,
                compensation=True,
            )
        return 200, row(inc)

    return run_mutation(
        request,
        route="reopen_incident",
        native=False,
        payload={**identity, **body.model_dump()},
        apply=apply,
    )


# ---- domain definition -------------------------------------------------------------


_ORDER = (
    ("responders", Responder),
    ("policies", Policy),
    ("policy_levels", PolicyLevel),
    ("incidents", Incident),
    ("escalations", Escalation),
    ("pages", Page),
    ("comments", Comment),
    ("notices", Notice),
)


def seed_state(s: Session, seed: int) -> None:
    insert_fixture(s, build_fixture(seed), _ORDER)


DOMAIN = DomainService(
    name="ticketing",
    title="UndoBench Ticketing",
    routers=[router, paging.router, escalations.router],
    tables=TABLES,
    seed_state=seed_state,
    partial_state=escalations.partial_state,
)

__all__ = ["DOMAIN"]
