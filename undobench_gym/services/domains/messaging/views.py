"""What the messaging routes answer with: row views and their response models.

Each model is built once here, in the key order the view answers in, so the OpenAPI
document tells an agent the shape of every answer (the views themselves stay plain dicts).
The models are built at run time, so they are typed `Any`: mypy takes no variable as a
type, and `list[EmailOut]` must be one.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from undobench_gym.services.domains._service.kit import row, row_model
from undobench_gym.services.domains.messaging.models import (
    Channel,
    ChatMessage,
    Email,
    EmailBatch,
    Page,
    PagerService,
    Sms,
    WebhookDelivery,
    WebhookEndpoint,
    WebhookSubscription,
)

ChannelOut: Any = row_model(Channel)
ChatMessageOut: Any = row_model(ChatMessage)
PagerServiceOut: Any = row_model(PagerService)
PageOut: Any = row_model(Page)
#: A trigger says whether it joined an existing page of the same dedup key.
PageTriggerOut: Any = row_model(Page, "PageTriggerOut", deduplicated=(bool, ...))
SmsOut: Any = row_model(Sms)
EmailOut: Any = row_model(Email)
EmailBatchView: Any = row_model(
    EmailBatch, "EmailBatchView", sent_count=(int, ...), emails=(list[EmailOut], ...)
)
WebhookEndpointOut: Any = row_model(WebhookEndpoint)
WebhookSubscriptionOut: Any = row_model(WebhookSubscription)
WebhookDeliveryOut: Any = row_model(WebhookDelivery)


def batch_view(s: Session, b: EmailBatch) -> dict[str, Any]:
    q = select(Email).where(Email.batch_id == b.id).order_by(Email.sent, Email.id)
    sent = [row(e) for e in s.scalars(q)]
    return {**row(b), "sent_count": len(sent), "emails": sent}
