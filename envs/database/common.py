"""Helpers the database routes share: row views, lookups, balance changes, audit rows."""

from __future__ import annotations

from typing import Annotated, Any, cast

from fastapi import Depends, Path
from pydantic import Field
from sqlalchemy import CursorResult, update
from sqlalchemy.orm import Session

from .._service.context import ServiceContext, get_ctx, now
from .._service.db import row as row  # re-exported for the domain modules
from .._service.mutation import error
from .models import Account, Audit

Ctx = Annotated[ServiceContext, Depends(get_ctx)]
Id = Annotated[str, Field(min_length=1, max_length=64)]
PathId = Annotated[str, Path(min_length=1, max_length=64)]


def get_or_404(s: Session, model: type[Any], ident: str, what: str) -> Any:
    obj = s.get(model, ident)
    if obj is None:
        raise error(404, "resource_missing", f"No such {what}: {ident}")
    return obj


def apply_delta(s: Session, account_id: str, delta: int) -> Account:
    """Change a balance in one UPDATE, so concurrent adjustments cannot lose each other,
    and refuse (402) one that would take the balance below zero."""
    stmt = (
        update(Account)
        .where(Account.id == account_id, Account.balance + delta >= 0)
        .values(balance=Account.balance + delta)
    )
    res = cast(CursorResult[Any], s.execute(stmt))
    if res.rowcount == 0:
        found = get_or_404(s, Account, account_id, "account")
        raise error(
            402,
            "insufficient_funds",
            f"Account {account_id} holds {found.balance} cents; "
            f"a delta of {delta} would overdraw it",
        )
    acct = s.get(Account, account_id, populate_existing=True)
    if acct is None:  # pragma: no cover - the UPDATE just matched it
        raise error(404, "resource_missing", f"No such account: {account_id}")
    return acct


def audit(
    s: Session,
    action: str,
    *,
    account_id: str | None = None,
    ref: str | None = None,
    amount: int | None = None,
    detail: dict[str, Any] | None = None,
) -> Audit:
    """Append an audit row inside the caller's transaction."""
    entry = Audit(
        at=now(s), action=action, account_id=account_id, ref=ref, amount=amount, detail=detail or {}
    )
    s.add(entry)
    return entry
