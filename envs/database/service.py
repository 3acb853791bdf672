"""Database service routes: business data over SQLite. Money is integer cents.

Single-transaction mutations go through `run_mutation`; dividends and migrations are
composites that commit in several transactions, with named crash points between them.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, field_validator
from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session

from .._service.context import DomainService, ServiceContext, get_ctx, maybe_crash, new_id, now
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
from . import schema
from .fixture import build_fixture
from .models import TABLES, Account, Audit, Dividend, DividendCredit, Migration, Order, Shareholding

router = APIRouter(prefix="/v1")
Ctx = Annotated[ServiceContext, Depends(get_ctx)]
Id = Annotated[str, Field(min_length=1, max_length=64)]
PathId = Annotated[str, Path(min_length=1, max_length=64)]
MigrationName = Annotated[str, Path(pattern=schema.NAME_PATTERN)]
TIER_PATTERN = "^(bronze|silver|gold|platinum)$"
MAX_DELTA = 10_000_000
MAX_TOTAL = 100_000_000


def _row(obj: Any) -> dict[str, Any]:
    return {c.key: getattr(obj, c.key) for c in obj.__table__.columns}


def _get(s: Session, model: type[Any], ident: str, what: str) -> Any:
    obj = s.get(model, ident)
    if obj is None:
        raise error(404, "resource_missing", f"No such {what}: {ident}")
    return obj


def _apply_delta(s: Session, account_id: str, delta: int) -> Account:
    """Change a balance in one UPDATE, so concurrent adjustments cannot lose each other."""
    res = s.execute(
        update(Account)
        .where(Account.id == account_id, Account.balance + delta >= 0)
        .values(balance=Account.balance + delta)
    )
    if res.rowcount == 0:
        acct = _get(s, Account, account_id, "account")
        raise error(
            402,
            "insufficient_funds",
            f"Account {account_id} holds {acct.balance} cents; a delta of {delta} would overdraw it",
        )
    acct = s.get(Account, account_id, populate_existing=True)
    assert acct is not None
    return acct


def _audit(
    s: Session,
    action: str,
    *,
    account_id: str | None = None,
    ref: str | None = None,
    amount: int | None = None,
    detail: dict[str, Any] | None = None,
) -> Audit:
    row = Audit(
        at=now(s), action=action, account_id=account_id, ref=ref, amount=amount, detail=detail or {}
    )
    s.add(row)
    return row


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
        return [_row(a) for a in s.scalars(q)]


@router.get("/accounts/{account_id}", operation_id="get_account", openapi_extra=READ_ONLY)
def get_account(ctx: Ctx, account_id: PathId) -> dict[str, Any]:
    """Retrieve one account with its shareholdings."""
    with Session(ctx.engine) as s:
        acct = _get(s, Account, account_id, "account")
        q = select(Shareholding).where(Shareholding.account_id == account_id)
        return {**_row(acct), "shareholdings": [_row(h) for h in s.scalars(q.order_by("id"))]}


@router.get("/shareholdings", operation_id="list_shareholdings", openapi_extra=READ_ONLY)
def list_shareholdings(
    ctx: Ctx, share_class: str | None = Query(None, max_length=32)
) -> list[dict[str, Any]]:
    """List who holds how many shares, optionally for one share class."""
    with Session(ctx.engine) as s:
        q = select(Shareholding).order_by(Shareholding.share_class, Shareholding.account_id)
        if share_class:
            q = q.where(Shareholding.share_class == share_class)
        return [_row(h) for h in s.scalars(q)]


@router.get("/orders", operation_id="list_orders", openapi_extra=READ_ONLY)
def list_orders(
    ctx: Ctx, account_id: str | None = Query(None, max_length=64)
) -> list[dict[str, Any]]:
    """List orders, optionally for one account."""
    with Session(ctx.engine) as s:
        q = select(Order).order_by(Order.created, Order.order_number)
        if account_id:
            q = q.where(Order.account_id == account_id)
        return [_row(o) for o in s.scalars(q)]


@router.get("/orders/{order_number}", operation_id="get_order", openapi_extra=READ_ONLY)
def get_order(ctx: Ctx, order_number: PathId) -> dict[str, Any]:
    """Retrieve one order by its order number."""
    with Session(ctx.engine) as s:
        o = s.scalar(select(Order).where(Order.order_number == order_number))
        if o is None:
            raise error(404, "resource_missing", f"No such order: {order_number}")
        return _row(o)


@router.get("/dividends", operation_id="list_dividends", openapi_extra=READ_ONLY)
def list_dividends(
    ctx: Ctx, reference: str | None = Query(None, max_length=64)
) -> list[dict[str, Any]]:
    """List dividends with their credits, optionally by reference."""
    with Session(ctx.engine) as s:
        q = select(Dividend).order_by(Dividend.created, Dividend.id)
        if reference:
            q = q.where(Dividend.reference == reference)
        return [_dividend_view(s, d) for d in s.scalars(q)]


@router.get("/migrations", operation_id="list_migrations", openapi_extra=READ_ONLY)
def list_migrations(ctx: Ctx) -> list[dict[str, Any]]:
    """List the migration catalog (db_migrations)."""
    with Session(ctx.engine) as s:
        q = select(Migration).order_by(Migration.applied, Migration.id)
        return [_row(m) for m in s.scalars(q)]


@router.get("/schema", operation_id="get_schema", openapi_extra=READ_ONLY)
def get_schema(ctx: Ctx) -> dict[str, Any]:
    """The ext_ tables that exist in the database, with their columns, and whether the
    migration catalog records each one."""
    with Session(ctx.engine) as s:
        cataloged = set(s.scalars(select(Migration.name)))
        tables = schema.ext_tables(s)
    return {
        "tables": [
            {"name": t, "migration": t[len(schema.EXT_PREFIX) :], "columns": cols,
             "cataloged": t[len(schema.EXT_PREFIX) :] in cataloged}
            for t, cols in tables.items()
        ]
    }


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
        return [_row(a) for a in s.scalars(q.limit(limit))]


def _dividend_view(s: Session, d: Dividend) -> dict[str, Any]:
    q = select(DividendCredit).where(DividendCredit.dividend_id == d.id)
    return {**_row(d), "credits": [_row(c) for c in s.scalars(q.order_by(DividendCredit.id))]}


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
    openapi_extra=effect_meta("account.adjust", "additive", ["account_id", "delta", "memo"]),
)
def adjust_balance(request: Request, account_id: PathId, body: AdjustmentIn) -> JSONResponse:
    """Add `delta` cents (negative to debit) to an account's balance. Not idempotent: every
    call is a new adjustment. A debit that would overdraw the account is refused (402)."""
    identity = {"account_id": account_id, **body.model_dump()}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        acct = _apply_delta(s, account_id, body.delta)
        audit = _audit(
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
            args=identity,
            key=key,
        )
        s.flush()
        return 201, {"account": _row(acct), "audit": _row(audit)}

    return run_mutation(request, route="adjust_balance", native=False, payload=identity,
                        apply=apply)


class TierIn(BaseModel):
    tier: str = Field(pattern=TIER_PATTERN)


@router.put(
    "/accounts/{account_id}/tier",
    operation_id="set_account_tier",
    openapi_extra=effect_meta("account.tier", "set", ["account_id", "tier"]),
)
def set_account_tier(request: Request, account_id: PathId, body: TierIn) -> JSONResponse:
    """Set an account's tier (bronze, silver, gold, platinum)."""
    identity = {"account_id": account_id, "tier": body.tier}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        acct = _get(s, Account, account_id, "account")
        previous, acct.tier = acct.tier, body.tier
        _audit(
            s,
            "account.tier",
            account_id=account_id,
            ref=body.tier,
            detail={"from": previous, "to": body.tier},
        )
        record_commit(
            s, op="account.tier", effect_class="set", identity=identity, args=identity, key=key
        )
        return 200, _row(acct)

    return run_mutation(request, route="set_account_tier", native=False, payload=identity,
                        apply=apply)


class OrderIn(BaseModel):
    order_number: str = Field(min_length=1, max_length=32, pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
    account_id: Id
    total: int = Field(strict=True, gt=0, le=MAX_TOTAL)


def _order_exists(o: Order) -> Exception:
    return error(409, "resource_exists",
                 f"Order {o.order_number} already exists ({o.id}, total {o.total}); "
                 "read it with get_order instead of creating it again")


@router.post(
    "/orders",
    operation_id="create_order",
    status_code=201,
    openapi_extra=effect_meta("order.create", "create_unique", ["order_number"], "constraint"),
)
def create_order(request: Request, body: OrderIn) -> JSONResponse:
    """Create an order; the order number is unique, so a repeat is refused with 409."""

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        found = s.scalar(select(Order).where(Order.order_number == body.order_number))
        if found is not None:
            raise _order_exists(found)
        _get(s, Account, body.account_id, "account")
        o = Order(
            id=new_id(s, "ord"),
            order_number=body.order_number,
            account_id=body.account_id,
            total=body.total,
            status="open",
            created=now(s),
        )
        s.add(o)
        _audit(
            s, "order.create", account_id=body.account_id, ref=body.order_number, amount=body.total
        )
        record_commit(s, op="order.create", effect_class="create_unique",
                      identity={"order_number": body.order_number}, args=body.model_dump(),
                      key=key)
        try:
            s.flush()
        except IntegrityError as exc:  # a concurrent create won the unique constraint
            raise error(409, "resource_exists",
                        f"Order {body.order_number} already exists") from exc
        return 201, _row(o)

    return run_mutation(request, route="create_order", native=False, payload=body.model_dump(),
                        apply=apply)


# ---- dividends (composite) ---------------------------------------------------------


class DividendIn(BaseModel):
    share_class: str = Field(pattern=r"^[a-z][a-z0-9_]{0,31}$")
    amount_per_share: int = Field(strict=True, gt=0, le=100_000)
    reference: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def _pay_credits(request: Request, ctx: ServiceContext, dividend_id: str) -> None:
    """Credit each holder still unpaid in its own transaction, as a batch ledger does."""
    with Session(ctx.engine) as s:
        d = _get(s, Dividend, dividend_id, "dividend")
        holders, reference = list(d.holders), d.reference
    for i, h in enumerate(holders):
        if i == 1:
            maybe_crash(request, "dividend.after_first_credit")
        try:
            with Session(ctx.engine) as s, s.begin():
                done = s.scalar(select(DividendCredit).where(
                    DividendCredit.dividend_id == dividend_id,
                    DividendCredit.account_id == h["account_id"]))
                if done is not None:
                    continue
                acct = _apply_delta(s, h["account_id"], h["amount"])
                s.add(DividendCredit(id=new_id(s, "dcr"), dividend_id=dividend_id,
                                     account_id=h["account_id"], shares=h["shares"],
                                     amount=h["amount"], created=now(s)))
                _audit(s, "dividend.credit", account_id=h["account_id"], ref=reference,
                       amount=h["amount"], detail={"dividend_id": dividend_id,
                                                   "balance_after": acct.balance})
                record_commit(s, op="dividend.credit", effect_class="additive",
                              identity={"reference": reference, "account_id": h["account_id"],
                                        "amount": h["amount"]},
                              args={"dividend_id": dividend_id, **h})
        except IntegrityError:
            continue  # a concurrent resume credited this holder first: nothing left to do
    with Session(ctx.engine) as s, s.begin():
        _get(s, Dividend, dividend_id, "dividend").status = "paid"


@router.post(
    "/dividends",
    operation_id="pay_dividend",
    status_code=201,
    openapi_extra=effect_meta("dividend.declare", "create_unique",
                              ["share_class", "amount_per_share", "reference"], "constraint"),
)
def pay_dividend(request: Request, body: DividendIn) -> JSONResponse:
    """Declare a dividend of `amount_per_share` cents on a share class and credit every
    holder. Credits are paid one by one; a dividend left `processing` is finished with
    resume_dividend. The reference is unique: a repeat is refused with 409."""
    ctx = get_ctx(request)
    claim = claim_key(ctx, honoured_key(request, native=False), "pay_dividend", body.model_dump())
    if isinstance(claim, JSONResponse):
        return claim
    try:
        with Session(ctx.engine) as s, s.begin():
            found = s.scalar(select(Dividend).where(Dividend.reference == body.reference))
            if found is not None:
                raise error(409, "resource_exists",
                            f"Dividend {body.reference} already exists ({found.id}, "
                            f"{found.status}); if it is processing, finish it with "
                            "resume_dividend instead of paying it again")
            q = select(Shareholding).where(Shareholding.share_class == body.share_class)
            holdings = list(s.scalars(q.order_by(Shareholding.account_id)))
            if not holdings:
                raise error(404, "resource_missing",
                            f"No shareholders in share class {body.share_class}")
            holders = [{"account_id": h.account_id, "shares": h.shares,
                        "amount": h.shares * body.amount_per_share} for h in holdings]
            d = Dividend(id=new_id(s, "div"), reference=body.reference,
                         share_class=body.share_class, amount_per_share=body.amount_per_share,
                         holders=holders, status="processing", created=now(s))
            s.add(d)
            _audit(
                s,
                "dividend.declare",
                ref=body.reference,
                amount=sum(h["amount"] for h in holders),
                detail=body.model_dump(),
            )
            record_commit(s, op="dividend.declare", effect_class="create_unique",
                          identity=body.model_dump(), args=body.model_dump(),
                          key=claim.key if claim else None)
            try:
                s.flush()
            except IntegrityError as exc:
                raise error(409, "resource_exists",
                            f"Dividend {body.reference} already exists") from exc
            dividend_id = d.id
    except Exception:
        release_key(ctx, claim)
        raise
    _pay_credits(request, ctx, dividend_id)
    with Session(ctx.engine) as s, s.begin():
        view = _dividend_view(s, _get(s, Dividend, dividend_id, "dividend"))
        complete_key(s, claim, 201, view)
    return JSONResponse(status_code=201, content=view)


@router.post(
    "/dividends/{dividend_id}/resume",
    operation_id="resume_dividend",
    openapi_extra=effect_meta("dividend.resume", "set", ["dividend_id"]),
)
def resume_dividend(request: Request, dividend_id: PathId) -> dict[str, Any]:
    """Pay the credits a `processing` dividend still owes; a paid one is left as it is."""
    ctx = get_ctx(request)
    _pay_credits(request, ctx, dividend_id)
    with Session(ctx.engine) as s:
        return _dividend_view(s, _get(s, Dividend, dividend_id, "dividend"))


# ---- schema migrations (composite: DDL, then catalog row) --------------------------


class ColumnIn(BaseModel):
    name: str = Field(pattern=schema.NAME_PATTERN)
    type: str = Field(pattern="^(integer|text|real)$")


class MigrationIn(BaseModel):
    name: str = Field(pattern=schema.NAME_PATTERN)
    columns: list[ColumnIn] = Field(min_length=1, max_length=32)

    @field_validator("columns")
    @classmethod
    def _unique_names(cls, v: list[ColumnIn]) -> list[ColumnIn]:
        if len({c.name for c in v}) != len(v):
            raise ValueError("column names must be unique")
        return v


def _check_unapplied(s: Session, name: str) -> None:
    m = s.scalar(select(Migration).where(Migration.name == name))
    if m is not None:
        raise error(409, "resource_exists",
                    f"Migration {name} is already applied (table {schema.table_for(name)}, "
                    f"recorded {m.applied})")
    if schema.table_exists(s, name):
        raise error(409, "partial_migration",
                    f"Table {schema.table_for(name)} exists without a catalog row in "
                    "db_migrations: an earlier apply_migration stopped after its DDL. Do not "
                    f"apply it again; call repair_migration for {name} to record the "
                    "missing catalog row.")


def _record_migration(
    s: Session, name: str, columns: list[dict[str, str]], repaired: bool, key: str | None
) -> Migration:
    """The catalog row and its `migration.apply` commit row: one per name, whichever of
    apply_migration or repair_migration writes it."""
    m = Migration(id=new_id(s, "mig"), name=name, columns=columns, repaired=repaired,
                  applied=now(s))
    s.add(m)
    _audit(s, "migration.repair" if repaired else "migration.apply", ref=name,
           detail={"columns": columns})
    record_commit(
        s,
        op="migration.apply",
        effect_class="create_unique",
        identity={"name": name},
        args={"name": name, "columns": columns, "repaired": repaired},
        key=key,
    )
    return m


@router.post(
    "/migrations",
    operation_id="apply_migration",
    status_code=201,
    openapi_extra=effect_meta("migration.apply", "create_unique", ["name"], "constraint"),
)
def apply_migration(request: Request, body: MigrationIn) -> JSONResponse:
    """Create table ext_<name> with the given columns and record it in the migration
    catalog. The DDL and the catalog row are two transactions."""
    ctx = get_ctx(request)
    columns = [c.model_dump() for c in body.columns]
    claim = claim_key(ctx, honoured_key(request, native=False), "apply_migration",
                      body.model_dump())
    if isinstance(claim, JSONResponse):
        return claim
    try:
        with Session(ctx.engine) as s:
            _check_unapplied(s, body.name)
        try:
            schema.create_table(ctx.engine, body.name, columns)
        except OperationalError as exc:  # created concurrently since the check
            raise error(
                409, "partial_migration", f"Table {schema.table_for(body.name)} already exists"
            ) from exc
    except Exception:
        release_key(ctx, claim)
        raise
    maybe_crash(request, "migration.after_ddl")
    try:
        with Session(ctx.engine) as s, s.begin():
            m = _record_migration(s, body.name, columns, False, claim.key if claim else None)
            s.flush()
            view = _row(m)
            complete_key(s, claim, 201, view)
    except IntegrityError as exc:  # a concurrent repair recorded it first
        release_key(ctx, claim)
        raise error(409, "resource_exists", f"Migration {body.name} is already applied") from exc
    return JSONResponse(status_code=201, content=view)


@router.post(
    "/migrations/{name}/repair",
    operation_id="repair_migration",
    openapi_extra=effect_meta("migration.repair", "set", ["name"]),
)
def repair_migration(request: Request, name: MigrationName) -> JSONResponse:
    """Record the missing catalog row of a migration whose table exists (a half-applied
    migration). A migration already in the catalog is returned as it is."""

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        m = s.scalar(select(Migration).where(Migration.name == name))
        if m is None:
            columns = schema.ext_tables(s).get(schema.table_for(name))
            if columns is None:
                raise error(404, "resource_missing",
                            f"No table {schema.table_for(name)}: nothing to repair; apply the "
                            "migration with apply_migration")
            m = _record_migration(s, name, columns, True, key)
            s.flush()
        return 200, _row(m)

    return run_mutation(request, route="repair_migration", native=False, payload={"name": name},
                        apply=apply)


# ---- domain definition -------------------------------------------------------------


def seed_state(s: Session, seed: int) -> None:
    fx = build_fixture(seed)
    s.add_all(Account(**a) for a in fx["accounts"])
    s.flush()
    s.add_all(Shareholding(**h) for h in fx["shareholdings"])
    s.add_all(Order(**o) for o in fx["orders"])


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
            issues.append(f"table {table} exists without a db_migrations row")
    return issues


DOMAIN = DomainService(
    name="database",
    title="UndoBench Database",
    routers=[router],
    tables=TABLES,
    seed_state=seed_state,
    partial_state=partial_state,
    extra_state=extra_state,
    wipe_extra=schema.drop_all,
)

__all__ = ["DOMAIN"]
