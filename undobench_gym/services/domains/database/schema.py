"""Raw-SQL helpers for the `ext_<name>` tables that schema migrations create.

These tables are not ORM models: they only exist as DDL in the SQLite file, which is what
makes a half-applied migration (table without catalog row) a real, observable state.
"""

from __future__ import annotations

import re

from sqlalchemy import Connection, text
from sqlalchemy.orm import Session

EXT_PREFIX = "ext_"
NAME_PATTERN = r"^[a-z][a-z0-9_]{0,40}$"
COLUMN_TYPES = {"integer": "INTEGER", "text": "TEXT", "real": "REAL"}
_EXT_TABLE = re.compile(r"^ext_[a-z][a-z0-9_]{0,40}$")

Columns = list[dict[str, str]]


def table_for(name: str) -> str:
    return f"{EXT_PREFIX}{name}"


def ext_tables(conn: Session | Connection) -> dict[str, Columns]:
    """Every `ext_` table with its columns in declaration order, read from the catalog."""
    names = conn.execute(
        text(
            "SELECT name FROM sqlite_master WHERE type = 'table' "
            "AND substr(name, 1, 4) = 'ext_' ORDER BY name"
        )
    ).scalars()
    out: dict[str, Columns] = {}
    for table in [n for n in names if _EXT_TABLE.match(n)]:
        info = conn.execute(text(f'PRAGMA table_info("{table}")')).mappings().all()
        out[table] = [{"name": str(c["name"]), "type": str(c["type"]).lower()} for c in info]
    return out


def table_exists(conn: Session | Connection, name: str) -> bool:
    row = conn.execute(
        text("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = :n"),
        {"n": table_for(name)},
    ).first()
    return row is not None


def create_table(conn: Session | Connection, name: str, columns: Columns) -> None:
    """Run the DDL in the caller's transaction (SQLite DDL is transactional: the caller
    writes the commit-log row first, and both land or neither does). Identifiers were
    validated by pattern already; they are quoted anyway so that SQL keywords ("order",
    "group") are valid column names."""
    cols = ", ".join(f'"{c["name"]}" {COLUMN_TYPES[c["type"]]}' for c in columns)
    conn.execute(text(f'CREATE TABLE "{table_for(name)}" ({cols})'))


def drop_all(session: Session) -> None:
    """Reset wipes every migration's table; the seeded state has none."""
    for table in ext_tables(session):
        session.execute(text(f'DROP TABLE "{table}"'))
