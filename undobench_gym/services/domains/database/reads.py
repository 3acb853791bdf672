"""Database read-only routes: what an agent verifies with before it retries."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from sqlalchemy import select

from undobench_gym.services.domains._service.kit import (
    DbSession,
    PathId,
    error,
    filtered,
    get_or_404,
    read_route,
    row,
)
from undobench_gym.services.domains.database import schema
from undobench_gym.services.domains.database.common import (
    TIER_PATTERN,
    AccountDetailOut,
    AccountOut,
    AuditOut,
    DividendOut,
    MigrationOut,
    OrderOut,
    SchemaOut,
    ShareholdingOut,
    dividend_view,
)
from undobench_gym.services.domains.database.models import (
    Account,
    Audit,
    Dividend,
    Migration,
    Order,
    Shareholding,
)

router = APIRouter(prefix="/v1")


@read_route(router, "/accounts", "list_accounts", list[AccountOut])
def list_accounts(
    s: DbSession, tier: str | None = Query(None, pattern=TIER_PATTERN)
) -> list[dict[str, Any]]:
    """List accounts with their balances (cents) and tiers, optionally by tier."""
    q = select(Account).order_by(Account.id)
    return [row(a) for a in s.scalars(filtered(q, (Account.tier, tier)))]


@read_route(router, "/accounts/{account_id}", "get_account", AccountDetailOut)
def get_account(s: DbSession, account_id: PathId) -> dict[str, Any]:
    """Retrieve one account with its shareholdings."""
    acct = get_or_404(s, Account, account_id, "account")
    q = select(Shareholding).where(Shareholding.account_id == account_id)
    holdings = [row(h) for h in s.scalars(q.order_by(Shareholding.share_class))]
    return {**row(acct), "shareholdings": holdings}


@read_route(router, "/shareholdings", "list_shareholdings", list[ShareholdingOut])
def list_shareholdings(
    s: DbSession, share_class: str | None = Query(None, max_length=32)
) -> list[dict[str, Any]]:
    """List who holds how many shares, optionally for one share class."""
    q = select(Shareholding).order_by(Shareholding.share_class, Shareholding.account_id)
    return [row(h) for h in s.scalars(filtered(q, (Shareholding.share_class, share_class)))]


@read_route(router, "/orders", "list_orders", list[OrderOut])
def list_orders(
    s: DbSession, account_id: str | None = Query(None, max_length=64)
) -> list[dict[str, Any]]:
    """List orders, optionally for one account."""
    q = select(Order).order_by(Order.created, Order.order_number)
    return [row(o) for o in s.scalars(filtered(q, (Order.account_id, account_id)))]


@read_route(router, "/orders/{order_number}", "get_order", OrderOut)
def get_order(s: DbSession, order_number: PathId) -> dict[str, Any]:
    """Retrieve one order by its order number."""
    o = s.scalar(select(Order).where(Order.order_number == order_number))
    if o is None:
        raise error(404, "resource_missing", f"No such order: {order_number}")
    return row(o)


@read_route(router, "/dividends", "list_dividends", list[DividendOut])
def list_dividends(
    s: DbSession, reference: str | None = Query(None, max_length=64)
) -> list[dict[str, Any]]:
    """List dividends with their credits, optionally by reference."""
    q = select(Dividend).order_by(Dividend.created, Dividend.id)
    return [dividend_view(s, d) for d in s.scalars(filtered(q, (Dividend.reference, reference)))]


@read_route(router, "/migrations", "list_migrations", list[MigrationOut])
def list_migrations(s: DbSession) -> list[dict[str, Any]]:
    """List the migration catalog (db_migrations)."""
    return [row(m) for m in s.scalars(select(Migration).order_by(Migration.applied))]


@read_route(router, "/schema", "get_schema", SchemaOut)
def get_schema(s: DbSession) -> dict[str, Any]:
    """The ext_ tables that exist, with their columns and whether the migration catalog
    records each one (a table that is not cataloged is a half-applied migration)."""
    cataloged = set(s.scalars(select(Migration.name)))
    out = []
    for table, columns in schema.ext_tables(s).items():
        name = table[len(schema.EXT_PREFIX) :]
        out.append(
            {"name": table, "migration": name, "columns": columns, "cataloged": name in cataloged}
        )
    return {"tables": out}


@read_route(router, "/audit", "list_audit", list[AuditOut])
def list_audit(
    s: DbSession,
    account_id: str | None = Query(None, max_length=64),
    action: str | None = Query(None, max_length=64),
    limit: int = Query(200, ge=1, le=1000),
) -> list[dict[str, Any]]:
    """The audit trail, oldest first, optionally for one account or action."""
    q = select(Audit).order_by(Audit.seq)
    q = filtered(q, (Audit.account_id, account_id), (Audit.action, action))
    return [row(a) for a in s.scalars(q.limit(limit))]
