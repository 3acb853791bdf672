"""What the ticketing routes answer with: row views and their response models.

Each model is built once here, in the key order the view answers in, so the OpenAPI
document tells an agent the shape of every answer (the views themselves stay plain dicts).
The models are built at run time, so they are typed `Any`: mypy takes no variable as a
type, and `list[PageOut]` must be one.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from undobench_gym.services.domains._service.kit import row, row_model
from undobench_gym.services.domains.ticketing.models import (
    Comment,
    Escalation,
    Incident,
    Notice,
    Page,
    Policy,
    PolicyLevel,
    Responder,
)

ResponderOut: Any = row_model(Responder)
PolicyLevelOut: Any = row_model(PolicyLevel)
PolicyView: Any = row_model(Policy, "PolicyView", levels=(list[PolicyLevelOut], ...))
IncidentOut: Any = row_model(Incident)
PageOut: Any = row_model(Page)
CommentOut: Any = row_model(Comment)
NoticeOut: Any = row_model(Notice)
EscalationOut: Any = row_model(Escalation)
IncidentView: Any = row_model(
    Incident,
    "IncidentView",
    pages=(list[PageOut], ...),
    escalations=(list[EscalationOut], ...),
    comments=(list[CommentOut], ...),
    notices=(list[NoticeOut], ...),
)
EscalationView: Any = row_model(
    Escalation, "EscalationView", pages=(list[PageOut], ...), not_yet_paged=(list[str], ...)
)
RetractionOut: Any = row_model(Notice, "RetractionOut", page=(PageOut, ...))


def policy_view(s: Session, p: Policy) -> dict[str, Any]:
    q = select(PolicyLevel).where(PolicyLevel.policy_id == p.id).order_by(PolicyLevel.level)
    return {**row(p), "levels": [row(lv) for lv in s.scalars(q)]}


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


def escalation_view(s: Session, e: Escalation) -> dict[str, Any]:
    q = select(Page).where(Page.escalation_id == e.id).order_by(Page.created, Page.id)
    pages = [row(p) for p in s.scalars(q)]
    paged = {p["responder_id"] for p in pages}
    return {
        **row(e),
        "pages": pages,
        "not_yet_paged": [r for r in e.responder_ids if r not in paged],
    }
