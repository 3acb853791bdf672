"""The seeded initial state of the payments service: a pure function of the seed.

The service inserts it on reset, and the env draws task parameters from the same rows.
"""

from __future__ import annotations

from typing import Any

from undobench_gym.seeding import rng_for, stable_id

FIRST = ["Ada", "Grace", "Linus", "Barbara", "Ken", "Radia", "Edsger", "Frances", "Tim", "Shafi"]
LAST = ["Lovelace", "Hopper", "Torvalds", "Liskov", "Thompson", "Perlman", "Dijkstra", "Allen"]
PLANS = {"basic": 900, "pro": 2900, "team": 7900}
CREATED = "2025-12-31T12:00:00Z"


def build_fixture(seed: int) -> dict[str, list[dict[str, Any]]]:
    rng = rng_for("payments-fixture", seed)
    customers, charges, subs = [], [], []
    names = rng.sample([(f, s) for f in FIRST for s in LAST], 6)
    for i, (first, last) in enumerate(names):
        cid = stable_id("cus", seed, i)
        customers.append(
            {
                "id": cid,
                "email": f"{first.lower()}.{last.lower()}@example.com",
                "name": f"{first} {last}",
                "created": CREATED,
            }
        )
        order = rng.randint(1000, 9999)
        amount = rng.randint(10, 500) * 100
        # Customer 0 was charged twice for the same order: the overcharge workflow refunds one.
        copies = 2 if i == 0 else 1
        for c in range(copies):
            charges.append(
                {
                    "id": stable_id("ch", seed, i, c),
                    "customer_id": cid,
                    "amount": amount,
                    "currency": "usd",
                    "description": f"Order #{order}",
                    "amount_refunded": 0,
                    "status": "succeeded",
                    "created": CREATED,
                }
            )
        plan = rng.choice(sorted(PLANS))
        subs.append(
            {
                "id": stable_id("sub", seed, i),
                "customer_id": cid,
                "plan": plan,
                "amount": PLANS[plan],
                "currency": "usd",
                "status": "active",
                "period": rng.randint(1, 6),
            }
        )
    balance = [
        {"currency": "usd", "available": 5_000_000},
        {"currency": "eur", "available": 2_000_000},
    ]
    return {
        "customers": customers,
        "charges": charges,
        "subscriptions": subs,
        "balance": balance,
    }


def fx_rate(seed: int, source: str, target: str) -> float:
    """A seeded, stable exchange rate (4 decimals)."""
    rng = rng_for("fx", seed, source, target)
    return round(rng.uniform(0.7, 1.3), 4)
