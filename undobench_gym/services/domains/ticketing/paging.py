"""Messages to people: pages, resolution notices, retractions of mistaken pages, comments.

A page or a notice is a real notification: sending it again is a second notification.
`page_responder` takes an Idempotency-Key for that reason; the notices do not.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from undobench_gym.services.domains._service.kit import (
    DbSession,
    Effect,
    Id,
    KeyHeader,
    PathId,
    error,
    filtered,
    get_or_404,
    new_id,
    now,
    read_route,
    row,
    run_mutation,
    write_route,
)
from undobench_gym.services.domains.ticketing.common import (
    SEND_PAGE,
    open_incident_or_409,
    send_page,
)
from undobench_gym.services.domains.ticketing.fixture import AUDIENCES, COMMENT_KINDS
from undobench_gym.services.domains.ticketing.models import Comment, Incident, Notice, Page
from undobench_gym.services.domains.ticketing.views import (
    CommentOut,
    NoticeOut,
    PageOut,
    RetractionOut,
)

router = APIRouter(prefix="/v1")
AUDIENCE_PATTERN = f"^({'|'.join(AUDIENCES)})$"
COMMENT_KIND_PATTERN = f"^({'|'.join(COMMENT_KINDS)})$"
RETRACT_PAGE = Effect("page.retract", "irreversible_send", ("page_id",), compensation=True)
RESOLUTION_NOTICE = Effect("notice.resolution", "irreversible_send", ("incident_id", "audience"))
ADD_COMMENT = Effect("comment.add", "additive", ("incident_id", "kind"))

#: Adds a route's rows in its transaction (after its checks) and returns its answer.
Write = Callable[[Session], dict[str, Any]]


@read_route(router, "/pages", "list_pages", list[PageOut])
def list_pages(
    s: DbSession,
    incident_id: str | None = Query(None, max_length=64),
    responder_id: str | None = Query(None, max_length=64),
) -> list[dict[str, Any]]:
    """List pages sent, oldest first, optionally for one incident or responder."""
    q = filtered(
        select(Page).order_by(Page.created, Page.id),
        (Page.incident_id, incident_id),
        (Page.responder_id, responder_id),
    )
    return [row(p) for p in s.scalars(q)]


@read_route(router, "/notices", "list_notices", list[NoticeOut])
def list_notices(
    s: DbSession, incident_id: str | None = Query(None, max_length=64)
) -> list[dict[str, Any]]:
    """List resolution and disregard notices sent, optionally for one incident."""
    q = select(Notice).order_by(Notice.created, Notice.id)
    return [row(n) for n in s.scalars(filtered(q, (Notice.incident_id, incident_id)))]


class PageIn(BaseModel):
    responder_id: Id
    message: str = Field(min_length=1, max_length=500)


@write_route(
    router, "POST", "/incidents/{incident_id}/pages", "page_responder", SEND_PAGE, PageOut, 201
)
def page_responder(
    request: Request, incident_id: PathId, body: PageIn, idempotency_key: KeyHeader = None
) -> JSONResponse:
    """Page a responder about an open incident: their phone rings. Every call is another
    page. Accepts an Idempotency-Key header."""
    payload = {"incident_id": incident_id, **body.model_dump()}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        inc = open_incident_or_409(s, incident_id, "page anyone")
        return 201, row(send_page(s, inc, body.responder_id, body.message, key=key))

    return run_mutation(
        request, route="page_responder", native=SEND_PAGE.native, payload=payload, apply=apply
    )


def _add(
    request: Request, route: str, effect: Effect, payload: dict[str, Any], write: Write
) -> JSONResponse:
    """One transaction: `write`, then `effect`'s commit-log row (the payload is its args);
    answers 201 with what `write` returned. Every column of a row is set when it is added,
    so that answer is what the flush stores."""

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        answer = write(s)
        effect.commit(s, payload, key)
        s.flush()
        return 201, answer

    return run_mutation(request, route=route, native=effect.native, payload=payload, apply=apply)


def _send_notice(
    s: Session,
    incident_id: str,
    kind: str,
    recipient: str,
    message: str,
    page_id: str | None = None,
) -> Notice:
    """Write a notice row (the caller records the commit: the op depends on the kind)."""
    notice = Notice(
        id=new_id(s, "ntc"),
        incident_id=incident_id,
        kind=kind,
        recipient=recipient,
        message=message,
        page_id=page_id,
        created=now(s),
    )
    s.add(notice)
    return notice


class RetractIn(BaseModel):
    message: str = Field(min_length=1, max_length=1000)


@write_route(
    router, "POST", "/pages/{page_id}/retractions", "retract_page", RETRACT_PAGE, RetractionOut, 201
)
def retract_page(request: Request, page_id: PathId, body: RetractIn) -> JSONResponse:
    """Follow a mistaken page with a "disregard" notice to the responder who got it, and
    mark the page retracted. A page cannot be unsent: every call sends another notice."""

    payload = {"page_id": page_id, **body.model_dump()}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        page = get_or_404(s, Page, page_id, "page")
        # The first retraction undoes the page as far as the world allows (the phone rang):
        # a repair, if the page was not wanted.
        undoes = None if page.retracted else {"op": SEND_PAGE.op, "ref": page.id}
        page.retracted = True
        notice = _send_notice(
            s, page.incident_id, "disregard", page.responder_id, body.message, page.id
        )
        RETRACT_PAGE.commit(s, payload, key, undoes=undoes)
        s.flush()
        return 201, {**row(notice), "page": row(page)}

    return run_mutation(
        request, route="retract_page", native=RETRACT_PAGE.native, payload=payload, apply=apply
    )


class ResolutionNoticeIn(BaseModel):
    audience: str = Field(pattern=AUDIENCE_PATTERN)
    message: str = Field(min_length=1, max_length=1000)


@write_route(
    router,
    "POST",
    "/incidents/{incident_id}/resolution-notices",
    "send_resolution_notice",
    RESOLUTION_NOTICE,
    NoticeOut,
    201,
)
def send_resolution_notice(
    request: Request, incident_id: PathId, body: ResolutionNoticeIn
) -> JSONResponse:
    """Tell an audience (stakeholders, status-page, support) that a resolved incident is
    over. The incident must be resolved first. Every call sends another notice."""

    def write(s: Session) -> dict[str, Any]:
        inc = get_or_404(s, Incident, incident_id, "incident")
        if inc.status != "resolved":
            raise error(
                409,
                "incident_not_resolved",
                f"Incident {inc.external_ref} is {inc.status}; resolve_incident it first",
            )
        return row(_send_notice(s, incident_id, "resolution", body.audience, body.message))

    payload = {"incident_id": incident_id, **body.model_dump()}
    return _add(request, "send_resolution_notice", RESOLUTION_NOTICE, payload, write)


class CommentIn(BaseModel):
    author: str = Field(min_length=1, max_length=128)
    kind: str = Field(
        pattern=COMMENT_KIND_PATTERN,
        description="note, status (an update), handover, or postmortem",
    )
    body: str = Field(min_length=1, max_length=2000)


@write_route(
    router, "POST", "/incidents/{incident_id}/comments", "add_comment", ADD_COMMENT, CommentOut, 201
)
def add_comment(request: Request, incident_id: PathId, body: CommentIn) -> JSONResponse:
    """Add a comment of a kind (note, status, handover, postmortem) to an incident's
    timeline. Every call adds another comment."""

    def write(s: Session) -> dict[str, Any]:
        get_or_404(s, Incident, incident_id, "incident")
        c = Comment(
            id=new_id(s, "cmt"), incident_id=incident_id, created=now(s), **body.model_dump()
        )
        s.add(c)
        return row(c)

    payload = {"incident_id": incident_id, **body.model_dump()}
    return _add(request, "add_comment", ADD_COMMENT, payload, write)
