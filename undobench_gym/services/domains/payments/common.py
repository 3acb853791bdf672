"""What the payments routes share: the currency type, the platform balance, the row views
and the response models (the output schemas agents read in the API document)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field, create_model
from sqlalchemy import select
from sqlalchemy.orm import Session

from undobench_gym.services.domains._service.kit import error, row, row_model
from undobench_gym.services.domains.payments.models import (
    Balance,
    Charge,
    Customer,
    Invoice,
    Payout,
    Refund,
    Subscription,
    Transfer,
    Wire,
)

CURRENCY_PATTERN = "^(usd|eur|gbp)$"
Currency = Annotated[str, Field(pattern=CURRENCY_PATTERN)]

# Typed `Any`: mypy takes no run-time model as a type, and routes declare `list[ChargeOut]`.
CustomerOut: Any = row_model(Customer)
ChargeOut: Any = row_model(Charge)
RefundOut: Any = row_model(Refund)
SubscriptionOut: Any = row_model(Subscription)
InvoiceOut: Any = row_model(Invoice)
TransferOut: Any = row_model(Transfer)
WireOut: Any = row_model(Wire)
#: A payout with the transfers paid so far.
PayoutOut: Any = row_model(Payout, transfers=(list[TransferOut], ...))
#: A renewal: the subscription in its new period and the invoice that billed it.
RenewalOut: Any = create_model(
    "RenewalOut", subscription=(SubscriptionOut, ...), invoice=(InvoiceOut, ...)
)


class FxQuoteOut(BaseModel):
    """A quoted conversion; `quote_id` is what create_wire asks for."""

    quote_id: str
    source: str
    target: str
    amount: int
    rate: float
    target_amount: int


def payout_view(s: Session, p: Payout) -> dict[str, Any]:
    transfers = s.scalars(select(Transfer).where(Transfer.payout_id == p.id).order_by(Transfer.id))
    return {**row(p), "transfers": [row(t) for t in transfers]}


def debit(s: Session, currency: str, amount: int) -> None:
    """Take `amount` off the platform balance, refusing (402) to go below zero."""
    bal = s.get(Balance, currency)
    if bal is None or bal.available < amount:
        raise error(402, "insufficient_funds", f"Platform balance in {currency} is too low")
    bal.available -= amount


def credit(s: Session, currency: str, amount: int) -> None:
    """Add `amount` to the platform balance (a currency not held yet opens at it)."""
    bal = s.get(Balance, currency)
    if bal is None:
        s.add(Balance(currency=currency, available=amount))
    else:
        bal.available += amount
