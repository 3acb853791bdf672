"""Payments read-only routes: what an agent verifies with before it retries."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from sqlalchemy import select

from undobench_gym.services.domains._service.kit import (
    DbSession,
    filtered,
    get_or_404,
    read_route,
    row,
    seed_of,
)
from undobench_gym.services.domains.payments.common import (
    CURRENCY_PATTERN,
    ChargeOut,
    CustomerOut,
    FxQuoteOut,
    InvoiceOut,
    PayoutOut,
    RefundOut,
    SubscriptionOut,
    WireOut,
    payout_view,
)
from undobench_gym.services.domains.payments.fixture import fx_rate, quote_id
from undobench_gym.services.domains.payments.models import (
    Balance,
    Charge,
    Customer,
    Invoice,
    Payout,
    Refund,
    Subscription,
    Wire,
)

router = APIRouter(prefix="/v1")


@read_route(router, "/customers", "list_customers", list[CustomerOut])
def list_customers(
    s: DbSession, email: str | None = Query(None, max_length=255)
) -> list[dict[str, Any]]:
    """List customers, optionally filtered by email."""
    q = select(Customer).order_by(Customer.id)
    return [row(c) for c in s.scalars(filtered(q, (Customer.email, email)))]


@read_route(router, "/customers/{customer_id}", "get_customer", CustomerOut)
def get_customer(s: DbSession, customer_id: str) -> dict[str, Any]:
    """Retrieve one customer."""
    return row(get_or_404(s, Customer, customer_id, "customer"))


@read_route(router, "/charges", "list_charges", list[ChargeOut])
def list_charges(
    s: DbSession, customer_id: str | None = Query(None, max_length=64)
) -> list[dict[str, Any]]:
    """List charges, optionally for one customer."""
    q = select(Charge).order_by(Charge.created, Charge.id)
    return [row(c) for c in s.scalars(filtered(q, (Charge.customer_id, customer_id)))]


@read_route(router, "/charges/{charge_id}", "get_charge", ChargeOut)
def get_charge(s: DbSession, charge_id: str) -> dict[str, Any]:
    """Retrieve one charge."""
    return row(get_or_404(s, Charge, charge_id, "charge"))


@read_route(router, "/refunds", "list_refunds", list[RefundOut])
def list_refunds(
    s: DbSession, charge_id: str | None = Query(None, max_length=64)
) -> list[dict[str, Any]]:
    """List refunds, optionally for one charge."""
    q = select(Refund).order_by(Refund.created, Refund.id)
    return [row(r) for r in s.scalars(filtered(q, (Refund.charge_id, charge_id)))]


@read_route(router, "/subscriptions/{subscription_id}", "get_subscription", SubscriptionOut)
def get_subscription(s: DbSession, subscription_id: str) -> dict[str, Any]:
    """Retrieve one subscription."""
    return row(get_or_404(s, Subscription, subscription_id, "subscription"))


@read_route(router, "/invoices", "list_invoices", list[InvoiceOut])
def list_invoices(
    s: DbSession, subscription_id: str | None = Query(None, max_length=64)
) -> list[dict[str, Any]]:
    """List invoices, optionally for one subscription."""
    q = select(Invoice).order_by(Invoice.created, Invoice.id)
    return [row(i) for i in s.scalars(filtered(q, (Invoice.subscription_id, subscription_id)))]


@read_route(router, "/payouts", "list_payouts", list[PayoutOut])
def list_payouts(
    s: DbSession, reference: str | None = Query(None, max_length=64)
) -> list[dict[str, Any]]:
    """List payouts with their transfers, optionally by reference."""
    q = select(Payout).order_by(Payout.created, Payout.id)
    return [payout_view(s, p) for p in s.scalars(filtered(q, (Payout.reference, reference)))]


@read_route(router, "/payouts/{payout_id}", "get_payout", PayoutOut)
def get_payout(s: DbSession, payout_id: str) -> dict[str, Any]:
    """Retrieve one payout with its transfers."""
    return payout_view(s, get_or_404(s, Payout, payout_id, "payout"))


@read_route(router, "/fx/quote", "get_fx_quote", FxQuoteOut)
def get_fx_quote(
    s: DbSession,
    source: str = Query(pattern=CURRENCY_PATTERN),
    target: str = Query(pattern=CURRENCY_PATTERN),
    amount: int = Query(gt=0, le=10_000_000),
) -> dict[str, Any]:
    """Quote a cross-border conversion; the quote id is needed to send a wire."""
    seed = seed_of(s)
    rate = fx_rate(seed, source, target)
    return {
        "quote_id": quote_id(seed, source, target, amount),
        "source": source,
        "target": target,
        "amount": amount,
        "rate": rate,
        "target_amount": round(amount * rate),
    }


@read_route(router, "/wires", "list_wires", list[WireOut])
def list_wires(s: DbSession) -> list[dict[str, Any]]:
    """List outgoing wire transfers."""
    return [row(w) for w in s.scalars(select(Wire).order_by(Wire.created, Wire.id))]


@read_route(router, "/balance", "get_balance", dict[str, int])
def get_balance(s: DbSession) -> dict[str, int]:
    """Available platform balance per currency."""
    return {b.currency: b.available for b in s.scalars(select(Balance))}
