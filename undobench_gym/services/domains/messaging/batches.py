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

from undobench_gym.services.domains._service.kit import (
    Effect,
    error,
    flush_or_409,
    get_ctx,
    get_or_404,
    maybe_crash,
    new_id,
    now,
    run_composite,
    write_route,
)
from undobench_gym.services.domains.messaging.common import EMAIL_PATTERN, PathId
from undobench_gym.services.domains.messaging.models import Email, EmailBatch
from undobench_gym.services.domains.messaging.views import EmailBatchView, batch_view

router = APIRouter(prefix="/v1")
CRASH_MID_BATCH = "msg.after_first_email"
#: One batch per reference; each email of it is one send to one recipient.
CREATE_BATCH = Effect("email_batch.create", "create_unique", ("reference",), "constraint")
SEND_EMAIL = Effect("email.send", "irreversible_send", ("reference", "recipient"))
RESUME_BATCH = Effect("email_batch.resume", "set", ("batch_id",), resumption=True)
Recipient = Annotated[str, Field(min_length=3, max_length=255, pattern=EMAIL_PATTERN)]


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


def _send_missing(request: Request, batch_id: str, *, resume: bool = False) -> None:
    """Send each recipient still unsent in its own transaction, as a mail relay does, then
    mark the batch sent. A resume that finishes a batch records its own commit (the
    emails it sends are `email.send` commits like any other)."""
    engine = get_ctx(request).engine
    with Session(engine) as s:
        b = get_or_404(s, EmailBatch, batch_id, "email batch")
        recipients, reference, subject = list(b.recipients), b.reference, b.subject
    sent_now: list[str] = []
    for i, recipient in enumerate(recipients):
        if i == 1:
            maybe_crash(request, CRASH_MID_BATCH)
        try:
            with Session(engine) as s, s.begin():
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
                args = {"reference": reference, "recipient": recipient, "batch_id": batch_id}
                SEND_EMAIL.commit(s, args, None)
            sent_now.append(recipient)
        except IntegrityError:
            continue  # a concurrent resume sent this one first
    with Session(engine) as s, s.begin():
        batch = get_or_404(s, EmailBatch, batch_id, "email batch")
        if batch.status != "sent":
            batch.status = "sent"
            if resume:
                RESUME_BATCH.commit(s, {"batch_id": batch_id, "sent": sent_now}, None)


def _create(s: Session, body: BatchIn, key: str | None) -> str:
    """Create the batch (status `sending`) in one transaction; its id."""
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
    CREATE_BATCH.commit(s, body.model_dump(), key)
    flush_or_409(s, f"Email batch {body.reference} exists")
    return b.id


def _view(s: Session, batch_id: str) -> dict[str, Any]:
    return batch_view(s, get_or_404(s, EmailBatch, batch_id, "email batch"))


@write_route(
    router, "POST", "/email-batches", "send_email_batch", CREATE_BATCH, EmailBatchView, 201
)
def send_email_batch(request: Request, body: BatchIn) -> JSONResponse:
    """Email the subject to every recipient, one by one. The reference is unique: a repeat
    is refused (409). A batch left `sending` is finished with resume_email_batch."""
    return run_composite(
        request,
        route="send_email_batch",
        payload=body.model_dump(),
        start=lambda s, key: _create(s, body, key),
        advance=lambda batch_id: _send_missing(request, batch_id),
        view=_view,
    )


@write_route(
    router,
    "POST",
    "/email-batches/{batch_id}/resume",
    "resume_email_batch",
    RESUME_BATCH,
    EmailBatchView,
)
def resume_email_batch(request: Request, batch_id: PathId) -> dict[str, Any]:
    """Send the emails a `sending` batch still owes; a sent batch is left as it is."""
    # Not a `run_composite`: a resume takes no Idempotency-Key (it is safe to repeat), and
    # honouring one in the "all" mode would replay an old answer instead of finishing.
    _send_missing(request, batch_id, resume=True)
    with Session(get_ctx(request).engine) as s:
        return _view(s, batch_id)


def partial_state(state: dict[str, Any]) -> list[str]:
    """An email batch stuck in `sending` is half-sent."""
    tables = state["tables"]
    issues = []
    for b in tables["msg_email_batches"]:
        if b["status"] != "sent":
            sent = [e for e in tables["msg_emails"] if e["batch_id"] == b["id"]]
            issues.append(
                f"email batch {b['id']} ({b['reference']}) is {b['status']} with "
                f"{len(sent)}/{len(b['recipients'])} emails sent"
            )
    return issues
