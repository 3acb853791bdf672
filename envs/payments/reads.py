"""Payments read-only routes: what an agent verifies with before it retries."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from sqlalchemy import select

from .._service.kit import READ_ONLY, DbSession, get_or_404, row, seed_of
from .common import (
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
from .fixture import fx_rate, quote_id
from .models import Balance, Charge, Customer, Invoice, Payout, Refund, Subscription, Wire

router = APIRouter(prefix="/v1")


@router.get(
    "/customers",
    operation_id="list_customers",
    openapi_extra=READ_ONLY,
    response_model=list[CustomerOut],
)
def list_customers(
    s: DbSession, email: str | None = Query(None, max_length=255)
) -> list[dict[str, Any]]:
    """List customers, optionally filtered by email."""
    q = select(Customer).order_by(Customer.id)
    if email:
        q = q.where(Customer.email == email)
    return [row(c) for c in s.scalars(q)]


@router.get(
    "/customers/{customer_id}",
    operation_id="get_customer",
    openapi_extra=READ_ONLY,
    response_model=CustomerOut,
)
def get_customer(s: DbSession, customer_id: str) -> dict[str, Any]:
    """Retrieve one customer."""
    return row(get_or_404(s, Customer, customer_id, "customer"))


@router.get(
    "/charges", operation_id="list_charges", openapi_extra=READ_ONLY, response_model=list[ChargeOut]
)
def list_charges(
    s: DbSession, customer_id: str | None = Query(None, max_length=64)
) -> list[dict[str, Any]]:
    """List charges, optionally for one customer."""
    q = select(Charge).order_by(Charge.created, Charge.id)
    if customer_id:
        q = q.where(Charge.customer_id == customer_id)
    return [row(c) for c in s.scalars(q)]


@router.get(
    "/charges/{charge_id}",
    operation_id="get_charge",
    openapi_extra=READ_ONLY,
    response_model=ChargeOut,
)
def get_charge(s: DbSession, charge_id: str) -> dict[str, Any]:
    """Retrieve one charge."""
    return row(get_or_404(s, Charge, charge_id, "charge"))


@router.get(
    "/refunds", operation_id="list_refunds", openapi_extra=READ_ONLY, response_model=list[RefundOut]
)
def list_refunds(
    s: DbSession, charge_id: str | None = Query(None, max_length=64)
) -> list[dict[str, Any]]:
    """List refunds, optionally for one charge."""
    q = select(Refund).order_by(Refund.created, Refund.id)
    if charge_id:
        q = q.where(Refund.charge_id == charge_id)
    return [row(r) for r in s.scalars(q)]


@router.get(
    "/subscriptions/{subscription_id}",
    operation_id="get_subscription",
    openapi_extra=READ_ONLY,
    response_model=SubscriptionOut,
)
def get_subscription(s: DbSession, subscription_id: str) -> dict[str, Any]:
    """Retrieve one subscription."""
    return row(get_or_404(s, Subscription, subscription_id, "subscription"))


@router.get(
    "/invoices",
    operation_id="list_invoices",
    openapi_extra=READ_ONLY,
    response_model=list[InvoiceOut],
)
def list_invoices(
    s: DbSession, subscription_id: str | None = Query(None, max_length=64)
) -> list[dict[str, Any]]:
    """List invoices, optionally for one subscription."""
    q = select(Invoice).order_by(Invoice.created, Invoice.id)
    if subscription_id:
        q = q.where(Invoice.subscription_id == subscription_id)
    return [row(i) for i in s.scalars(q)]


@router.get(
    "/payouts", operation_id="list_payouts", openapi_extra=READ_ONLY, response_model=list[PayoutOut]
)
def list_payouts(
    s: DbSession, reference: str | None = Query(None, max_length=64)
) -> list[dict[str, Any]]:
    """List payouts with their transfers, optionally by reference."""
    q = select(Payout).order_by(Payout.created, Payout.id)
    if reference:
        q = q.where(Payout.reference == reference)
    return [payout_view(s, p) for p in s.scalars(q)]


@router.get(
    "/payouts/{payout_id}",
    operation_id="get_payout",
    openapi_extra=READ_ONLY,
    response_model=PayoutOut,
)
def get_payout(s: DbSession, payout_id: str) -> dict[str, Any]:
    """Retrieve one payout with its transfers."""
    return payout_view(s, get_or_404(s, Payout, payout_id, "payout"))


@router.get(
    "/fx/quote", operation_id="get_fx_quote", openapi_extra=READ_ONLY, response_model=FxQuoteOut
)
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


@router.get(
    "/wires", operation_id="list_wires", openapi_extra=READ_ONLY, response_model=list[WireOut]
)
def list_wires(s: DbSession) -> list[dict[str, Any]]:
    """List outgoing wire transfers."""
    return [row(w) for w in s.scalars(select(Wire).order_by(Wire.created, Wire.id))]


@router.get("/balance", operation_id="get_balance", openapi_extra=READ_ONLY)
def get_balance(s: DbSession) -> dict[str, int]:
    """Available platform balance per currency."""
    return {b.currency: b.available for b in s.scalars(select(Balance))}
