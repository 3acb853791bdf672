"""The escalation composite: bump severity, page the next level one by one, record it.

The escalation row (with the severity bump) is one transaction and every page is its own,
as a paging provider delivers them. A named crash point sits between the first and the
second page, so a DURING_MUTATION fault leaves an escalation in_progress with only some of
its pages sent; `resume_escalation` pages the responders still missing, never one twice.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from undobench_gym.services.domains._service.kit import (
    DbSession,
    Effect,
    PathId,
    error,
    filtered,
    get_ctx,
    get_or_404,
    maybe_crash,
    new_id,
    now,
    read_route,
    run_composite,
    write_route,
)
from undobench_gym.services.domains.ticketing.common import (
    open_incident_or_409,
    require_no_escalation,
    send_page,
)
from undobench_gym.services.domains.ticketing.fixture import escalation_message, more_severe
from undobench_gym.services.domains.ticketing.models import Escalation, Incident, Page, PolicyLevel
from undobench_gym.services.domains.ticketing.views import EscalationView, escalation_view

router = APIRouter(prefix="/v1")
CRASH_AFTER_FIRST_PAGE = "ticketing.after_first_page"
#: Every call escalates one level further: the incident is the identity, not the level.
ESCALATE_INCIDENT = Effect("incident.escalate", "additive", ("incident_id",))
RESUME_ESCALATION = Effect("escalation.resume", "set", ("escalation_id",), resumption=True)


@read_route(router, "/escalations", "list_escalations", list[EscalationView])
def list_escalations(
    s: DbSession, incident_id: str | None = Query(None, max_length=64)
) -> list[dict[str, Any]]:
    """List escalations with the pages each one sent and the responders it has not paged
    yet, optionally for one incident."""
    q = select(Escalation).order_by(Escalation.created, Escalation.id)
    return [
        escalation_view(s, e) for e in s.scalars(filtered(q, (Escalation.incident_id, incident_id)))
    ]


class EscalateIn(BaseModel):
    reason: str = Field(min_length=1, max_length=500)


def _start(s: Session, incident_id: str, body: EscalateIn, key: str | None) -> str:
    """Open the escalation and raise the severity in one transaction; its id."""
    inc = open_incident_or_409(s, incident_id, "escalate it")
    require_no_escalation(s, incident_id)
    level = inc.escalation_level + 1
    lv = s.scalar(
        select(PolicyLevel).where(
            PolicyLevel.policy_id == inc.policy_id, PolicyLevel.level == level
        )
    )
    if lv is None:
        raise error(
            409,
            "no_next_level",
            f"Incident {inc.external_ref} is already at the last level ({inc.escalation_level}) "
            "of its escalation policy",
        )
    e = Escalation(
        id=new_id(s, "esc"),
        incident_id=inc.id,
        level=level,
        responder_ids=list(lv.responder_ids),
        severity_from=inc.severity,
        severity_to=more_severe(inc.severity),
        reason=body.reason,
        status="in_progress",
        created=now(s),
    )
    s.add(e)
    inc.severity, inc.escalation_level = e.severity_to, level
    ESCALATE_INCIDENT.commit(
        s, {"incident_id": incident_id, "level": level, **body.model_dump()}, key
    )
    s.flush()
    return e.id


def _page_level(request: Request, escalation_id: str, *, resume: bool = False) -> None:
    """Page each responder of the level not paged yet, one transaction per page, then
    mark the escalation completed. A resume that completes one records its own commit (the
    pages it sends are `page.send` commits like any other)."""
    engine = get_ctx(request).engine
    with Session(engine) as s:
        e = get_or_404(s, Escalation, escalation_id, "escalation")
        responders = list(e.responder_ids)
    paged_now: list[str] = []
    for i, responder_id in enumerate(responders):
        if i == 1:
            maybe_crash(request, CRASH_AFTER_FIRST_PAGE)
        with Session(engine) as s, s.begin():
            done = s.scalar(
                select(Page).where(
                    Page.escalation_id == escalation_id, Page.responder_id == responder_id
                )
            )
            if done is not None:
                continue
            e = get_or_404(s, Escalation, escalation_id, "escalation")
            inc = get_or_404(s, Incident, e.incident_id, "incident")
            message = escalation_message(
                e.severity_to, inc.title, inc.external_ref, e.level, e.reason
            )
            send_page(s, inc, responder_id, message, escalation_id=e.id)
            paged_now.append(responder_id)
    with Session(engine) as s, s.begin():
        e = get_or_404(s, Escalation, escalation_id, "escalation")
        if e.status != "completed":
            e.status, e.completed = "completed", now(s)
            if resume:
                args = {"escalation_id": escalation_id, "paged": paged_now}
                RESUME_ESCALATION.commit(s, args, None)


def _view(s: Session, escalation_id: str) -> dict[str, Any]:
    return escalation_view(s, get_or_404(s, Escalation, escalation_id, "escalation"))


@write_route(
    router,
    "POST",
    "/incidents/{incident_id}/escalations",
    "escalate_incident",
    ESCALATE_INCIDENT,
    EscalationView,
    201,
)
def escalate_incident(request: Request, incident_id: PathId, body: EscalateIn) -> JSONResponse:
    """Escalate an open incident to the next level of its escalation policy: raise its
    severity one step (sev3 to sev2, ...), page every responder of that level one by one,
    and record the escalation. Every call escalates one level further. An escalation left
    in_progress is finished with resume_escalation."""
    return run_composite(
        request,
        route="escalate_incident",
        payload={"incident_id": incident_id, **body.model_dump()},
        start=lambda s, key: _start(s, incident_id, body, key),
        advance=lambda escalation_id: _page_level(request, escalation_id),
        view=_view,
    )


@write_route(
    router,
    "POST",
    "/escalations/{escalation_id}/resume",
    "resume_escalation",
    RESUME_ESCALATION,
    EscalationView,
)
def resume_escalation(request: Request, escalation_id: PathId) -> dict[str, Any]:
    """Page the responders an in_progress escalation has not paged yet, then mark it
    completed; nobody it already paged is paged again. A completed one is returned as is."""
    # Not a `run_composite`: a resume takes no Idempotency-Key (it is safe to repeat), and
    # honouring one in the "all" mode would replay an old answer instead of finishing.
    _page_level(request, escalation_id, resume=True)
    with Session(get_ctx(request).engine) as s:
        return _view(s, escalation_id)


def partial_state(state: dict[str, Any]) -> list[str]:
    """An escalation still in_progress is a half-applied composite."""
    tables = state["tables"]
    refs = {i["id"]: i["external_ref"] for i in tables["tk_incidents"]}
    issues = []
    for e in tables["tk_escalations"]:
        if e["status"] != "completed":
            paged = {p["responder_id"] for p in tables["tk_pages"] if p["escalation_id"] == e["id"]}
            missing = [r for r in e["responder_ids"] if r not in paged]
            issues.append(
                f"escalation {e['id']} of incident {refs.get(e['incident_id'])} to level "
                f"{e['level']} is {e['status']} with {len(paged)}/{len(e['responder_ids'])} "
                f"pages sent (not paged: {', '.join(missing)})"
            )
    return issues
