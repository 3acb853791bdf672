"""Messaging service: read-only routes and the domain definition.

Pager routes and webhook subscriptions live in `pager`, chat and SMS in `sends`, the email
batch composite in `batches`; webhook delivery and the receiving endpoints (mounted on the
admin app, never proxied) in `webhooks`.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from sqlalchemy import select

from undobench_gym.services.domains._service.kit import (
    DbSession,
    DomainService,
    filtered,
    get_or_404,
    read_route,
    row,
)
from undobench_gym.services.domains.messaging import batches, pager, sends, webhooks
from undobench_gym.services.domains.messaging.common import ID_PATTERN, PHONE_PATTERN, PathId
from undobench_gym.services.domains.messaging.fixture import build_fixture
from undobench_gym.services.domains.messaging.models import (
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
from undobench_gym.services.domains.messaging.views import (
    ChannelOut,
    ChatMessageOut,
    EmailBatchView,
    PageOut,
    PagerServiceOut,
    SmsOut,
    WebhookDeliveryOut,
    WebhookEndpointOut,
    WebhookSubscriptionOut,
    batch_view,
)

router = APIRouter(prefix="/v1")
OptId = Annotated[str | None, Query(max_length=64, pattern=ID_PATTERN)]
OptEndpoint = Annotated[str | None, Query(pattern=webhooks.ENDPOINT_PATTERN)]
OptEvent = Annotated[str | None, Query(pattern=webhooks.EVENT_PATTERN)]


@read_route(router, "/channels", "list_channels", list[ChannelOut])
def list_channels(s: DbSession) -> list[dict[str, Any]]:
    """List chat channels."""
    return [row(c) for c in s.scalars(select(Channel).order_by(Channel.name))]


@read_route(router, "/channels/{channel_id}/messages", "list_chat_messages", list[ChatMessageOut])
def list_chat_messages(
    s: DbSession, channel_id: PathId, limit: int = Query(100, ge=1, le=500)
) -> list[dict[str, Any]]:
    """The messages of a channel, oldest first."""
    get_or_404(s, Channel, channel_id, "channel")
    q = select(ChatMessage).where(ChatMessage.channel_id == channel_id)
    q = q.order_by(ChatMessage.posted, ChatMessage.id).limit(limit)
    return [row(m) for m in s.scalars(q)]


@read_route(router, "/services", "list_pager_services", list[PagerServiceOut])
def list_pager_services(s: DbSession) -> list[dict[str, Any]]:
    """List the services on the pager with who is on call (name, phone)."""
    return [row(p) for p in s.scalars(select(PagerService).order_by(PagerService.name))]


@read_route(router, "/pages", "list_pages", list[PageOut])
def list_pages(
    s: DbSession,
    service_id: OptId = None,
    status: str | None = Query(None, pattern="^(triggered|acknowledged|resolved)$"),
    dedup_key: str | None = Query(None, max_length=64),
) -> list[dict[str, Any]]:
    """List pages, optionally for one service, in one status, or by dedup key."""
    q = filtered(
        select(Page).order_by(Page.created, Page.id),
        (Page.service_id, service_id),
        (Page.status, status),
        (Page.dedup_key, dedup_key),
    )
    return [row(p) for p in s.scalars(q)]


@read_route(router, "/pages/{page_id}", "get_page", PageOut)
def get_page(s: DbSession, page_id: PathId) -> dict[str, Any]:
    """Retrieve one page."""
    return row(get_or_404(s, Page, page_id, "page"))


@read_route(router, "/sms", "list_sms", list[SmsOut])
def list_sms(
    s: DbSession, to: str | None = Query(None, pattern=PHONE_PATTERN)
) -> list[dict[str, Any]]:
    """List sent text messages, oldest first, optionally to one number."""
    return [
        row(m) for m in s.scalars(filtered(select(Sms).order_by(Sms.sent, Sms.id), (Sms.to, to)))
    ]


@read_route(router, "/email-batches", "list_email_batches", list[EmailBatchView])
def list_email_batches(
    s: DbSession, reference: str | None = Query(None, max_length=64)
) -> list[dict[str, Any]]:
    """List email batches with their status and the emails sent, optionally by reference."""
    q = select(EmailBatch).order_by(EmailBatch.created, EmailBatch.id)
    return [batch_view(s, b) for b in s.scalars(filtered(q, (EmailBatch.reference, reference)))]


@read_route(router, "/email-batches/{batch_id}", "get_email_batch", EmailBatchView)
def get_email_batch(s: DbSession, batch_id: PathId) -> dict[str, Any]:
    """Retrieve one email batch with the emails it has sent."""
    return batch_view(s, get_or_404(s, EmailBatch, batch_id, "email batch"))


@read_route(router, "/webhook-endpoints", "list_webhook_endpoints", list[WebhookEndpointOut])
def list_webhook_endpoints(s: DbSession) -> list[dict[str, Any]]:
    """List the webhook endpoints of this workspace that events can be delivered to."""
    return [row(e) for e in s.scalars(select(WebhookEndpoint).order_by(WebhookEndpoint.id))]


@read_route(
    router, "/webhook-subscriptions", "list_webhook_subscriptions", list[WebhookSubscriptionOut]
)
def list_webhook_subscriptions(
    s: DbSession, endpoint_id: OptEndpoint = None, event: OptEvent = None
) -> list[dict[str, Any]]:
    """List webhook subscriptions (endpoint, event), optionally filtered."""
    q = filtered(
        select(WebhookSubscription).order_by(WebhookSubscription.id),
        (WebhookSubscription.endpoint_id, endpoint_id),
        (WebhookSubscription.event, event),
    )
    return [row(w) for w in s.scalars(q)]


@read_route(router, "/webhook-deliveries", "list_webhook_deliveries", list[WebhookDeliveryOut])
def list_webhook_deliveries(
    s: DbSession, endpoint_id: OptEndpoint = None, event: OptEvent = None
) -> list[dict[str, Any]]:
    """List webhook delivery attempts (delivered or failed), oldest first."""
    q = filtered(
        select(WebhookDelivery).order_by(WebhookDelivery.attempted, WebhookDelivery.id),
        (WebhookDelivery.endpoint_id, endpoint_id),
        (WebhookDelivery.event, event),
    )
    return [row(d) for d in s.scalars(q)]


# ---- domain definition -------------------------------------------------------------

#: Fixture keys and their models, parents first (foreign keys).
FIXTURE_ORDER = (
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

DOMAIN = DomainService(
    name="messaging",
    title="UndoBench Messaging",
    routers=[router, pager.router, sends.router, batches.router],
    tables=TABLES,
    fixture=build_fixture,
    fixture_order=FIXTURE_ORDER,
    partial_state=batches.partial_state,
    admin_routers=[webhooks.receiver],
)

__all__ = ["DOMAIN"]
