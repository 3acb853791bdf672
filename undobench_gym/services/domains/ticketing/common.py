"""What the ticketing routes share: read routes and their optional filters, and the rules
(an incident must be open, one escalation at a time, a page is a real notification)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from undobench_gym.services.domains._service.kit import Effect, error, get_or_404, new_id, now
from undobench_gym.services.domains.ticketing.models import Escalation, Incident, Page, Responder

SEVERITY_PATTERN = "^sev[1-4]$"
#: A page by hand (page_responder) or by an escalation: who was paged about what.
SEND_PAGE = Effect("page.send", "irreversible_send", ("incident_id", "responder_id"), "native")


def require_open(inc: Incident, doing: str) -> Incident:
    """`inc`, unless it is resolved (409: reopen it first)."""
    if inc.status == "resolved":
        raise error(
            409,
            "incident_resolved",
            f"Incident {inc.external_ref} is resolved; reopen_incident it before you {doing}",
        )
    return inc


def open_incident_or_409(s: Session, incident_id: str, doing: str) -> Incident:
    """The incident (404 if there is none), unless it is resolved (409)."""
    return require_open(get_or_404(s, Incident, incident_id, "incident"), doing)


def require_no_escalation(s: Session, incident_id: str) -> None:
    """An escalation still in progress must be finished before another change of level."""
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
    SEND_PAGE.commit(
        s,
        {"incident_id": inc.id, "responder_id": responder_id, "message": message},
        key,
        ref=page.id,
    )
    s.flush()
    return page
