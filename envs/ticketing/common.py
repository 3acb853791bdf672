"""Helpers the ticketing routes share: lookups, views, and sending a page."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Path
from pydantic import Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from .._service.context import ServiceContext, get_ctx, new_id, now
from .._service.db import row as row  # re-exported for the domain modules
from .._service.mutation import error, record_commit
from .fixture import more_severe as more_severe  # re-exported for the domain modules
from .models import Comment, Escalation, Incident, Notice, Page, Responder

Ctx = Annotated[ServiceContext, Depends(get_ctx)]
PathId = Annotated[str, Path(min_length=1, max_length=64)]
Id = Annotated[str, Field(min_length=1, max_length=64)]
SEVERITY_PATTERN = "^sev[1-4]$"


def get_or_404(s: Session, model: type[Any], ident: str, what: str) -> Any:
    obj = s.get(model, ident)
    if obj is None:
        raise error(404, "resource_missing", f"No such {what}: {ident}")
    return obj


def open_incident_or_409(s: Session, incident_id: str, doing: str) -> Incident:
    inc: Incident = get_or_404(s, Incident, incident_id, "incident")
    if inc.status == "resolved":
        raise error(
            409,
            "incident_resolved",
            f"Incident {inc.external_ref} is resolved; reopen_incident it before you {doing}",
        )
    return inc


def send_page(
    s: Session,
    inc: Incident,
    responder_id: str,
    message: str,
    *,
    escalation_id: str | None = None,
    key: str | None = None,
) -> Page:
    """Page one responder: a real notification to a person, inside the caller's txn."""
    get_or_404(s, Responder, responder_id, "responder")
    page = Page(
        id=new_id(s, "page"),
        incident_id=inc.id,
        responder_id=responder_id,
        message=message,
        escalation_id=escalation_id,
        retracted=False,
        created=now(s),
    )
    s.add(page)
    record_commit(
        s,
        op="page.send",
        effect_class="irreversible_send",
        identity={"incident_id": inc.id, "responder_id": responder_id},
        args={"incident_id": inc.id, "responder_id": responder_id, "message": message},
        key=key,
    )
    s.flush()
    return page


def incident_view(s: Session, inc: Incident) -> dict[str, Any]:
    def rows(model: type[Any]) -> list[dict[str, Any]]:
        q = select(model).where(model.incident_id == inc.id).order_by(model.created, model.id)
        return [row(r) for r in s.scalars(q)]

    return {
        **row(inc),
        "pages": rows(Page),
        "escalations": rows(Escalation),
        "comments": rows(Comment),
        "notices": rows(Notice),
    }
