"""Tables every service has, next to its domain tables, in its own SQLite file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy import JSON, Engine, Integer, String, Text, create_engine, event, insert
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class CommitLog(Base):
    """One row per committed mutation, written in the same transaction as the mutation."""

    __tablename__ = "commit_log"
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    op: Mapped[str] = mapped_column(String(64))
    effect_class: Mapped[str] = mapped_column(String(32))
    identity: Mapped[str] = mapped_column(Text)  # canonical JSON of the identity fields
    args: Mapped[dict[str, Any]] = mapped_column(JSON)
    at: Mapped[str] = mapped_column(String(32))
    idempotency_key: Mapped[str | None] = mapped_column(String(255), nullable=True)
    compensation: Mapped[bool] = mapped_column(default=False)
    #: Who committed it: None for the agent, "writer" for the stack's concurrent writer.
    actor: Mapped[str | None] = mapped_column(String(16), nullable=True, default=None)
    #: The id of what it created (a charge, a commit), for an undo to name.
    ref: Mapped[str | None] = mapped_column(String(128), nullable=True, default=None)
    #: What it undoes in full, as the domain's inverse: {"op", "ref"} (the undone row's
    #: `ref`) or {"op", "identity"} (a row with that identity: a negative adjustment).
    undoes: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True, default=None)


class Meta(Base):
    """Seeded counters and the virtual clock; wiped and reseeded by reset."""

    __tablename__ = "meta"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class ServiceConfig(Base):
    """Admin-set configuration; survives reset and crash restarts."""

    __tablename__ = "service_config"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class IdempotencyRecord(Base):
    __tablename__ = "idempotency_keys"
    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    route: Mapped[str] = mapped_column(String(128), primary_key=True)
    payload_hash: Mapped[str] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(16))  # in_flight | done
    #: The server process that claimed the key: an in-flight claim of a process that has
    #: since died (a crash restart) is not in flight any more and may be taken over.
    owner: Mapped[str] = mapped_column(String(32), default="")
    status_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    body: Mapped[str | None] = mapped_column(Text, nullable=True)


def row(obj: Any) -> dict[str, Any]:
    """An ORM object as the plain dict the API answers with."""
    return {c.key: getattr(obj, c.key) for c in obj.__table__.columns}


def insert_fixture(
    session: Any, fixture: dict[str, list[dict[str, Any]]], order: tuple[tuple[str, Any], ...]
) -> None:
    """Insert fixture rows model by model, parents first (foreign keys), as ORM bulk
    INSERTs (one executemany per model and key set): the same rows and defaults as adding
    an object per row, at a fraction of the cost (a reset is on every episode's path)."""
    for key, model in order:
        if fixture[key]:
            session.execute(insert(model), fixture[key])


HARNESS_TABLES = ("commit_log", "meta", "service_config", "idempotency_keys")


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def make_engine(path: Path) -> Engine:
    engine = create_engine(
        f"sqlite:///{path}", connect_args={"check_same_thread": False, "timeout": 30}
    )

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_conn: Any, _record: Any) -> None:
        cur = dbapi_conn.cursor()
        # WAL + synchronous=NORMAL: a committed transaction survives a process exit.
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    return engine
