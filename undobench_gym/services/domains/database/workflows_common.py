"""What the database workflows share: the fixture history their counts start from, the
adjustment effect and step, and the balance and audit-trail oracles."""

from __future__ import annotations

from typing import Any

from undobench_gym.contract.specs import (
    Boundary,
    EffectExpectation,
    GoldStep,
    StatePredicate,
)

#: Short names the workflow modules write their specs with.
B = Boundary
E = EffectExpectation
P = StatePredicate


def account(fx: dict[str, Any], account_id: str) -> dict[str, Any]:
    return next(a for a in fx["accounts"] if a["id"] == account_id)


def matching(rows: list[dict[str, Any]], **where: Any) -> int:
    """How many fixture rows match: the history an invariant's count starts from."""
    return sum(1 for r in rows if all(r.get(k) == v for k, v in where.items()))


def adjustments(fx: dict[str, Any], account_id: str, **where: Any) -> int:
    """Audited balance adjustments of the account in the fixture's history."""
    return matching(fx["audit"], action="account.adjust", account_id=account_id, **where)


def unused_delta(fx: dict[str, Any], account_ids: list[str], delta: int) -> bool:
    """No earlier adjustment of these accounts moved this many cents either way, so that
    a read-back of the audit trail by account and amount finds the new one only."""
    return not any(adjustments(fx, a, amount=d) for a in account_ids for d in (delta, -delta))


def adjusted(account: str, delta: str) -> E:
    """The commit-log effect of one adjust_balance call: which account moves by how much
    (the memo is free text)."""
    return E(op="account.adjust", identity={"account_id": account, "delta": delta})


def adjust(account: str, delta: str, memo: str = "{memo}") -> GoldStep:
    args = {"account_id": account, "delta": delta, "memo": memo}
    return GoldStep(tool="adjust_balance", arguments=args)


def balance_is(description: str, account: str, value: str) -> P:
    return P.field_is(description, "db_accounts", {"id": account}, "balance", value)


def audited(description: str, account: str, delta: str, count: str) -> P:
    """Adjustments of the account by `delta` in the audit trail, history included: a
    retried adjustment, whatever its memo, makes one more."""
    where = {"action": "account.adjust", "account_id": account, "amount": delta}
    return P.count(description, "db_audit", where, count)


def audited_all(description: str, account: str, count: str) -> P:
    """All adjustments of the account, history included: one by another amount on the
    way (even one that a second cancels) makes one more."""
    where = {"action": "account.adjust", "account_id": account}
    return P.count(description, "db_audit", where, count)
