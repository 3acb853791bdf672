"""Database single-transaction mutations: balance adjustments, tiers, orders.

Each runs through `run_mutation`, which writes its commit-log row (and the audit row the
business keeps) and its stored Idempotency-Key response in the mutation's own transaction.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, field_validator
from sqlalchemy import select
from sqlalchemy.orm import Session

from undobench_gym.services.domains._service.kit import (
    Effect,
    Id,
    PathId,
    error,
    flush_or_409,
    get_or_404,
    new_id,
    now,
    row,
    run_mutation,
    write_route,
)
from undobench_gym.services.domains.database.common import (
    TIER_PATTERN,
    AccountOut,
    AdjustmentOut,
    OrderOut,
    apply_delta,
    audit,
)
from undobench_gym.services.domains.database.models import Account, Order

router = APIRouter(prefix="/v1")
MAX_DELTA = 10_000_000
MAX_TOTAL = 100_000_000

#: Which account moves by how much: the memo is free text, and a re-sent adjustment with a
#: reworded memo moves the balance twice all the same.
ADJUST_BALANCE = Effect("account.adjust", "additive", ("account_id", "delta"))
SET_TIER = Effect("account.tier", "set", ("account_id", "tier"))
#: The unique order number and what it records (whose order, for how much).
CREATE_ORDER = Effect(
    "order.create", "create_unique", ("order_number", "account_id", "total"), "constraint"
)
#: Cancelling an open order undoes its creation (a repair, if the order was not wanted).
CANCEL_ORDER = Effect("order.cancel", "set", ("order_number",), compensation=True)


class AdjustmentIn(BaseModel):
    delta: int = Field(strict=True, ge=-MAX_DELTA, le=MAX_DELTA)
    memo: str = Field(min_length=1, max_length=200)

    @field_validator("delta")
    @classmethod
    def _non_zero(cls, v: int) -> int:
        if v == 0:
            raise ValueError("delta must be non-zero")
        return v


@write_route(
    router,
    "POST",
    "/accounts/{account_id}/adjustments",
    "adjust_balance",
    ADJUST_BALANCE,
    AdjustmentOut,
    201,
)
def adjust_balance(request: Request, account_id: PathId, body: AdjustmentIn) -> JSONResponse:
    """Add `delta` cents (negative to debit) to an account's balance. Not idempotent: every
    call is a new adjustment. A debit that would overdraw the account is refused (402)."""
    args = {"account_id": account_id, "delta": body.delta, "memo": body.memo}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        acct = apply_delta(s, account_id, body.delta)
        entry = audit(
            s,
            "account.adjust",
            account_id=account_id,
            ref=body.memo,
            amount=body.delta,
            detail={"balance_after": acct.balance},
        )
        # The inverse of an adjustment is the opposite one on the same account.
        opposite = {"account_id": account_id, "delta": -body.delta}
        ADJUST_BALANCE.commit(s, args, key, undoes={"op": ADJUST_BALANCE.op, "identity": opposite})
        s.flush()
        return 201, {"account": row(acct), "audit": row(entry)}

    return run_mutation(
        request, route="adjust_balance", native=ADJUST_BALANCE.native, payload=args, apply=apply
    )


class TierIn(BaseModel):
    tier: str = Field(pattern=TIER_PATTERN)


@write_route(router, "PUT", "/accounts/{account_id}/tier", "set_account_tier", SET_TIER, AccountOut)
def set_account_tier(request: Request, account_id: PathId, body: TierIn) -> JSONResponse:
    """Set an account's tier (bronze, silver, gold, platinum). Setting it again is harmless."""
    args = {"account_id": account_id, "tier": body.tier}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        acct = get_or_404(s, Account, account_id, "account")
        previous, acct.tier = acct.tier, body.tier
        detail = {"from": previous, "to": body.tier}
        audit(s, "account.tier", account_id=account_id, ref=body.tier, detail=detail)
        SET_TIER.commit(s, args, key)
        return 200, row(acct)

    return run_mutation(
        request, route="set_account_tier", native=SET_TIER.native, payload=args, apply=apply
    )


class OrderIn(BaseModel):
    order_number: str = Field(min_length=1, max_length=32, pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
    account_id: Id
    total: int = Field(strict=True, gt=0, le=MAX_TOTAL)


@write_route(router, "POST", "/orders", "create_order", CREATE_ORDER, OrderOut, 201)
def create_order(request: Request, body: OrderIn) -> JSONResponse:
    """Create an order; the order number is unique, so a repeat is refused with 409."""
    args = body.model_dump()

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        found = s.scalar(select(Order).where(Order.order_number == body.order_number))
        if found is not None:
            raise error(
                409,
                "resource_exists",
                f"Order {found.order_number} already exists ({found.id}, total {found.total}); "
                "read it with get_order instead of creating it again",
            )
        get_or_404(s, Account, body.account_id, "account")
        o = Order(
            id=new_id(s, "ord"),
            order_number=body.order_number,
            account_id=body.account_id,
            total=body.total,
            status="open",
            created=now(s),
        )
        s.add(o)
        # Flush now: the audit row's clock read would autoflush the order outside the guard.
        flush_or_409(s, f"Order {body.order_number} exists")
        audit(
            s, "order.create", account_id=body.account_id, ref=body.order_number, amount=body.total
        )
        CREATE_ORDER.commit(s, args, key, ref=o.id)
        return 201, row(o)

    return run_mutation(
        request, route="create_order", native=CREATE_ORDER.native, payload=args, apply=apply
    )


@write_route(
    router, "POST", "/orders/{order_number}/cancel", "cancel_order", CANCEL_ORDER, OrderOut
)
def cancel_order(request: Request, order_number: PathId) -> JSONResponse:
    """Cancel an open order. Cancelling a cancelled order changes nothing; a paid order
    cannot be cancelled (409: refund it through the payment instead)."""
    payload = {"order_number": order_number}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        o = s.scalar(select(Order).where(Order.order_number == order_number))
        if o is None:
            raise error(404, "resource_missing", f"No order {order_number}")
        if o.status == "cancelled":
            return 200, row(o)
        if o.status != "open":
            raise error(409, "order_not_open", f"Order {order_number} is {o.status}")
        o.status = "cancelled"
        audit(s, "order.cancel", account_id=o.account_id, ref=o.order_number, amount=o.total)
        CANCEL_ORDER.commit(s, payload, key, undoes={"op": CREATE_ORDER.op, "ref": o.id})
        return 200, row(o)

    return run_mutation(
        request, route="cancel_order", native=CANCEL_ORDER.native, payload=payload, apply=apply
    )
