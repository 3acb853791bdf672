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

from .._service.context import ServiceContext, get_ctx, maybe_crash, new_id, now
from .._service.mutation import (
    READ_ONLY,
    claim_key,
    complete_key,
    effect_meta,
    error,
    honoured_key,
    record_commit,
    release_key,
)
from .common import (
    Ctx,
    PathId,
    get_or_404,
    more_severe,
    open_incident_or_409,
    row,
    send_page,
)
from .fixture import escalation_message
from .models import Escalation, Incident, Page, PolicyLevel

router = APIRouter(prefix="/v1")


def escalation_view(s: Session, e: Escalation) -> dict[str, Any]:
    q = select(Page).where(Page.escalation_id == e.id).order_by(Page.created, Page.id)
    pages = [row(p) for p in s.scalars(q)]
    paged = {p["responder_id"] for p in pages}
    return {
        **row(e),
        "pages": pages,
        "not_yet_paged": [r for r in e.responder_ids if r not in paged],
    }


@router.get("/escalations", operation_id="list_escalations", openapi_extra=READ_ONLY)
def list_escalations(
    ctx: Ctx, incident_id: str | None = Query(None, max_length=64)
) -> list[dict[str, Any]]:
    """List escalations with the pages each one sent and the responders it has not paged
    yet, optionally for one incident."""
    with Session(ctx.engine) as s:
        q = select(Escalation).order_by(Escalation.created, Escalation.id)
        if incident_id:
            q = q.where(Escalation.incident_id == incident_id)
        return [escalation_view(s, e) for e in s.scalars(q)]


def require_no_escalation(s: Session, incident_id: str) -> None:
    found = s.scalar(
        select(Escalation).where(
            Escalation.incident_id == incident_id, Escalation.status == "in_progress"
        )
    )
    if found is not None:
        raise error(
            409,
            "escalation_in_progress",
            f"Escalation {found.id} to level {found.level} is still in progress (some of its "
            "pages are not sent); finish it with resume_escalation instead of escalating again",
        )


class EscalateIn(BaseModel):
    reason: str = Field(min_length=1, max_length=500)


def _start(s: Session, incident_id: str, body: EscalateIn, key: str | None) -> str:
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
    record_commit(
        s,
        op="incident.escalate",
        effect_class="additive",
        identity={"incident_id": incident_id},
        args={"incident_id": incident_id, "level": level, **body.model_dump()},
        key=key,
    )
    s.flush()
    return e.id


def _page_level(
    request: Request, ctx: ServiceContext, escalation_id: str, *, resume: bool = False
) -> None:
    """Page each responder of the level not paged yet, one transaction per page, then
    mark the escalation completed. A resume that completes one records its own commit (the
    pages it sends are `page.send` commits like any other)."""
    with Session(ctx.engine) as s:
        e = get_or_404(s, Escalation, escalation_id, "escalation")
        responders = list(e.responder_ids)
    paged_now: list[str] = []
    for i, responder_id in enumerate(responders):
        if i == 1:
            maybe_crash(request, "ticketing.after_first_page")
        with Session(ctx.engine) as s, s.begin():
            done = s.scalar(
                select(Page).where(
                    Page.escalation_id == escalation_id, Page.responder_id == responder_id
                )
            )
            if done is not None:
                continue
            e = get_or_404(s, Escalation, escalation_id, "escalation")
            inc: Incident = get_or_404(s, Incident, e.incident_id, "incident")
            message = escalation_message(
                e.severity_to, inc.title, inc.external_ref, e.level, e.reason
            )
            send_page(s, inc, responder_id, message, escalation_id=e.id)
            paged_now.append(responder_id)
    with Session(ctx.engine) as s, s.begin():
        e = get_or_404(s, Escalation, escalation_id, "escalation")
        if e.status != "completed":
            e.status, e.completed = "completed", now(s)
            if resume:
                identity = {"escalation_id": escalation_id}
                record_commit(
                    s,
                    op="escalation.resume",
                    effect_class="set",
                    identity=identity,
                    args={**identity, "paged": paged_now},
                )


@router.post(
    "/incidents/{incident_id}/escalations",
    operation_id="escalate_incident",
    status_code=201,
    openapi_extra=effect_meta("incident.escalate", "additive", ["incident_id"]),
)
def escalate_incident(request: Request, incident_id: PathId, body: EscalateIn) -> JSONResponse:
    """Escalate an open incident to the next level of its escalation policy: raise its
    severity one step (sev3 to sev2, ...), page every responder of that level one by one,
    and record the escalation. Every call escalates one level further. An escalation left
    in_progress is finished with resume_escalation."""
    ctx = get_ctx(request)
    payload = {"incident_id": incident_id, **body.model_dump()}
    claim = claim_key(ctx, honoured_key(request, native=False), "escalate_incident", payload)
    if isinstance(claim, JSONResponse):
        return claim
    try:
        with Session(ctx.engine) as s, s.begin():
            escalation_id = _start(s, incident_id, body, claim.key if claim else None)
    except Exception:
        release_key(ctx, claim)
        raise
    _page_level(request, ctx, escalation_id)
    with Session(ctx.engine) as s, s.begin():
        view = escalation_view(s, get_or_404(s, Escalation, escalation_id, "escalation"))
        complete_key(s, claim, 201, view)
    return JSONResponse(status_code=201, content=view)


@router.post(
    "/escalations/{escalation_id}/resume",
    operation_id="resume_escalation",
    openapi_extra=effect_meta("escalation.resume", "set", ["escalation_id"]),
)
def resume_escalation(request: Request, escalation_id: PathId) -> dict[str, Any]:
    """Page the responders an in_progress escalation has not paged yet, then mark it
    completed; nobody it already paged is paged again. A completed one is returned as is."""
    ctx = get_ctx(request)
    _page_level(request, ctx, escalation_id, resume=True)
    with Session(ctx.engine) as s:
        return escalation_view(s, get_or_404(s, Escalation, escalation_id, "escalation"))


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
