"""The database service: business data over SQLite (money is integer cents). Routes live
by kind in `reads`, `mutations` and `composites` (dividends, migrations)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from undobench_gym.services.domains._service.kit import DomainService
from undobench_gym.services.domains.database import composites, mutations, reads, schema
from undobench_gym.services.domains.database.fixture import build_fixture
from undobench_gym.services.domains.database.models import (
    TABLES,
    Account,
    Audit,
    Dividend,
    DividendCredit,
    Migration,
    Order,
    Shareholding,
)

#: Fixture key -> model, parents first (foreign keys).
FIXTURE_ORDER: tuple[tuple[str, Any], ...] = (
    ("accounts", Account),
    ("shareholdings", Shareholding),
    ("orders", Order),
    ("dividends", Dividend),
    ("dividend_credits", DividendCredit),
    ("migrations", Migration),
    ("audit", Audit),
)


class DatabaseService(DomainService):
    """Seeds like every domain, then creates the table of each migration in the seeded
    catalog: the history's DDL is state too."""

    def seed(self, session: Session, seed: int) -> None:
        super().seed(session, seed)
        for m in session.scalars(select(Migration).order_by(Migration.applied, Migration.id)):
            schema.create_table(session, m.name, m.columns)


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


DOMAIN = DatabaseService(
    name="database",
    title="UndoBench Database",
    routers=[reads.router, mutations.router, composites.router],
    tables=TABLES,
    fixture=build_fixture,
    fixture_order=FIXTURE_ORDER,
    partial_state=partial_state,
    extra_state=extra_state,
    wipe_extra=schema.drop_all,
)

__all__ = ["DOMAIN"]
