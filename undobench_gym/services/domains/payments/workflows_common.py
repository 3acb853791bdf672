"""What the payments workflows share: the fixture history their counts start from, fresh
amounts a read-back can tell apart, and the balance oracle."""

from __future__ import annotations

import random
from typing import Any

from undobench_gym.contract.specs import Boundary, EffectExpectation, StatePredicate

#: Short names the workflow modules write their specs with.
B = Boundary
E = EffectExpectation
P = StatePredicate


def usd_available(fixture: dict[str, Any]) -> int:
    """The platform's usd balance after the fixture's history."""
    return int(next(b["available"] for b in fixture["balance"] if b["currency"] == "usd"))


def usd_balance_is(description: str, value: str) -> StatePredicate:
    return P.field_is(description, "pay_balance", {"currency": "usd"}, "available", value)


def matching(rows: list[dict[str, Any]], **where: Any) -> int:
    """How many fixture rows match: the history an invariant's count starts from."""
    return sum(1 for r in rows if all(r.get(k) == v for k, v in where.items()))


def fresh_amount(rng: random.Random, taken: set[int]) -> int:
    """An amount in cents that no earlier row of the customer has, so that a read-back by
    customer and amount finds the new charge only."""
    while True:
        amount = int(rng.randint(5, 900) * 100 + rng.choice([0, 50, 99]))
        if amount not in taken:
            return amount
