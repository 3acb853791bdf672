"""Payments service routes. Amounts are integers in the currency's minor unit."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from .._service.context import DomainService, ServiceContext, get_ctx, maybe_crash, new_id, now
from .._service.db import insert_fixture
from .._service.db import row as _row
from .._service.mutation import (
    READ_ONLY,
    claim_key,
    complete_key,
    effect_meta,
    error,
    honoured_key,
    record_commit,
    release_key,
    run_mutation,
)
from .fixture import build_fixture, fx_rate, quote_id
from .models import (
    TABLES,
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

router = APIRouter(prefix="/v1")
Ctx = Annotated[ServiceContext, Depends(get_ctx)]
KeyHeader = Annotated[str | None, Header(alias="Idempotency-Key", max_length=255)]
Currency = Annotated[str, Field(pattern="^(usd|eur|gbp)$")]
Id = Annotated[str, Field(min_length=1, max_length=64)]


def _get(s: Session, model: type[Any], ident: str, what: str) -> Any:
    obj = s.get(model, ident)
    if obj is None:
        raise error(404, "resource_missing", f"No such {what}: {ident}")
    return obj


def _debit(s: Session, currency: str, amount: int) -> None:
    bal = s.get(Balance, currency)
    if bal is None or bal.available < amount:
        raise error(402, "insufficient_funds", f"Platform balance in {currency} is too low")
    bal.available -= amount


def _credit(s: Session, currency: str, amount: int) -> None:
    bal = s.get(Balance, currency)
    if bal is None:
        s.add(Balance(currency=currency, available=amount))
    else:
        bal.available += amount


# ---- read-only routes --------------------------------------------------------------


@router.get("/customers", operation_id="list_customers", openapi_extra=READ_ONLY)
def list_customers(
    ctx: Ctx, email: str | None = Query(None, max_length=255)
) -> list[dict[str, Any]]:
    """List customers, optionally filtered by email."""
    with Session(ctx.engine) as s:
        q = select(Customer).order_by(Customer.id)
        if email:
            q = q.where(Customer.email == email)
        return [_row(c) for c in s.scalars(q)]


@router.get("/customers/{customer_id}", operation_id="get_customer", openapi_extra=READ_ONLY)
def get_customer(ctx: Ctx, customer_id: str) -> dict[str, Any]:
    """Retrieve one customer."""
    with Session(ctx.engine) as s:
        return _row(_get(s, Customer, customer_id, "customer"))


@router.get("/charges", operation_id="list_charges", openapi_extra=READ_ONLY)
def list_charges(
    ctx: Ctx, customer_id: str | None = Query(None, max_length=64)
) -> list[dict[str, Any]]:
    """List charges, optionally for one customer."""
    with Session(ctx.engine) as s:
        q = select(Charge).order_by(Charge.created, Charge.id)
        if customer_id:
            q = q.where(Charge.customer_id == customer_id)
        return [_row(c) for c in s.scalars(q)]


@router.get("/charges/{charge_id}", operation_id="get_charge", openapi_extra=READ_ONLY)
def get_charge(ctx: Ctx, charge_id: str) -> dict[str, Any]:
    """Retrieve one charge."""
    with Session(ctx.engine) as s:
        return _row(_get(s, Charge, charge_id, "charge"))


@router.get("/refunds", operation_id="list_refunds", openapi_extra=READ_ONLY)
def list_refunds(
    ctx: Ctx, charge_id: str | None = Query(None, max_length=64)
) -> list[dict[str, Any]]:
    """List refunds, optionally for one charge."""
    with Session(ctx.engine) as s:
        q = select(Refund).order_by(Refund.created, Refund.id)
        if charge_id:
            q = q.where(Refund.charge_id == charge_id)
        return [_row(r) for r in s.scalars(q)]


@router.get(
    "/subscriptions/{subscription_id}", operation_id="get_subscription", openapi_extra=READ_ONLY
)
def get_subscription(ctx: Ctx, subscription_id: str) -> dict[str, Any]:
    """Retrieve one subscription."""
    with Session(ctx.engine) as s:
        return _row(_get(s, Subscription, subscription_id, "subscription"))


@router.get("/invoices", operation_id="list_invoices", openapi_extra=READ_ONLY)
def list_invoices(
    ctx: Ctx, subscription_id: str | None = Query(None, max_length=64)
) -> list[dict[str, Any]]:
    """List invoices, optionally for one subscription."""
    with Session(ctx.engine) as s:
        q = select(Invoice).order_by(Invoice.created, Invoice.id)
        if subscription_id:
            q = q.where(Invoice.subscription_id == subscription_id)
        return [_row(i) for i in s.scalars(q)]


@router.get("/payouts", operation_id="list_payouts", openapi_extra=READ_ONLY)
def list_payouts(
    ctx: Ctx, reference: str | None = Query(None, max_length=64)
) -> list[dict[str, Any]]:
    """List payouts with their transfers, optionally by reference."""
    with Session(ctx.engine) as s:
        q = select(Payout).order_by(Payout.created, Payout.id)
        if reference:
            q = q.where(Payout.reference == reference)
        return [_payout_view(s, p) for p in s.scalars(q)]


@router.get("/payouts/{payout_id}", operation_id="get_payout", openapi_extra=READ_ONLY)
def get_payout(ctx: Ctx, payout_id: str) -> dict[str, Any]:
    """Retrieve one payout with its transfers."""
    with Session(ctx.engine) as s:
        return _payout_view(s, _get(s, Payout, payout_id, "payout"))


@router.get("/fx/quote", operation_id="get_fx_quote", openapi_extra=READ_ONLY)
def get_fx_quote(
    request: Request,
    source: str = Query(pattern="^(usd|eur|gbp)$"),
    target: str = Query(pattern="^(usd|eur|gbp)$"),
    amount: int = Query(gt=0, le=10_000_000),
) -> dict[str, Any]:
    """Quote a cross-border conversion; the quote id is needed to send a wire."""
    with Session(get_ctx(request).engine) as s:
        from .._service.context import seed_of

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


@router.get("/wires", operation_id="list_wires", openapi_extra=READ_ONLY)
def list_wires(ctx: Ctx) -> list[dict[str, Any]]:
    """List outgoing wire transfers."""
    with Session(ctx.engine) as s:
        return [_row(w) for w in s.scalars(select(Wire).order_by(Wire.created, Wire.id))]


@router.get("/balance", operation_id="get_balance", openapi_extra=READ_ONLY)
def get_balance(ctx: Ctx) -> dict[str, int]:
    """Available platform balance per currency."""
    with Session(ctx.engine) as s:
        return {b.currency: b.available for b in s.scalars(select(Balance))}


def _payout_view(s: Session, p: Payout) -> dict[str, Any]:
    transfers = s.scalars(select(Transfer).where(Transfer.payout_id == p.id).order_by(Transfer.id))
    return {**_row(p), "transfers": [_row(t) for t in transfers]}


# ---- mutating routes ---------------------------------------------------------------


class CustomerIn(BaseModel):
    email: str = Field(min_length=3, max_length=255, pattern=r"^[^@\s]+@[^@\s]+$")
    name: str = Field(min_length=1, max_length=255)


@router.post(
    "/customers",
    operation_id="create_customer",
    status_code=201,
    openapi_extra=effect_meta("customer.create", "create_unique", ["email"], "constraint"),
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
        return 201, _row(c)

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
)
def create_charge(
    request: Request, body: ChargeIn, idempotency_key: KeyHeader = None
) -> JSONResponse:
    """Charge a customer. Accepts an Idempotency-Key header."""

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        _get(s, Customer, body.customer_id, "customer")
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
        _credit(s, body.currency, body.amount)
        record_commit(
            s,
            op="charge.create",
            effect_class="additive",
            identity=body.model_dump(include=set(CHARGE_IDENTITY)),
            args=body.model_dump(),
            key=key,
        )
        s.flush()
        return 201, _row(ch)

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
)
def create_refund(
    request: Request, body: RefundIn, idempotency_key: KeyHeader = None
) -> JSONResponse:
    """Refund part or all of a charge. Accepts an Idempotency-Key header."""

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        ch = _get(s, Charge, body.charge_id, "charge")
        if ch.amount_refunded + body.amount > ch.amount:
            raise error(
                400,
                "refund_exceeds_charge",
                f"Refund would exceed the charge ({ch.amount - ch.amount_refunded} left)",
            )
        ch.amount_refunded += body.amount
        if ch.amount_refunded == ch.amount:
            ch.status = "refunded"
        _debit(s, ch.currency, body.amount)
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
        return 201, _row(r)

    return run_mutation(
        request, route="create_refund", native=True, payload=body.model_dump(), apply=apply
    )


@router.post(
    "/subscriptions/{subscription_id}/renew",
    operation_id="renew_subscription",
    openapi_extra=effect_meta("subscription.renew", "additive", ["subscription_id"], "none"),
)
def renew_subscription(request: Request, subscription_id: str) -> JSONResponse:
    """Bill the next period of a subscription: creates an invoice and a charge."""

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        sub = _get(s, Subscription, subscription_id, "subscription")
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
        _credit(s, sub.currency, sub.amount)
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
        return 200, {"subscription": _row(sub), "invoice": _row(inv)}

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
)
def set_subscription_status(
    request: Request, subscription_id: str, body: SubscriptionStatusIn
) -> JSONResponse:
    """Set a subscription's status (active, canceled, paused)."""

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        sub = _get(s, Subscription, subscription_id, "subscription")
        sub.status = body.status
        record_commit(
            s,
            op="subscription.status",
            effect_class="set",
            identity={"subscription_id": subscription_id, "status": body.status},
            args=body.model_dump(),
            key=key,
        )
        return 200, _row(sub)

    return run_mutation(
        request,
        route="set_subscription_status",
        native=False,
        payload={"id": subscription_id, **body.model_dump()},
        apply=apply,
    )


class Recipient(BaseModel):
    account: str = Field(min_length=1, max_length=64)
    amount: int = Field(gt=0, le=10_000_000)


class PayoutIn(BaseModel):
    reference: str = Field(min_length=1, max_length=64)
    currency: Currency
    recipients: list[Recipient] = Field(min_length=1, max_length=20)


def _recipients_key(recipients: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Recipients in account order: the same payout listed in another order is the same."""
    return sorted(
        ({"account": r["account"], "amount": r["amount"]} for r in recipients),
        key=lambda r: str(r["account"]),
    )


#: Who is paid how much in which currency; the reference is the caller's label, and a
#: re-sent payout under another reference pays every recipient again.
PAYOUT_IDENTITY = ["currency", "recipients"]


def _pay_transfers(request: Request, ctx: ServiceContext, payout_id: str, resume: bool) -> None:
    """Pay each missing transfer in its own transaction, as a batch payout system does.

    A resume that finds the payout `processing` and finishes it records `payout.resume`; a
    resume of a paid payout changes nothing and records nothing."""
    with Session(ctx.engine) as s:
        p = _get(s, Payout, payout_id, "payout")
        recipients, currency = list(p.recipients), p.currency
    for i, rec in enumerate(recipients):
        if i == 1:
            maybe_crash(request, "payout.after_first_transfer")
        with Session(ctx.engine) as s, s.begin():
            done = s.scalar(
                select(Transfer).where(
                    Transfer.payout_id == payout_id, Transfer.account == rec["account"]
                )
            )
            if done is not None:
                continue
            _debit(s, currency, rec["amount"])
            s.add(
                Transfer(
                    id=new_id(s, "tr"),
                    payout_id=payout_id,
                    account=rec["account"],
                    amount=rec["amount"],
                    created=now(s),
                )
            )
            record_commit(
                s,
                op="payout.transfer",
                effect_class="additive",
                identity={"account": rec["account"], "amount": rec["amount"], "currency": currency},
                args={"payout_id": payout_id, **rec},
            )
    with Session(ctx.engine) as s, s.begin():
        p = _get(s, Payout, payout_id, "payout")
        if p.status == "paid":
            return
        p.status = "paid"
        if resume:
            record_commit(
                s,
                op="payout.resume",
                effect_class="set",
                identity={"payout_id": payout_id},
                args={"payout_id": payout_id},
            )


@router.post(
    "/payouts",
    operation_id="create_payout",
    status_code=201,
    openapi_extra=effect_meta("payout.create", "additive", PAYOUT_IDENTITY, "none"),
)
def create_payout(request: Request, body: PayoutIn) -> JSONResponse:
    """Split a payout across recipients. Transfers are paid one by one; a payout left in
    `processing` can be finished with resume_payout."""
    ctx = get_ctx(request)
    accounts = [r.account for r in body.recipients]
    if len(set(accounts)) != len(accounts):
        raise error(400, "duplicate_recipient", "Each recipient account may appear only once")
    claim = claim_key(ctx, honoured_key(request, native=False), "create_payout", body.model_dump())
    if isinstance(claim, JSONResponse):
        return claim
    try:
        with Session(ctx.engine) as s, s.begin():
            total = sum(r.amount for r in body.recipients)
            bal = s.get(Balance, body.currency)
            if bal is None or bal.available < total:
                raise error(402, "insufficient_funds", "Platform balance is too low for payout")
            p = Payout(
                id=new_id(s, "po"),
                reference=body.reference,
                currency=body.currency,
                recipients=[r.model_dump() for r in body.recipients],
                status="processing",
                created=now(s),
            )
            s.add(p)
            record_commit(
                s,
                op="payout.create",
                effect_class="additive",
                identity={
                    "currency": body.currency,
                    "recipients": _recipients_key([r.model_dump() for r in body.recipients]),
                },
                args=body.model_dump(),
                key=claim.key if claim else None,
            )
            payout_id = p.id
    except Exception:
        release_key(ctx, claim)
        raise
    _pay_transfers(request, ctx, payout_id, resume=False)
    with Session(ctx.engine) as s, s.begin():
        view = _payout_view(s, _get(s, Payout, payout_id, "payout"))
        complete_key(s, claim, 201, view)
    return JSONResponse(status_code=201, content=view)


@router.post(
    "/payouts/{payout_id}/resume",
    operation_id="resume_payout",
    openapi_extra=effect_meta("payout.resume", "set", ["payout_id"], "none"),
)
def resume_payout(request: Request, payout_id: str) -> dict[str, Any]:
    """Pay the transfers a `processing` payout still owes; a paid payout is left as it is."""
    ctx = get_ctx(request)
    _pay_transfers(request, ctx, payout_id, resume=True)
    with Session(ctx.engine) as s:
        return _payout_view(s, _get(s, Payout, payout_id, "payout"))


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
)
def create_wire(request: Request, body: WireIn, idempotency_key: KeyHeader = None) -> JSONResponse:
    """Send a cross-border wire at a quoted rate. Irreversible. Accepts an Idempotency-Key."""

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        from .._service.context import seed_of

        seed = seed_of(s)
        expected = quote_id(seed, body.source_currency, body.target_currency, body.amount)
        if body.quote_id != expected:
            raise error(400, "invalid_quote", "The quote does not match this wire; get a new quote")
        _debit(s, body.source_currency, body.amount)
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
        return 201, _row(w)

    return run_mutation(
        request, route="create_wire", native=True, payload=body.model_dump(), apply=apply
    )


# ---- domain definition -------------------------------------------------------------


#: Fixture key -> model, parents first (foreign keys).
SEED_ORDER: tuple[tuple[str, Any], ...] = (
    ("customers", Customer),
    ("charges", Charge),
    ("refunds", Refund),
    ("subscriptions", Subscription),
    ("invoices", Invoice),
    ("payouts", Payout),
    ("transfers", Transfer),
    ("wires", Wire),
    ("balance", Balance),
)


def seed_state(s: Session, seed: int) -> None:
    insert_fixture(s, build_fixture(seed), SEED_ORDER)


def partial_state(state: dict[str, Any]) -> list[str]:
    """A payout stuck in `processing` is a half-applied composite."""
    tables = state["tables"]
    issues = []
    for p in tables["pay_payouts"]:
        paid = [t for t in tables["pay_transfers"] if t["payout_id"] == p["id"]]
        if p["status"] != "paid":
            issues.append(
                f"payout {p['id']} is {p['status']} with {len(paid)}/{len(p['recipients'])} "
                "transfers paid"
            )
    return issues


def _count(s: Session, model: type[Any]) -> int:
    return int(s.scalar(select(func.count()).select_from(model)) or 0)


DOMAIN = DomainService(
    name="payments",
    title="UndoBench Payments",
    routers=[router],
    tables=TABLES,
    seed_state=seed_state,
    partial_state=partial_state,
)

__all__ = ["DOMAIN", "IntegrityError"]
