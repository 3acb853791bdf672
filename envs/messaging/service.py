"""Messaging service: read-only routes and the domain definition.

Pager routes and webhook subscriptions live in `pager`, chat and SMS in `sends`, the email
batch composite in `batches`; webhook delivery and the receiving endpoints (mounted on the
admin app, never proxied) in `webhooks`.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from sqlalchemy import select
from sqlalchemy.orm import Session

from .._service.context import DomainService
from .._service.db import insert_fixture
from .._service.mutation import READ_ONLY
from . import batches, pager, sends, webhooks
from .common import ID_PATTERN, PHONE_PATTERN, Ctx, PathId, get_or_404, row
from .fixture import build_fixture
from .models import (
    TABLES,
    Channel,
    ChatMessage,
    Email,
    EmailBatch,
    Page,
    PagerService,
    Received,
    Sms,
    WebhookDelivery,
    WebhookEndpoint,
    WebhookSubscription,
)

router = APIRouter(prefix="/v1")
OptId = Annotated[str | None, Query(max_length=64, pattern=ID_PATTERN)]
OptEndpoint = Annotated[str | None, Query(pattern=webhooks.ENDPOINT_PATTERN)]
OptEvent = Annotated[str | None, Query(pattern=webhooks.EVENT_PATTERN)]


@router.get("/channels", operation_id="list_channels", openapi_extra=READ_ONLY)
def list_channels(ctx: Ctx) -> list[dict[str, Any]]:
    """List chat channels."""
    with Session(ctx.engine) as s:
        return [row(c) for c in s.scalars(select(Channel).order_by(Channel.name))]


@router.get(
    "/channels/{channel_id}/messages", operation_id="list_chat_messages", openapi_extra=READ_ONLY
)
def list_chat_messages(
    ctx: Ctx, channel_id: PathId, limit: int = Query(100, ge=1, le=500)
) -> list[dict[str, Any]]:
    """The messages of a channel, oldest first."""
    with Session(ctx.engine) as s:
        get_or_404(s, Channel, channel_id, "channel")
        q = select(ChatMessage).where(ChatMessage.channel_id == channel_id)
        q = q.order_by(ChatMessage.posted, ChatMessage.id).limit(limit)
        return [row(m) for m in s.scalars(q)]


@router.get("/services", operation_id="list_pager_services", openapi_extra=READ_ONLY)
def list_pager_services(ctx: Ctx) -> list[dict[str, Any]]:
    """List the services on the pager with who is on call (name, phone)."""
    with Session(ctx.engine) as s:
        return [row(p) for p in s.scalars(select(PagerService).order_by(PagerService.name))]


@router.get("/pages", operation_id="list_pages", openapi_extra=READ_ONLY)
def list_pages(
    ctx: Ctx,
    service_id: OptId = None,
    status: str | None = Query(None, pattern="^(triggered|acknowledged|resolved)$"),
    dedup_key: str | None = Query(None, max_length=64),
) -> list[dict[str, Any]]:
    """List pages, optionally for one service, in one status, or by dedup key."""
    with Session(ctx.engine) as s:
        q = select(Page).order_by(Page.created, Page.id)
        if service_id:
            q = q.where(Page.service_id == service_id)
        if status:
            q = q.where(Page.status == status)
        if dedup_key:
            q = q.where(Page.dedup_key == dedup_key)
        return [row(p) for p in s.scalars(q)]


@router.get("/pages/{page_id}", operation_id="get_page", openapi_extra=READ_ONLY)
def get_page(ctx: Ctx, page_id: PathId) -> dict[str, Any]:
    """Retrieve one page."""
    with Session(ctx.engine) as s:
        return row(get_or_404(s, Page, page_id, "page"))


@router.get("/sms", operation_id="list_sms", openapi_extra=READ_ONLY)
def list_sms(ctx: Ctx, to: str | None = Query(None, pattern=PHONE_PATTERN)) -> list[dict[str, Any]]:
    """List sent text messages, oldest first, optionally to one number."""
    with Session(ctx.engine) as s:
        q = select(Sms).order_by(Sms.sent, Sms.id)
        if to:
            q = q.where(Sms.to == to)
        return [row(m) for m in s.scalars(q)]


@router.get("/email-batches", operation_id="list_email_batches", openapi_extra=READ_ONLY)
def list_email_batches(
    ctx: Ctx, reference: str | None = Query(None, max_length=64)
) -> list[dict[str, Any]]:
    """List email batches with their status and the emails sent, optionally by reference."""
    with Session(ctx.engine) as s:
        q = select(EmailBatch).order_by(EmailBatch.created, EmailBatch.id)
        if reference:
            q = q.where(EmailBatch.reference == reference)
        return [batches.batch_view(s, b) for b in s.scalars(q)]


@router.get("/email-batches/{batch_id}", operation_id="get_email_batch", openapi_extra=READ_ONLY)
def get_email_batch(ctx: Ctx, batch_id: PathId) -> dict[str, Any]:
    """Retrieve one email batch with the emails it has sent."""
    with Session(ctx.engine) as s:
        return batches.batch_view(s, get_or_404(s, EmailBatch, batch_id, "email batch"))


@router.get("/webhook-endpoints", operation_id="list_webhook_endpoints", openapi_extra=READ_ONLY)
def list_webhook_endpoints(ctx: Ctx) -> list[dict[str, Any]]:
    """List the webhook endpoints of this workspace that events can be delivered to."""
    with Session(ctx.engine) as s:
        return [row(e) for e in s.scalars(select(WebhookEndpoint).order_by(WebhookEndpoint.id))]


@router.get(
    "/webhook-subscriptions", operation_id="list_webhook_subscriptions", openapi_extra=READ_ONLY
)
def list_webhook_subscriptions(
    ctx: Ctx, endpoint_id: OptEndpoint = None, event: OptEvent = None
) -> list[dict[str, Any]]:
    """List webhook subscriptions (endpoint, event), optionally filtered."""
    with Session(ctx.engine) as s:
        q = select(WebhookSubscription).order_by(WebhookSubscription.id)
        if endpoint_id:
            q = q.where(WebhookSubscription.endpoint_id == endpoint_id)
        if event:
            q = q.where(WebhookSubscription.event == event)
        return [row(w) for w in s.scalars(q)]


@router.get("/webhook-deliveries", operation_id="list_webhook_deliveries", openapi_extra=READ_ONLY)
def list_webhook_deliveries(
    ctx: Ctx, endpoint_id: OptEndpoint = None, event: OptEvent = None
) -> list[dict[str, Any]]:
    """List webhook delivery attempts (delivered or failed), oldest first."""
    with Session(ctx.engine) as s:
        q = select(WebhookDelivery).order_by(WebhookDelivery.attempted, WebhookDelivery.id)
        if endpoint_id:
            q = q.where(WebhookDelivery.endpoint_id == endpoint_id)
        if event:
            q = q.where(WebhookDelivery.event == event)
        return [row(d) for d in s.scalars(q)]


# ---- domain definition -------------------------------------------------------------

_ORDER = (
    ("channels", Channel),
    ("chat_messages", ChatMessage),
    ("services", PagerService),
    ("pages", Page),
    ("sms", Sms),
    ("email_batches", EmailBatch),
    ("emails", Email),
    ("webhook_endpoints", WebhookEndpoint),
    ("webhook_subscriptions", WebhookSubscription),
    ("webhook_deliveries", WebhookDelivery),
    ("received", Received),
)


def seed_state(s: Session, seed: int) -> None:
    insert_fixture(s, build_fixture(seed), _ORDER)


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


DOMAIN = DomainService(
    name="messaging",
    title="UndoBench Messaging",
    routers=[router, pager.router, sends.router, batches.router],
    tables=TABLES,
    seed_state=seed_state,
    partial_state=partial_state,
    admin_routers=[webhooks.receiver],
)

__all__ = ["DOMAIN"]
