"""Email batches: the batch row, then one transaction per recipient.

A named crash point (`msg.after_first_email`) sits between the first and the second send,
so a DURING_MUTATION fault leaves a real half-sent batch: status `sending`, some recipients
mailed, the rest not. resume_email_batch sends what is missing, never a second copy.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, field_validator
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from .._service.context import ServiceContext, get_ctx, maybe_crash, new_id, now
from .._service.mutation import (
    claim_key,
    complete_key,
    effect_meta,
    error,
    honoured_key,
    record_commit,
    release_key,
)
from .common import EMAIL_PATTERN, PathId, get_or_404, row
from .models import Email, EmailBatch

router = APIRouter(prefix="/v1")
CRASH_MID_BATCH = "msg.after_first_email"
Recipient = Annotated[str, Field(min_length=3, max_length=255, pattern=EMAIL_PATTERN)]


def batch_view(s: Session, b: EmailBatch) -> dict[str, Any]:
    q = select(Email).where(Email.batch_id == b.id).order_by(Email.sent, Email.id)
    sent = [row(e) for e in s.scalars(q)]
    return {**row(b), "sent_count": len(sent), "emails": sent}


class BatchIn(BaseModel):
    reference: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    subject: str = Field(min_length=1, max_length=255)
    recipients: list[Recipient] = Field(min_length=1, max_length=50)

    @field_validator("recipients")
    @classmethod
    def _unique(cls, v: list[str]) -> list[str]:
        if len({r.lower() for r in v}) != len(v):
            raise ValueError("each recipient may appear only once")
        return v


def _send_missing(
    request: Request, ctx: ServiceContext, batch_id: str, *, resume: bool = False
) -> None:
    """Send each recipient still unsent in its own transaction, as a mail relay does, then
    mark the batch sent. A resume that finishes a batch records its own commit (the
    emails it sends are `email.send` commits like any other)."""
    with Session(ctx.engine) as s:
        b = get_or_404(s, EmailBatch, batch_id, "email batch")
        recipients, reference, subject = list(b.recipients), b.reference, b.subject
    sent_now: list[str] = []
    for i, recipient in enumerate(recipients):
        if i == 1:
            maybe_crash(request, CRASH_MID_BATCH)
        try:
            with Session(ctx.engine) as s, s.begin():
                q = select(Email).where(Email.batch_id == batch_id, Email.recipient == recipient)
                if s.scalar(q) is not None:
                    continue
                s.add(
                    Email(
                        id=new_id(s, "em"),
                        batch_id=batch_id,
                        reference=reference,
                        recipient=recipient,
                        subject=subject,
                        sent=now(s),
                    )
                )
                identity = {"reference": reference, "recipient": recipient}
                record_commit(
                    s,
                    op="email.send",
                    effect_class="irreversible_send",
                    identity=identity,
                    args={**identity, "batch_id": batch_id},
                )
            sent_now.append(recipient)
        except IntegrityError:
            continue  # a concurrent resume sent this one first
    with Session(ctx.engine) as s, s.begin():
        batch = get_or_404(s, EmailBatch, batch_id, "email batch")
        if batch.status != "sent":
            batch.status = "sent"
            if resume:
                identity = {"batch_id": batch_id}
                record_commit(
                    s,
                    op="email_batch.resume",
                    effect_class="set",
                    identity=identity,
                    args={**identity, "sent": sent_now},
                )


def _create(s: Session, body: BatchIn, key: str | None) -> str:
    found = s.scalar(select(EmailBatch).where(EmailBatch.reference == body.reference))
    if found is not None:
        hint = (
            "finish it with resume_email_batch instead of sending it again"
            if found.status == "sending"
            else "read it with get_email_batch"
        )
        raise error(
            409,
            "resource_exists",
            f"Email batch {body.reference} already exists ({found.id}, {found.status}); {hint}",
        )
    b = EmailBatch(
        id=new_id(s, "eb"),
        reference=body.reference,
        subject=body.subject,
        recipients=list(body.recipients),
        status="sending",
        created=now(s),
    )
    s.add(b)
    record_commit(
        s,
        op="email_batch.create",
        effect_class="create_unique",
        identity={"reference": body.reference},
        args=body.model_dump(),
        key=key,
    )
    try:
        s.flush()
    except IntegrityError as exc:  # a concurrent create won the unique reference
        raise error(409, "resource_exists", f"Email batch {body.reference} exists") from exc
    return b.id


@router.post(
    "/email-batches",
    operation_id="send_email_batch",
    status_code=201,
    openapi_extra=effect_meta("email_batch.create", "create_unique", ["reference"], "constraint"),
)
def send_email_batch(request: Request, body: BatchIn) -> JSONResponse:
    """Email the subject to every recipient, one by one. The reference is unique: a repeat
    is refused (409). A batch left `sending` is finished with resume_email_batch."""
    ctx = get_ctx(request)
    claim = claim_key(
        ctx, honoured_key(request, native=False), "send_email_batch", body.model_dump()
    )
    if isinstance(claim, JSONResponse):
        return claim
    try:
        with Session(ctx.engine) as s, s.begin():
            batch_id = _create(s, body, claim.key if claim else None)
    except Exception:
        release_key(ctx, claim)
        raise
    _send_missing(request, ctx, batch_id)
    with Session(ctx.engine) as s, s.begin():
        view = batch_view(s, get_or_404(s, EmailBatch, batch_id, "email batch"))
        complete_key(s, claim, 201, view)
    return JSONResponse(status_code=201, content=view)


@router.post(
    "/email-batches/{batch_id}/resume",
    operation_id="resume_email_batch",
    openapi_extra=effect_meta("email_batch.resume", "set", ["batch_id"]),
)
def resume_email_batch(request: Request, batch_id: PathId) -> dict[str, Any]:
    """Send the emails a `sending` batch still owes; a sent batch is left as it is."""
    ctx = get_ctx(request)
    _send_missing(request, ctx, batch_id, resume=True)
    with Session(ctx.engine) as s:
        return batch_view(s, get_or_404(s, EmailBatch, batch_id, "email batch"))
