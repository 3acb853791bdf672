"""Messaging tables (SQLAlchemy 2.0 declarative)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, ForeignKey, Integer, String, Table, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from undobench_gym.services.domains._service.kit import Base


class Channel(Base):
    __tablename__ = "msg_channels"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    topic: Mapped[str] = mapped_column(String(255))


class ChatMessage(Base):
    __tablename__ = "msg_chat_messages"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    channel_id: Mapped[str] = mapped_column(ForeignKey("msg_channels.id"))
    text: Mapped[str] = mapped_column(String(2000))
    posted: Mapped[str] = mapped_column(String(32))


class PagerService(Base):
    """A service on the pager, with who is on call for it."""

    __tablename__ = "msg_services"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    oncall_name: Mapped[str] = mapped_column(String(255))
    oncall_phone: Mapped[str] = mapped_column(String(16))


class Page(Base):
    __tablename__ = "msg_pages"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    service_id: Mapped[str] = mapped_column(ForeignKey("msg_services.id"))
    summary: Mapped[str] = mapped_column(String(255))
    severity: Mapped[str] = mapped_column(String(16))  # critical | high | low
    #: The alert's dedup key: a second trigger with the same key joins the existing page.
    dedup_key: Mapped[str] = mapped_column(String(64), unique=True)
    status: Mapped[str] = mapped_column(String(16))  # triggered | acknowledged | resolved
    resolution_note: Mapped[str | None] = mapped_column(String(500), nullable=True)
    created: Mapped[str] = mapped_column(String(32))
    updated: Mapped[str] = mapped_column(String(32))


class Sms(Base):
    __tablename__ = "msg_sms"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    to: Mapped[str] = mapped_column(String(16))
    body: Mapped[str] = mapped_column(String(480))
    sent: Mapped[str] = mapped_column(String(32))


class EmailBatch(Base):
    __tablename__ = "msg_email_batches"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    reference: Mapped[str] = mapped_column(String(64), unique=True)
    subject: Mapped[str] = mapped_column(String(255))
    recipients: Mapped[list[str]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16))  # sending | sent
    created: Mapped[str] = mapped_column(String(32))


class Email(Base):
    __tablename__ = "msg_emails"
    __table_args__ = (UniqueConstraint("batch_id", "recipient"),)
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    batch_id: Mapped[str] = mapped_column(ForeignKey("msg_email_batches.id"))
    reference: Mapped[str] = mapped_column(String(64))
    recipient: Mapped[str] = mapped_column(String(255))
    subject: Mapped[str] = mapped_column(String(255))
    sent: Mapped[str] = mapped_column(String(32))


class WebhookEndpoint(Base):
    """A receiving endpoint of this workspace; subscriptions name one, never a URL."""

    __tablename__ = "msg_webhook_endpoints"
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    description: Mapped[str] = mapped_column(String(255))


class WebhookSubscription(Base):
    __tablename__ = "msg_webhook_subscriptions"
    __table_args__ = (UniqueConstraint("endpoint_id", "event"),)
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    endpoint_id: Mapped[str] = mapped_column(ForeignKey("msg_webhook_endpoints.id"))
    event: Mapped[str] = mapped_column(String(32))
    created: Mapped[str] = mapped_column(String(32))


class WebhookDelivery(Base):
    """The sender's record of each delivery attempt."""

    __tablename__ = "msg_webhook_deliveries"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    subscription_id: Mapped[str] = mapped_column(ForeignKey("msg_webhook_subscriptions.id"))
    endpoint_id: Mapped[str] = mapped_column(String(40))
    event: Mapped[str] = mapped_column(String(32))
    ref: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))  # delivered | failed
    response_status: Mapped[int | None] = mapped_column(Integer, nullable=True)
    attempted: Mapped[str] = mapped_column(String(32))


class Received(Base):
    """The receiving side's log: every request that reached a receiver endpoint."""

    __tablename__ = "msg_received"
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    endpoint_id: Mapped[str] = mapped_column(String(40))
    event: Mapped[str] = mapped_column(String(32))
    ref: Mapped[str] = mapped_column(String(64))
    delivery_id: Mapped[str] = mapped_column(String(32))
    body: Mapped[dict[str, Any]] = mapped_column(JSON)
    received: Mapped[str] = mapped_column(String(32))


# Parents first: reset deletes in reverse order.
TABLES: list[Table] = [
    Base.metadata.tables[m.__tablename__]
    for m in (
        Channel,
        ChatMessage,
        PagerService,
        Page,
        Sms,
        EmailBatch,
        Email,
        WebhookEndpoint,
        WebhookSubscription,
        WebhookDelivery,
        Received,
    )
]
