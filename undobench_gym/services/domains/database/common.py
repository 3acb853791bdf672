"""What the database routes share: balance changes, audit rows, the dividend view and the
response models (the output schemas agents read in the API document)."""

from __future__ import annotations

from typing import Any, cast

from pydantic import BaseModel, create_model
from sqlalchemy import CursorResult, select, update
from sqlalchemy.orm import Session

from undobench_gym.services.domains._service.kit import error, get_or_404, now, row, row_model
from undobench_gym.services.domains.database.models import (
    Account,
    Audit,
    Dividend,
    DividendCredit,
    Migration,
    Order,
    Shareholding,
)

TIER_PATTERN = "^(bronze|silver|gold|platinum)$"

# Typed `Any`: mypy takes no run-time model as a type, and routes declare `list[OrderOut]`.
AccountOut: Any = row_model(Account)
ShareholdingOut: Any = row_model(Shareholding)
#: An account with its shareholdings.
AccountDetailOut: Any = row_model(
    Account, "AccountDetailOut", shareholdings=(list[ShareholdingOut], ...)
)
OrderOut: Any = row_model(Order)
CreditOut: Any = row_model(DividendCredit, "DividendCreditOut")
#: A dividend with the credits paid so far.
DividendOut: Any = row_model(Dividend, credits=(list[CreditOut], ...))
MigrationOut: Any = row_model(Migration)
AuditOut: Any = row_model(Audit)
#: An adjustment: the account as it is now and the audit row that records the change.
AdjustmentOut: Any = create_model("AdjustmentOut", account=(AccountOut, ...), audit=(AuditOut, ...))


class SchemaTableOut(BaseModel):
    """One ext_ table; `cataloged` is false for a half-applied migration."""

    name: str
    migration: str
    columns: list[dict[str, str]]
    cataloged: bool


class SchemaOut(BaseModel):
    tables: list[SchemaTableOut]


def dividend_view(s: Session, d: Dividend) -> dict[str, Any]:
    q = select(DividendCredit).where(DividendCredit.dividend_id == d.id)
    return {**row(d), "credits": [row(c) for c in s.scalars(q.order_by(DividendCredit.id))]}


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
