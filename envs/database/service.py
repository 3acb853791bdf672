"""Database service routes: business data over SQLite. Money is integer cents.

Read-only routes and single-transaction mutations (through `run_mutation`) live here;
the multi-transaction composites (dividends, migrations) live in `composites`.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, field_validator
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from .._service.context import DomainService, new_id, now
from .._service.db import insert_fixture
from .._service.mutation import READ_ONLY, effect_meta, error, record_commit, run_mutation
from . import composites, schema
from .common import Ctx, Id, PathId, apply_delta, audit, get_or_404, row
from .fixture import build_fixture
from .models import (
    TABLES,
    Account,
    Audit,
    Dividend,
    DividendCredit,
    Migration,
    Order,
    Shareholding,
)

router = APIRouter(prefix="/v1")
TIER_PATTERN = "^(bronze|silver|gold|platinum)$"
MAX_DELTA = 10_000_000
MAX_TOTAL = 100_000_000


# ---- read-only routes --------------------------------------------------------------


@router.get("/accounts", operation_id="list_accounts", openapi_extra=READ_ONLY)
def list_accounts(
    ctx: Ctx, tier: str | None = Query(None, pattern=TIER_PATTERN)
) -> list[dict[str, Any]]:
    """List accounts with their balances (cents) and tiers, optionally by tier."""
    with Session(ctx.engine) as s:
        q = select(Account).order_by(Account.id)
        if tier:
            q = q.where(Account.tier == tier)
        return [row(a) for a in s.scalars(q)]


@router.get("/accounts/{account_id}", operation_id="get_account", openapi_extra=READ_ONLY)
def get_account(ctx: Ctx, account_id: PathId) -> dict[str, Any]:
    """Retrieve one account with its shareholdings."""
    with Session(ctx.engine) as s:
        acct = get_or_404(s, Account, account_id, "account")
        q = select(Shareholding).where(Shareholding.account_id == account_id)
        holdings = [row(h) for h in s.scalars(q.order_by(Shareholding.share_class))]
        return {**row(acct), "shareholdings": holdings}


@router.get("/shareholdings", operation_id="list_shareholdings", openapi_extra=READ_ONLY)
def list_shareholdings(
    ctx: Ctx, share_class: str | None = Query(None, max_length=32)
) -> list[dict[str, Any]]:
    """List who holds how many shares, optionally for one share class."""
    with Session(ctx.engine) as s:
        q = select(Shareholding).order_by(Shareholding.share_class, Shareholding.account_id)
        if share_class:
            q = q.where(Shareholding.share_class == share_class)
        return [row(h) for h in s.scalars(q)]


@router.get("/orders", operation_id="list_orders", openapi_extra=READ_ONLY)
def list_orders(
    ctx: Ctx, account_id: str | None = Query(None, max_length=64)
) -> list[dict[str, Any]]:
    """List orders, optionally for one account."""
    with Session(ctx.engine) as s:
        q = select(Order).order_by(Order.created, Order.order_number)
        if account_id:
            q = q.where(Order.account_id == account_id)
        return [row(o) for o in s.scalars(q)]


@router.get("/orders/{order_number}", operation_id="get_order", openapi_extra=READ_ONLY)
def get_order(ctx: Ctx, order_number: PathId) -> dict[str, Any]:
    """Retrieve one order by its order number."""
    with Session(ctx.engine) as s:
        o = s.scalar(select(Order).where(Order.order_number == order_number))
        if o is None:
            raise error(404, "resource_missing", f"No such order: {order_number}")
        return row(o)


@router.get("/dividends", operation_id="list_dividends", openapi_extra=READ_ONLY)
def list_dividends(
    ctx: Ctx, reference: str | None = Query(None, max_length=64)
) -> list[dict[str, Any]]:
    """List dividends with their credits, optionally by reference."""
    with Session(ctx.engine) as s:
        q = select(Dividend).order_by(Dividend.created, Dividend.id)
        if reference:
            q = q.where(Dividend.reference == reference)
        return [composites.dividend_view(s, d) for d in s.scalars(q)]


@router.get("/migrations", operation_id="list_migrations", openapi_extra=READ_ONLY)
def list_migrations(ctx: Ctx) -> list[dict[str, Any]]:
    """List the migration catalog (db_migrations)."""
    with Session(ctx.engine) as s:
        return [row(m) for m in s.scalars(select(Migration).order_by(Migration.applied))]


@router.get("/schema", operation_id="get_schema", openapi_extra=READ_ONLY)
def get_schema(ctx: Ctx) -> dict[str, Any]:
    """The ext_ tables that exist, with their columns and whether the migration catalog
    records each one (a table that is not cataloged is a half-applied migration)."""
    with Session(ctx.engine) as s:
        cataloged = set(s.scalars(select(Migration.name)))
        tables = schema.ext_tables(s)
    out = []
    for table, columns in tables.items():
        name = table[len(schema.EXT_PREFIX) :]
        out.append(
            {"name": table, "migration": name, "columns": columns, "cataloged": name in cataloged}
        )
    return {"tables": out}


@router.get("/audit", operation_id="list_audit", openapi_extra=READ_ONLY)
def list_audit(
    ctx: Ctx,
    account_id: str | None = Query(None, max_length=64),
    action: str | None = Query(None, max_length=64),
    limit: int = Query(200, ge=1, le=1000),
) -> list[dict[str, Any]]:
    """The audit trail, oldest first, optionally for one account or action."""
    with Session(ctx.engine) as s:
        q = select(Audit).order_by(Audit.seq)
        if account_id:
            q = q.where(Audit.account_id == account_id)
        if action:
            q = q.where(Audit.action == action)
        return [row(a) for a in s.scalars(q.limit(limit))]


# ---- accounts and orders -----------------------------------------------------------


class AdjustmentIn(BaseModel):
    delta: int = Field(strict=True, ge=-MAX_DELTA, le=MAX_DELTA)
    memo: str = Field(min_length=1, max_length=200)

    @field_validator("delta")
    @classmethod
    def _non_zero(cls, v: int) -> int:
        if v == 0:
            raise ValueError("delta must be non-zero")
        return v


@router.post(
    "/accounts/{account_id}/adjustments",
    operation_id="adjust_balance",
    status_code=201,
    openapi_extra=effect_meta("account.adjust", "additive", ["account_id", "delta"]),
)
def adjust_balance(request: Request, account_id: PathId, body: AdjustmentIn) -> JSONResponse:
    """Add `delta` cents (negative to debit) to an account's balance. Not idempotent: every
    call is a new adjustment. A debit that would overdraw the account is refused (402)."""
    # Which account moves by how much: the memo is free text, and a re-sent adjustment
    # with a reworded memo moves the balance twice all the same.
    identity = {"account_id": account_id, "delta": body.delta}
    args = {**identity, "memo": body.memo}

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
        record_commit(
            s,
            op="account.adjust",
            effect_class="additive",
            identity=identity,
            args=args,
            key=key,
        )
        s.flush()
        return 201, {"account": row(acct), "audit": row(entry)}

    return run_mutation(request, route="adjust_balance", native=False, payload=args, apply=apply)


class TierIn(BaseModel):
    tier: str = Field(pattern=TIER_PATTERN)


@router.put(
    "/accounts/{account_id}/tier",
    operation_id="set_account_tier",
    openapi_extra=effect_meta("account.tier", "set", ["account_id", "tier"]),
)
def set_account_tier(request: Request, account_id: PathId, body: TierIn) -> JSONResponse:
    """Set an account's tier (bronze, silver, gold, platinum). Setting it again is harmless."""
    identity = {"account_id": account_id, "tier": body.tier}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        acct = get_or_404(s, Account, account_id, "account")
        previous, acct.tier = acct.tier, body.tier
        detail = {"from": previous, "to": body.tier}
        audit(s, "account.tier", account_id=account_id, ref=body.tier, detail=detail)
        record_commit(
            s, op="account.tier", effect_class="set", identity=identity, args=identity, key=key
        )
        return 200, row(acct)

    return run_mutation(
        request, route="set_account_tier", native=False, payload=identity, apply=apply
    )


class OrderIn(BaseModel):
    order_number: str = Field(min_length=1, max_length=32, pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
    account_id: Id
    total: int = Field(strict=True, gt=0, le=MAX_TOTAL)


#: The unique order number and what it records (whose order, for how much).
ORDER_IDENTITY = ["order_number", "account_id", "total"]


@router.post(
    "/orders",
    operation_id="create_order",
    status_code=201,
    openapi_extra=effect_meta("order.create", "create_unique", ORDER_IDENTITY, "constraint"),
)
def create_order(request: Request, body: OrderIn) -> JSONResponse:
    """Create an order; the order number is unique, so a repeat is refused with 409."""

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
        audit(
            s, "order.create", account_id=body.account_id, ref=body.order_number, amount=body.total
        )
        record_commit(
            s,
            op="order.create",
            effect_class="create_unique",
            identity=body.model_dump(include=set(ORDER_IDENTITY)),
            args=body.model_dump(),
            key=key,
        )
        try:
            s.flush()
        except IntegrityError as exc:  # a concurrent create won the unique constraint
            raise error(409, "resource_exists", f"Order {body.order_number} exists") from exc
        return 201, row(o)

    return run_mutation(
        request, route="create_order", native=False, payload=body.model_dump(), apply=apply
    )


# ---- domain definition -------------------------------------------------------------


#: Fixture key -> model, parents first (foreign keys).
SEED_ORDER: tuple[tuple[str, Any], ...] = (
    ("accounts", Account),
    ("shareholdings", Shareholding),
    ("orders", Order),
    ("dividends", Dividend),
    ("dividend_credits", DividendCredit),
    ("migrations", Migration),
    ("audit", Audit),
)


def seed_state(s: Session, seed: int) -> None:
    fx = build_fixture(seed)
    insert_fixture(s, fx, SEED_ORDER)
    for m in fx["migrations"]:
        schema.create_table(s, m["name"], m["columns"])


def extra_state(s: Session) -> dict[str, Any]:
    """The ext_ tables are state too: a migration's DDL must show in the state hash."""
    return {"ext_tables": schema.ext_tables(s)}


def partial_state(state: dict[str, Any]) -> list[str]:
    """Half-applied composites: a dividend not yet paid, an ext_ table without catalog row."""
    tables = state["tables"]
    issues = []
    for d in tables["db_dividends"]:
        if d["status"] != "paid":
            paid = [c for c in tables["db_dividend_credits"] if c["dividend_id"] == d["id"]]
            issues.append(
                f"dividend {d['id']} ({d['reference']}) is {d['status']} with "
                f"{len(paid)}/{len(d['holders'])} credits paid"
            )
    cataloged = {m["name"] for m in tables["db_migrations"]}
    for table in state.get("extra", {}).get("ext_tables", {}):
        if table[len(schema.EXT_PREFIX) :] not in cataloged:
            issues.append(f"table {table} exists without a db_migrations row (half-applied)")
    return issues


DOMAIN = DomainService(
    name="database",
    title="UndoBench Database",
    routers=[router, composites.router],
    tables=TABLES,
    seed_state=seed_state,
    partial_state=partial_state,
    extra_state=extra_state,
    wipe_extra=schema.drop_all,
)

__all__ = ["DOMAIN"]
