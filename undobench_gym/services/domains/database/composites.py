"""Composite routes: dividends and schema migrations commit in several transactions.

A named crash point sits between two of those transactions, so a DURING_MUTATION fault
leaves a real half-applied state behind; each composite has a route that finishes it.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, field_validator
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session

from undobench_gym.services.domains._service.kit import (
    Effect,
    PathId,
    error,
    flush_or_409,
    get_ctx,
    get_or_404,
    maybe_crash,
    new_id,
    now,
    row,
    run_composite,
    run_mutation,
    write_route,
)
from undobench_gym.services.domains.database import schema
from undobench_gym.services.domains.database.common import (
    DividendOut,
    MigrationOut,
    apply_delta,
    audit,
    dividend_view,
)
from undobench_gym.services.domains.database.models import (
    Dividend,
    DividendCredit,
    Migration,
    Shareholding,
)

router = APIRouter(prefix="/v1")
MigrationName = Annotated[str, Path(pattern=schema.NAME_PATTERN)]

DECLARE_DIVIDEND = Effect(
    "dividend.declare",
    "create_unique",
    ("share_class", "amount_per_share", "reference"),
    "constraint",
)
#: Who is credited how much on which share class: a dividend declared again under another
#: reference credits every holder twice all the same. Written by the dividend's steps.
CREDIT_HOLDER = Effect("dividend.credit", "additive", ("share_class", "account_id", "amount"))
RESUME_DIVIDEND = Effect("dividend.resume", "set", ("dividend_id",), resumption=True)
#: The migration and the table it creates: a name applied with other columns is another
#: schema change.
APPLY_MIGRATION = Effect("migration.apply", "create_unique", ("name", "columns"), "constraint")
REPAIR_MIGRATION = Effect("migration.repair", "set", ("name",))


# ---- dividends ---------------------------------------------------------------------


class DividendIn(BaseModel):
    share_class: str = Field(pattern=r"^[a-z][a-z0-9_]{0,31}$")
    amount_per_share: int = Field(strict=True, gt=0, le=100_000)
    reference: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def _credit_holder(
    s: Session, dividend_id: str, reference: str, share_class: str, h: dict[str, Any]
) -> None:
    acct = apply_delta(s, h["account_id"], h["amount"])
    s.add(
        DividendCredit(
            id=new_id(s, "dcr"),
            dividend_id=dividend_id,
            account_id=h["account_id"],
            shares=h["shares"],
            amount=h["amount"],
            created=now(s),
        )
    )
    audit(
        s,
        "dividend.credit",
        account_id=h["account_id"],
        ref=reference,
        amount=h["amount"],
        detail={"dividend_id": dividend_id, "balance_after": acct.balance},
    )
    identity = {"share_class": share_class, "account_id": h["account_id"], "amount": h["amount"]}
    args = {"dividend_id": dividend_id, "reference": reference, **h}
    CREDIT_HOLDER.commit(s, args, None, identity)


def _pay_credits(request: Request, dividend_id: str, resume: bool) -> None:
    """Credit each holder still unpaid in its own transaction, as a batch ledger does.

    A resume that finds the dividend `processing` and finishes it records
    `dividend.resume`; a resume of a paid dividend changes nothing and records nothing."""
    engine = get_ctx(request).engine
    with Session(engine) as s:
        d = get_or_404(s, Dividend, dividend_id, "dividend")
        holders, reference, share_class = list(d.holders), d.reference, d.share_class
    for i, h in enumerate(holders):
        if i == 1:
            maybe_crash(request, "dividend.after_first_credit")
        try:
            with Session(engine) as s, s.begin():
                done = s.scalar(
                    select(DividendCredit).where(
                        DividendCredit.dividend_id == dividend_id,
                        DividendCredit.account_id == h["account_id"],
                    )
                )
                if done is None:
                    _credit_holder(s, dividend_id, reference, share_class, h)
        except IntegrityError:
            continue  # a concurrent resume credited this holder first: nothing left to do
    with Session(engine) as s, s.begin():
        d = get_or_404(s, Dividend, dividend_id, "dividend")
        if d.status == "paid":
            return
        d.status = "paid"
        if resume:
            RESUME_DIVIDEND.commit(s, {"dividend_id": dividend_id}, None)


def _declare(s: Session, body: DividendIn, key: str | None) -> str:
    found = s.scalar(select(Dividend).where(Dividend.reference == body.reference))
    if found is not None:
        raise error(
            409,
            "resource_exists",
            f"Dividend {body.reference} already exists ({found.id}, {found.status}); if it is "
            "processing, finish it with resume_dividend instead of paying it again",
        )
    q = select(Shareholding).where(Shareholding.share_class == body.share_class)
    holders: list[dict[str, Any]] = [
        {"account_id": h.account_id, "shares": h.shares, "amount": h.shares * body.amount_per_share}
        for h in s.scalars(q.order_by(Shareholding.account_id))
    ]
    if not holders:
        raise error(404, "resource_missing", f"No shareholders in share class {body.share_class}")
    d = Dividend(
        id=new_id(s, "div"),
        reference=body.reference,
        share_class=body.share_class,
        amount_per_share=body.amount_per_share,
        holders=holders,
        status="processing",
        created=now(s),
    )
    s.add(d)
    # Flush now: the audit row's clock read would autoflush the dividend outside the guard.
    flush_or_409(s, f"Dividend {body.reference} already exists")
    total = sum(h["amount"] for h in holders)
    audit(s, "dividend.declare", ref=body.reference, amount=total, detail=body.model_dump())
    DECLARE_DIVIDEND.commit(s, body.model_dump(), key)
    return d.id


@write_route(router, "POST", "/dividends", "pay_dividend", DECLARE_DIVIDEND, DividendOut, 201)
def pay_dividend(request: Request, body: DividendIn) -> JSONResponse:
    """Declare a dividend of `amount_per_share` cents on a share class and credit every
    holder's balance. Credits are paid one by one; a dividend left `processing` is finished
    with resume_dividend. The reference is unique: a repeat is refused with 409."""
    return run_composite(
        request,
        route="pay_dividend",
        payload=body.model_dump(),
        start=lambda s, key: _declare(s, body, key),
        advance=lambda dividend_id: _pay_credits(request, dividend_id, resume=False),
        view=lambda s, dividend_id: dividend_view(
            s, get_or_404(s, Dividend, dividend_id, "dividend")
        ),
        native=DECLARE_DIVIDEND.native,
    )


@write_route(
    router,
    "POST",
    "/dividends/{dividend_id}/resume",
    "resume_dividend",
    RESUME_DIVIDEND,
    DividendOut,
)
def resume_dividend(request: Request, dividend_id: PathId) -> dict[str, Any]:
    """Pay the credits a `processing` dividend still owes; a paid one is left as it is."""
    # No Idempotency-Key claim (a resume is a `set`): not a composite for `run_composite`.
    _pay_credits(request, dividend_id, resume=True)
    with Session(get_ctx(request).engine) as s:
        return dividend_view(s, get_or_404(s, Dividend, dividend_id, "dividend"))


# ---- schema migrations: DDL, then the catalog row ----------------------------------


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
    table = schema.table_for(name)
    m = s.scalar(select(Migration).where(Migration.name == name))
    if m is not None:
        raise error(
            409,
            "resource_exists",
            f"Migration {name} is already applied (table {table}, recorded {m.applied})",
        )
    if schema.table_exists(s, name):
        raise error(
            409,
            "partial_migration",
            f"Table {table} exists without a catalog row in db_migrations: an earlier "
            f"apply_migration stopped after its DDL. Do not apply it again; call "
            f"repair_migration for {name} to record the missing catalog row.",
        )


def _catalog(s: Session, name: str, columns: list[dict[str, str]], repaired: bool) -> Migration:
    """The catalog row: one per name (the unique constraint), whichever of
    apply_migration or repair_migration writes it."""
    m = Migration(
        id=new_id(s, "mig"), name=name, columns=columns, repaired=repaired, applied=now(s)
    )
    s.add(m)
    action = "migration.repair" if repaired else "migration.apply"
    audit(s, action, ref=name, detail={"columns": columns})
    return m


def _create_table(s: Session, name: str, columns: list[dict[str, str]], key: str | None) -> None:
    """The DDL, with the commit row of the schema change it is: the first transaction."""
    _check_unapplied(s, name)  # reads: they run before SQLite's transaction begins
    try:
        APPLY_MIGRATION.commit(s, {"name": name, "columns": columns}, key)
        s.flush()  # the INSERT opens the SQLite transaction the DDL then joins
        schema.create_table(s, name, columns)
    except OperationalError as exc:  # created concurrently since the check
        raise error(
            409, "partial_migration", f"Table {schema.table_for(name)} already exists"
        ) from exc


def _record_applied(s: Session, name: str, columns: list[dict[str, str]]) -> dict[str, Any]:
    """The catalog row, in the last transaction (with the stored Idempotency-Key answer)."""
    try:
        m = _catalog(s, name, columns, repaired=False)
        s.flush()
    except IntegrityError as exc:  # a concurrent repair recorded it first
        raise error(409, "resource_exists", f"Migration {name} is already applied") from exc
    return row(m)


@write_route(router, "POST", "/migrations", "apply_migration", APPLY_MIGRATION, MigrationOut, 201)
def apply_migration(request: Request, body: MigrationIn) -> JSONResponse:
    """Create table ext_<name> with the given columns and record it in the migration
    catalog. The DDL and the catalog row are two transactions."""
    columns = [c.model_dump() for c in body.columns]
    return run_composite(
        request,
        route="apply_migration",
        payload=body.model_dump(),
        start=lambda s, key: _create_table(s, body.name, columns, key),
        advance=lambda _: maybe_crash(request, "migration.after_ddl"),
        view=lambda s, _: _record_applied(s, body.name, columns),
        native=APPLY_MIGRATION.native,
    )


@write_route(
    router, "POST", "/migrations/{name}/repair", "repair_migration", REPAIR_MIGRATION, MigrationOut
)
def repair_migration(request: Request, name: MigrationName) -> JSONResponse:
    """Record the missing catalog row of a half-applied migration (its table exists, its
    catalog row does not). A migration already in the catalog is returned as it is."""

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        m = s.scalar(select(Migration).where(Migration.name == name))
        if m is None:
            table = schema.table_for(name)
            columns = schema.ext_tables(s).get(table)
            if columns is None:
                raise error(
                    404,
                    "resource_missing",
                    f"No table {table}: nothing to repair; apply the migration instead",
                )
            m = _catalog(s, name, columns, repaired=True)
            REPAIR_MIGRATION.commit(s, {"name": name, "columns": columns}, key)
            s.flush()
        return 200, row(m)

    return run_mutation(
        request,
        route="repair_migration",
        native=REPAIR_MIGRATION.native,
        payload={"name": name},
        apply=apply,
    )
