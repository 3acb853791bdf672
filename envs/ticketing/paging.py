"""Messages to people: pages, resolution notices, retractions of mistaken pages, comments.

A page or a notice is a real notification: sending it again is a second notification.
`page_responder` takes an Idempotency-Key for that reason; the notices do not.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from .._service.context import new_id, now
from .._service.mutation import READ_ONLY, effect_meta, error, record_commit, run_mutation
from .common import Ctx, Id, PathId, get_or_404, open_incident_or_409, row, send_page
from .fixture import AUDIENCES, COMMENT_KINDS
from .models import Comment, Incident, Notice, Page

router = APIRouter(prefix="/v1")
KeyHeader = Annotated[str | None, Header(alias="Idempotency-Key", max_length=255)]
AUDIENCE_PATTERN = f"^({'|'.join(AUDIENCES)})$"
COMMENT_KIND_PATTERN = f"^({'|'.join(COMMENT_KINDS)})$"


@router.get("/pages", operation_id="list_pages", openapi_extra=READ_ONLY)
def list_pages(
    ctx: Ctx,
    incident_id: str | None = Query(None, max_length=64),
    responder_id: str | None = Query(None, max_length=64),
) -> list[dict[str, Any]]:
    """List pages sent, oldest first, optionally for one incident or responder."""
    with Session(ctx.engine) as s:
        q = select(Page).order_by(Page.created, Page.id)
        if incident_id:
            q = q.where(Page.incident_id == incident_id)
        if responder_id:
            q = q.where(Page.responder_id == responder_id)
        return [row(p) for p in s.scalars(q)]


@router.get("/notices", operation_id="list_notices", openapi_extra=READ_ONLY)
def list_notices(
    ctx: Ctx, incident_id: str | None = Query(None, max_length=64)
) -> list[dict[str, Any]]:
    """List resolution and disregard notices sent, optionally for one incident."""
    with Session(ctx.engine) as s:
        q = select(Notice).order_by(Notice.created, Notice.id)
        if incident_id:
            q = q.where(Notice.incident_id == incident_id)
        return [row(n) for n in s.scalars(q)]


class PageIn(BaseModel):
    responder_id: Id
    message: str = Field(min_length=1, max_length=500)


@router.post(
    "/incidents/{incident_id}/pages",
    operation_id="page_responder",
    status_code=201,
    openapi_extra=effect_meta(
        "page.send", "irreversible_send", ["incident_id", "responder_id"], "native"
    ),
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

    return run_mutation(request, route="page_responder", native=True, payload=payload, apply=apply)


class RetractIn(BaseModel):
    message: str = Field(min_length=1, max_length=1000)


@router.post(
    "/pages/{page_id}/retractions",
    operation_id="retract_page",
    status_code=201,
    openapi_extra=effect_meta("page.retract", "irreversible_send", ["page_id"], compensation=True),
)
def retract_page(request: Request, page_id: PathId, body: RetractIn) -> JSONResponse:
    """Follow a mistaken page with a "disregard" notice to the responder who got it, and
    mark the page retracted. A page cannot be unsent: every call sends another notice."""
    payload = {"page_id": page_id, **body.model_dump()}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        page: Page = get_or_404(s, Page, page_id, "page")
        page.retracted = True
        notice = Notice(
            id=new_id(s, "ntc"),
            incident_id=page.incident_id,
            kind="disregard",
            recipient=page.responder_id,
            message=body.message,
            page_id=page.id,
            created=now(s),
        )
        s.add(notice)
        record_commit(
            s,
            op="page.retract",
            effect_class="irreversible_send",
            identity={"page_id": page_id},
            args=payload,
            key=key,
            compensation=True,
        )
        s.flush()
        return 201, {**row(notice), "page": row(page)}

    return run_mutation(request, route="retract_page", native=False, payload=payload, apply=apply)


class ResolutionNoticeIn(BaseModel):
    audience: str = Field(pattern=AUDIENCE_PATTERN)
    message: str = Field(min_length=1, max_length=1000)


@router.post(
    "/incidents/{incident_id}/resolution-notices",
    operation_id="send_resolution_notice",
    status_code=201,
    openapi_extra=effect_meta(
        "notice.resolution", "irreversible_send", ["incident_id", "audience"]
    ),
)
def send_resolution_notice(
    request: Request, incident_id: PathId, body: ResolutionNoticeIn
) -> JSONResponse:
    """Tell an audience (stakeholders, status-page, support) that a resolved incident is
    over. The incident must be resolved first. Every call sends another notice."""
    payload = {"incident_id": incident_id, **body.model_dump()}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        inc: Incident = get_or_404(s, Incident, incident_id, "incident")
        if inc.status != "resolved":
            raise error(
                409,
                "incident_not_resolved",
                f"Incident {inc.external_ref} is {inc.status}; resolve_incident it first",
            )
        notice = Notice(
            id=new_id(s, "ntc"),
            incident_id=incident_id,
            kind="resolution",
            recipient=body.audience,
            message=body.message,
            page_id=None,
            created=now(s),
        )
        s.add(notice)
        record_commit(
            s,
            op="notice.resolution",
            effect_class="irreversible_send",
            identity={"incident_id": incident_id, "audience": body.audience},
            args=payload,
            key=key,
        )
        s.flush()
        return 201, row(notice)

    return run_mutation(
        request, route="send_resolution_notice", native=False, payload=payload, apply=apply
    )


class CommentIn(BaseModel):
    author: str = Field(min_length=1, max_length=128)
    kind: str = Field(
        pattern=COMMENT_KIND_PATTERN,
        description="note, status (an update), handover, or postmortem",
    )
    body: str = Field(min_length=1, max_length=2000)


@router.post(
    "/incidents/{incident_id}/comments",
    operation_id="add_comment",
    status_code=201,
    openapi_extra=effect_meta("comment.add", "additive", ["incident_id", "kind"]),
)
def add_comment(request: Request, incident_id: PathId, body: CommentIn) -> JSONResponse:
    """Add a comment of a kind (note, status, handover, postmortem) to an incident's
    timeline. Every call adds another comment."""
    payload = {"incident_id": incident_id, **body.model_dump()}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        get_or_404(s, Incident, incident_id, "incident")
        c = Comment(
            id=new_id(s, "cmt"), incident_id=incident_id, created=now(s), **body.model_dump()
        )
        s.add(c)
        record_commit(
            s,
            op="comment.add",
            effect_class="additive",
            identity={"incident_id": incident_id, "kind": body.kind},
            args=payload,
            key=key,
        )
        s.flush()
        return 201, row(c)

    return run_mutation(request, route="add_comment", native=False, payload=payload, apply=apply)
