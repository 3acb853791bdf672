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

from undobench_gym.services.domains._service.kit import (
    Effect,
    Id,
    KeyHeader,
    error,
    get_or_404,
    new_id,
    now,
    row,
    run_mutation,
    seed_of,
    write_route,
)
from undobench_gym.services.domains.payments.common import (
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
from undobench_gym.services.domains.payments.fixture import fx_rate, quote_id
from undobench_gym.services.domains.payments.models import (
    Charge,
    Customer,
    Invoice,
    Refund,
    Subscription,
    Wire,
)

router = APIRouter(prefix="/v1")

CREATE_CUSTOMER = Effect("customer.create", "create_unique", ("email",), "constraint")
#: Who is charged how much: the description is free text, and a re-sent charge with a
#: reworded description charges the customer twice all the same.
CREATE_CHARGE = Effect("charge.create", "additive", ("customer_id", "amount", "currency"), "native")
CREATE_REFUND = Effect(
    "refund.create", "additive", ("charge_id", "amount"), "native", compensation=True
)
RENEW_SUBSCRIPTION = Effect("subscription.renew", "additive", ("subscription_id",))
SET_SUBSCRIPTION_STATUS = Effect("subscription.status", "set", ("subscription_id", "status"))
#: Where the money goes and how much, in which currencies; the quote is a means to it.
SEND_WIRE = Effect(
    "wire.send",
    "irreversible_send",
    ("beneficiary_iban", "amount", "source_currency", "target_currency"),
    "native",
)


class CustomerIn(BaseModel):
    email: str = Field(min_length=3, max_length=255, pattern=r"^[^@\s]+@[^@\s]+$")
    name: str = Field(min_length=1, max_length=255)


@write_route(router, "POST", "/customers", "create_customer", CREATE_CUSTOMER, CustomerOut, 201)
def create_customer(request: Request, body: CustomerIn) -> JSONResponse:
    """Create a customer; the email must be unique."""
    args = body.model_dump()

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        if s.scalar(select(Customer).where(Customer.email == body.email)) is not None:
            raise error(409, "resource_exists", f"A customer with email {body.email} exists")
        c = Customer(id=new_id(s, "cus"), email=body.email, name=body.name, created=now(s))
        s.add(c)
        CREATE_CUSTOMER.commit(s, args, key)
        s.flush()
        return 201, row(c)

    return run_mutation(
        request, route="create_customer", native=CREATE_CUSTOMER.native, payload=args, apply=apply
    )


def _book_charge(
    s: Session, customer_id: str, amount: int, currency: str, description: str, created: str
) -> Charge:
    """A succeeded charge, its amount credited to the platform balance: what a charge and a
    subscription renewal both book."""
    ch = Charge(
        id=new_id(s, "ch"),
        customer_id=customer_id,
        amount=amount,
        currency=currency,
        description=description,
        amount_refunded=0,
        status="succeeded",
        created=created,
    )
    s.add(ch)
    credit(s, currency, amount)
    return ch


class ChargeIn(BaseModel):
    customer_id: Id
    amount: int = Field(gt=0, le=10_000_000)
    currency: Currency
    description: str = Field(min_length=1, max_length=255)


@write_route(router, "POST", "/charges", "create_charge", CREATE_CHARGE, ChargeOut, 201)
def create_charge(
    request: Request, body: ChargeIn, idempotency_key: KeyHeader = None
) -> JSONResponse:
    """Charge a customer. Accepts an Idempotency-Key header."""
    args = body.model_dump()

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        get_or_404(s, Customer, body.customer_id, "customer")
        ch = _book_charge(s, body.customer_id, body.amount, body.currency, body.description, now(s))
        CREATE_CHARGE.commit(s, args, key, ref=ch.id)
        s.flush()
        return 201, row(ch)

    return run_mutation(
        request, route="create_charge", native=CREATE_CHARGE.native, payload=args, apply=apply
    )


class RefundIn(BaseModel):
    charge_id: Id
    amount: int = Field(gt=0, le=10_000_000)
    reason: str = Field(default="requested_by_customer", max_length=64)


@write_route(router, "POST", "/refunds", "create_refund", CREATE_REFUND, RefundOut, 201)
def create_refund(
    request: Request, body: RefundIn, idempotency_key: KeyHeader = None
) -> JSONResponse:
    """Refund part or all of a charge. Accepts an Idempotency-Key header."""
    args = body.model_dump()

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        ch = get_or_404(s, Charge, body.charge_id, "charge")
        if ch.amount_refunded + body.amount > ch.amount:
            raise error(
                400,
                "refund_exceeds_charge",
                f"Refund would exceed the charge ({ch.amount - ch.amount_refunded} left)",
            )
        # A refund of the whole charge undoes it (a repair, if the charge was not wanted).
        whole = ch.amount_refunded == 0 and body.amount == ch.amount
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
        undoes = {"op": CREATE_CHARGE.op, "ref": ch.id} if whole else None
        CREATE_REFUND.commit(s, args, key, undoes=undoes)
        s.flush()
        return 201, row(r)

    return run_mutation(
        request, route="create_refund", native=CREATE_REFUND.native, payload=args, apply=apply
    )


@write_route(
    router,
    "POST",
    "/subscriptions/{subscription_id}/renew",
    "renew_subscription",
    RENEW_SUBSCRIPTION,
    RenewalOut,
)
def renew_subscription(request: Request, subscription_id: str) -> JSONResponse:
    """Bill the next period of a subscription: creates an invoice and a charge."""
    args = {"subscription_id": subscription_id}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        sub = get_or_404(s, Subscription, subscription_id, "subscription")
        if sub.status != "active":
            raise error(400, "subscription_inactive", f"Subscription is {sub.status}")
        sub.period += 1
        billed = now(s)  # the invoice and the charge it bills carry the same time
        description = f"Subscription {sub.id} period {sub.period}"
        ch = _book_charge(s, sub.customer_id, sub.amount, sub.currency, description, billed)
        inv = Invoice(
            id=new_id(s, "in"),
            subscription_id=sub.id,
            period=sub.period,
            charge_id=ch.id,
            amount=sub.amount,
            created=billed,
        )
        s.add(inv)
        RENEW_SUBSCRIPTION.commit(s, args, key)
        s.flush()
        return 200, {"subscription": row(sub), "invoice": row(inv)}

    return run_mutation(
        request,
        route="renew_subscription",
        native=RENEW_SUBSCRIPTION.native,
        payload=args,
        apply=apply,
    )


class SubscriptionStatusIn(BaseModel):
    status: str = Field(pattern="^(active|canceled|paused)$")


@write_route(
    router,
    "PUT",
    "/subscriptions/{subscription_id}/status",
    "set_subscription_status",
    SET_SUBSCRIPTION_STATUS,
    SubscriptionOut,
)
def set_subscription_status(
    request: Request, subscription_id: str, body: SubscriptionStatusIn
) -> JSONResponse:
    """Set a subscription's status (active, canceled, paused)."""

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        sub = get_or_404(s, Subscription, subscription_id, "subscription")
        sub.status = body.status
        identity = {"subscription_id": subscription_id, "status": body.status}
        SET_SUBSCRIPTION_STATUS.commit(s, body.model_dump(), key, identity)
        return 200, row(sub)

    return run_mutation(
        request,
        route="set_subscription_status",
        native=SET_SUBSCRIPTION_STATUS.native,
        payload={"id": subscription_id, **body.model_dump()},
        apply=apply,
    )


class WireIn(BaseModel):
    quote_id: Id
    beneficiary_iban: str = Field(pattern=r"^[A-Z]{2}[0-9]{2}[A-Z0-9]{10,30}$")
    amount: int = Field(gt=0, le=10_000_000)
    source_currency: Currency
    target_currency: Currency


@write_route(router, "POST", "/wires", "create_wire", SEND_WIRE, WireOut, 201)
def create_wire(request: Request, body: WireIn, idempotency_key: KeyHeader = None) -> JSONResponse:
    """Send a cross-border wire at a quoted rate. Irreversible. Accepts an Idempotency-Key."""
    args = body.model_dump()

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
        SEND_WIRE.commit(s, args, key)
        s.flush()
        return 201, row(w)

    return run_mutation(
        request, route="create_wire", native=SEND_WIRE.native, payload=args, apply=apply
    )
