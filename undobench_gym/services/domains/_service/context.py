"""Per-service state shared by the public and admin apps: engine, seed, clock, ids, config."""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from sqlalchemy import Engine, Table, select, text
from sqlalchemy.orm import Session

from undobench_gym.contract import CRASH_EXIT_CODE, CRASH_HEADER, IDEMPOTENCY_MODES
from undobench_gym.services.domains._service.db import (
    Base,
    Meta,
    ServiceConfig,
    insert_fixture,
    make_engine,
)
from undobench_gym.services.domains._service.pristine import PristineStates

__all__ = ["CRASH_HEADER", "IDEMPOTENCY_MODES"]

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class DomainService:
    """What a domain plugs into the shared service machinery."""

    name: str
    title: str
    routers: list[APIRouter]
    tables: list[Table]
    #: `build_fixture(seed)` -> rows by fixture key, and the (key, ORM model) order to
    #: insert them in, parents first (foreign keys). Together they seed the tables, unless
    #: the domain gives its own `seed_state`.
    fixture: Callable[[int], dict[str, list[dict[str, Any]]]] | None = None
    fixture_order: tuple[tuple[str, Any], ...] = ()
    seed_state: Callable[[Session, int], None] | None = None
    partial_state: Callable[[dict[str, Any]], list[str]] = lambda _state: []
    extra_state: Callable[[Session], dict[str, Any]] = lambda _s: {}
    wipe_extra: Callable[[Session], None] = lambda _s: None
    #: Routers mounted on the admin app (never proxied): e.g. a webhook receiver that is
    #: part of the stack, whose log belongs to the final state.
    admin_routers: list[APIRouter] = field(default_factory=list)
    #: Called after the tables are reseeded, with the service's data directory: for state
    #: that lives on disk next to SQLite (object bodies, git repositories).
    seed_files: Callable[[Path, int], None] | None = None

    def __post_init__(self) -> None:
        if self.seed_state is None and self.fixture is None:
            raise ValueError(f"domain {self.name!r} needs a fixture (or its own seed_state)")

    def seed(self, session: Session, seed: int) -> None:
        """Insert the seeded fixture (reset has wiped the tables)."""
        if self.seed_state is not None:
            self.seed_state(session, seed)
        else:
            assert self.fixture is not None
            insert_fixture(session, self.fixture(seed), self.fixture_order)


@dataclass
class ServiceContext:
    domain: DomainService
    engine: Engine
    idempotency_mode: str = "native"
    crash_points_enabled: bool = True
    data_dir: Path = field(default_factory=Path)
    #: Bound ports, set by the server once it listens: {"public": p, "admin": a}.
    ports: dict[str, int] = field(default_factory=dict)
    #: Identifies this server process (not part of any state dump).
    instance: str = field(default_factory=lambda: uuid.uuid4().hex)
    #: Exit codes of the earlier server processes of a fork server (see server.py), and
    #: the id of that fork server (its children keep it; a new one starts a new list).
    exits: list[int] = field(default_factory=list)
    boot: str = field(default_factory=lambda: uuid.uuid4().hex)
    #: Seeded databases for resets (they hold the persisted configuration too).
    pristine: PristineStates = field(default_factory=PristineStates)

    @classmethod
    def open(cls, domain: DomainService, data_dir: Path) -> ServiceContext:
        data_dir.mkdir(parents=True, exist_ok=True)
        engine = make_engine(data_dir / f"{domain.name}.sqlite")
        harness = [Base.metadata.tables[n] for n in ("commit_log", "meta", "service_config")]
        harness.append(Base.metadata.tables["idempotency_keys"])
        Base.metadata.create_all(engine, tables=[*harness, *domain.tables])
        ctx = cls(domain=domain, engine=engine, data_dir=data_dir)
        ctx.load_config()
        return ctx

    def load_config(self) -> None:
        with Session(self.engine) as s:
            row = s.get(ServiceConfig, "idempotency_mode")
            if row is not None:
                self.idempotency_mode = row.value

    def after_fork(self, exits: list[int]) -> None:
        """In a fork server's new child: what a freshly started process would hold. Its
        own database connections (none are inherited: the zygote closed its pool), the
        configuration as the service last persisted it, a new instance id."""
        self.engine.dispose(close=False)
        self.pristine = PristineStates()  # no SQLite handle is used across a fork
        self.load_config()
        self.instance = uuid.uuid4().hex
        self.exits = list(exits)

    def set_idempotency_mode(self, mode: str) -> None:
        with Session(self.engine) as s, s.begin():
            s.merge(ServiceConfig(key="idempotency_mode", value=mode))
        self.idempotency_mode = mode
        self.pristine.clear()  # their copies of the configuration are stale


def get_ctx(request: Request) -> ServiceContext:
    ctx: ServiceContext = request.app.state.ctx
    return ctx


_META = Meta.__table__
_SEED = select(_META.c.value).where(_META.c.key == "seed")
#: One statement per counter step instead of an ORM get, a merge and a flushed UPDATE
#: (counters and the clock are on every mutation's path). The value column is TEXT, so
#: SQLite stores the sum as the same decimal string the ORM path wrote.
_BUMP = text(
    "INSERT INTO meta (key, value) VALUES (:key, '1') "
    "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1 RETURNING value"
)


def seed_of(session: Session) -> int:
    value = session.execute(_SEED).scalar()
    return 0 if value is None else int(value)


def next_counter(session: Session, name: str) -> int:
    """Advance a counter in the session's transaction: a rollback or a crash before the
    commit takes the step back with the rest of the mutation."""
    return int(session.execute(_BUMP, {"key": f"counter:{name}"}).scalar_one())


def now(session: Session) -> str:
    """Virtual clock: one second per call, persisted so a crash restart keeps time."""
    ticks = next_counter(session, "clock")
    return (EPOCH + timedelta(seconds=ticks)).strftime("%Y-%m-%dT%H:%M:%SZ")


def seeded_id(seed: int, prefix: str, n: int) -> str:
    """The n-th id with `prefix` a service creates after a reset to `seed`: Stripe-looking
    and a pure function of its inputs, so a workflow's oracle can name the row an episode
    created without looking it up by its free text."""
    digest = hashlib.sha256(f"{seed}:{prefix}:{n}".encode()).hexdigest()
    return f"{prefix}_{digest[:14]}"


def new_id(session: Session, prefix: str) -> str:
    """The next id with `prefix` (see `seeded_id`)."""
    return seeded_id(seed_of(session), prefix, next_counter(session, f"id:{prefix}"))


def maybe_crash(request: Request, point: str) -> None:
    """Exit the process for real at a crash point the fault proxy armed on this request.

    Everything committed before this line stays on disk: that is the partial state a
    DURING_MUTATION fault is meant to leave behind.
    """
    ctx = get_ctx(request)
    if ctx.crash_points_enabled and request.headers.get(CRASH_HEADER) == point:
        os._exit(CRASH_EXIT_CODE)


def scalar_rows(session: Session, table: Table) -> list[dict[str, Any]]:
    pk = list(table.primary_key.columns)
    rows = session.execute(select(table).order_by(*pk)).mappings().all()
    return [dict(r) for r in rows]
