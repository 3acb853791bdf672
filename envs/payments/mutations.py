"""Payments single-transaction mutations: customers, charges, refunds, subscriptions, wires.

Each runs through `run_mutation`, which writes its commit-log row and its stored
Idempotency-Key response in the mutation's own transaction.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from .._service.kit import (
    Id,
    KeyHeader,
    effect_meta,
    error,
    get_or_404,
    new_id,
    now,
    record_commit,
    row,
    run_mutation,
    seed_of,
)
from .common import (
    ChargeOut,
    Currency,
    CustomerOut,
    RefundOut,
    RenewalOut,
    SubscriptionOut,
    WireOut,
    credit,
    debit,
)
from .fixture import fx_rate, quote_id
from .models import Charge, Customer, Invoice, Refund, Subscription, Wire

router = APIRouter(prefix="/v1")


class CustomerIn(BaseModel):
    email: str = Field(min_length=3, max_length=255, pattern=r"^[^@\s]+@[^@\s]+$")
    name: str = Field(min_length=1, max_length=255)


@router.post(
    "/customers",
    operation_id="create_customer",
    status_code=201,
    openapi_extra=effect_meta("customer.create", "create_unique", ["email"], "constraint"),
    response_model=CustomerOut,
)
def create_customer(request: Request, body: CustomerIn) -> JSONResponse:
    """Create a customer; the email must be unique."""

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        if s.scalar(select(Customer).where(Customer.email == body.email)) is not None:
            raise error(409, "resource_exists", f"A customer with email {body.email} exists")
        c = Customer(id=new_id(s, "cus"), email=body.email, name=body.name, created=now(s))
        s.add(c)
        record_commit(
            s,
            op="customer.create",
            effect_class="create_unique",
            identity={"email": body.email},
            args=body.model_dump(),
            key=key,
        )
        s.flush()
        return 201, row(c)

    return run_mutation(
        request, route="create_customer", native=False, payload=body.model_dump(), apply=apply
    )


class ChargeIn(BaseModel):
    customer_id: Id
    amount: int = Field(gt=0, le=10_000_000)
    currency: Currency
    description: str = Field(min_length=1, max_length=255)


#: Who is charged how much: the description is free text, and a re-sent charge with a
#: reworded description charges the customer twice all the same.
CHARGE_IDENTITY = ["customer_id", "amount", "currency"]


@router.post(
    "/charges",
    operation_id="create_charge",
    status_code=201,
    openapi_extra=effect_meta("charge.create", "additive", CHARGE_IDENTITY, "native"),
    response_model=ChargeOut,
)
def create_charge(
    request: Request, body: ChargeIn, idempotency_key: KeyHeader = None
) -> JSONResponse:
    """Charge a customer. Accepts an Idempotency-Key header."""

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        get_or_404(s, Customer, body.customer_id, "customer")
        ch = Charge(
            id=new_id(s, "ch"),
            customer_id=body.customer_id,
            amount=body.amount,
            currency=body.currency,
            description=body.description,
            amount_refunded=0,
            status="succeeded",
            created=now(s),
        )
        s.add(ch)
        credit(s, body.currency, body.amount)
        record_commit(
            s,
            op="charge.create",
            effect_class="additive",
            identity=body.model_dump(include=set(CHARGE_IDENTITY)),
            args=body.model_dump(),
            key=key,
        )
        s.flush()
        return 201, row(ch)

    return run_mutation(
        request, route="create_charge", native=True, payload=body.model_dump(), apply=apply
    )


class RefundIn(BaseModel):
    charge_id: Id
    amount: int = Field(gt=0, le=10_000_000)
    reason: str = Field(default="requested_by_customer", max_length=64)


@router.post(
    "/refunds",
    operation_id="create_refund",
    status_code=201,
    openapi_extra=effect_meta(
        "refund.create", "additive", ["charge_id", "amount"], "native", compensation=True
    ),
    response_model=RefundOut,
)
def create_refund(
    request: Request, body: RefundIn, idempotency_key: KeyHeader = None
) -> JSONResponse:
    """Refund part or all of a charge. Accepts an Idempotency-Key header."""

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        ch = get_or_404(s, Charge, body.charge_id, "charge")
        if ch.amount_refunded + body.amount > ch.amount:
            raise error(
                400,
                "refund_exceeds_charge",
                f"Refund would exceed the charge ({ch.amount - ch.amount_refunded} left)",
            )
        ch.amount_refunded += body.amount
        if ch.amount_refunded == ch.amount:
            ch.status = "refunded"
        debit(s, ch.currency, body.amount)
        r = Refund(
            id=new_id(s, "re"),
            charge_id=ch.id,
            amount=body.amount,
            reason=body.reason,
            created=now(s),
        )
        s.add(r)
        record_commit(
            s,
            op="refund.create",
            effect_class="additive",
            identity={"charge_id": body.charge_id, "amount": body.amount},
            args=body.model_dump(),
            key=key,
            compensation=True,
        )
        s.flush()
        return 201, row(r)

    return run_mutation(
        request, route="create_refund", native=True, payload=body.model_dump(), apply=apply
    )


@router.post(
    "/subscriptions/{subscription_id}/renew",
    operation_id="renew_subscription",
    openapi_extra=effect_meta("subscription.renew", "additive", ["subscription_id"], "none"),
    response_model=RenewalOut,
)
def renew_subscription(request: Request, subscription_id: str) -> JSONResponse:
    """Bill the next period of a subscription: creates an invoice and a charge."""

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        sub = get_or_404(s, Subscription, subscription_id, "subscription")
        if sub.status != "active":
            raise error(400, "subscription_inactive", f"Subscription is {sub.status}")
        sub.period += 1
        billed = now(s)  # the invoice and the charge it bills carry the same time
        ch = Charge(
            id=new_id(s, "ch"),
            customer_id=sub.customer_id,
            amount=sub.amount,
            currency=sub.currency,
            description=f"Subscription {sub.id} period {sub.period}",
            amount_refunded=0,
            status="succeeded",
            created=billed,
        )
        s.add(ch)
        credit(s, sub.currency, sub.amount)
        inv = Invoice(
            id=new_id(s, "in"),
            subscription_id=sub.id,
            period=sub.period,
            charge_id=ch.id,
            amount=sub.amount,
            created=billed,
        )
        s.add(inv)
        record_commit(
            s,
            op="subscription.renew",
            effect_class="additive",
            identity={"subscription_id": subscription_id},
            args={"subscription_id": subscription_id},
            key=key,
        )
        s.flush()
        return 200, {"subscription": row(sub), "invoice": row(inv)}

    return run_mutation(
        request,
        route="renew_subscription",
        native=False,
        payload={"subscription_id": subscription_id},
        apply=apply,
    )


class SubscriptionStatusIn(BaseModel):
    status: str = Field(pattern="^(active|canceled|paused)$")


@router.put(
    "/subscriptions/{subscription_id}/status",
    operation_id="set_subscription_status",
    openapi_extra=effect_meta("subscription.status", "set", ["subscription_id", "status"], "none"),
    response_model=SubscriptionOut,
)
def set_subscription_status(
    request: Request, subscription_id: str, body: SubscriptionStatusIn
) -> JSONResponse:
    """Set a subscription's status (active, canceled, paused)."""

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        sub = get_or_404(s, Subscription, subscription_id, "subscription")
        sub.status = body.status
        record_commit(
            s,
            op="subscription.status",
            effect_class="set",
            identity={"subscription_id": subscription_id, "status": body.status},
            args=body.model_dump(),
            key=key,
        )
        return 200, row(sub)

    return run_mutation(
        request,
        route="set_subscription_status",
        native=False,
        payload={"id": subscription_id, **body.model_dump()},
        apply=apply,
    )


class WireIn(BaseModel):
    quote_id: Id
    beneficiary_iban: str = Field(pattern=r"^[A-Z]{2}[0-9]{2}[A-Z0-9]{10,30}$")
    amount: int = Field(gt=0, le=10_000_000)
    source_currency: Currency
    target_currency: Currency


#: Where the money goes and how much, in which currencies; the quote is a means to it.
WIRE_IDENTITY = ["beneficiary_iban", "amount", "source_currency", "target_currency"]


@router.post(
    "/wires",
    operation_id="create_wire",
    status_code=201,
    openapi_extra=effect_meta("wire.send", "irreversible_send", WIRE_IDENTITY, "native"),
    response_model=WireOut,
)
def create_wire(request: Request, body: WireIn, idempotency_key: KeyHeader = None) -> JSONResponse:
    """Send a cross-border wire at a quoted rate. Irreversible. Accepts an Idempotency-Key."""

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        seed = seed_of(s)
        expected = quote_id(seed, body.source_currency, body.target_currency, body.amount)
        if body.quote_id != expected:
            raise error(400, "invalid_quote", "The quote does not match this wire; get a new quote")
        debit(s, body.source_currency, body.amount)
        rate = fx_rate(seed, body.source_currency, body.target_currency)
        w = Wire(
            id=new_id(s, "wire"),
            quote_id=body.quote_id,
            beneficiary_iban=body.beneficiary_iban,
            amount=body.amount,
            source_currency=body.source_currency,
            target_currency=body.target_currency,
            target_amount=round(body.amount * rate),
            status="sent",
            created=now(s),
        )
        s.add(w)
        record_commit(
            s,
            op="wire.send",
            effect_class="irreversible_send",
            identity=body.model_dump(include=set(WIRE_IDENTITY)),
            args=body.model_dump(),
            key=key,
        )
        s.flush()
        return 201, row(w)

    return run_mutation(
        request, route="create_wire", native=True, payload=body.model_dump(), apply=apply
    )
