"""The seeded initial state of the database service: a pure function of the seed.

The service inserts it on reset, and the env draws task parameters from the same rows.
"""

from __future__ import annotations

from typing import Any

from undobench_gym.seeding import rng_for, stable_id

COMPANIES = [
    "Acme",
    "Globex",
    "Initech",
    "Umbrella",
    "Hooli",
    "Vandelay",
    "Stark",
    "Wayne",
    "Tyrell",
    "Cyberdyne",
    "Soylent",
    "Wonka",
]
SUFFIXES = ["Ltd", "GmbH", "Inc", "LLC", "SA", "BV"]
TIERS = ("bronze", "silver", "gold", "platinum")
SHARE_CLASSES = ("common", "preferred", "series_a")
#: Every share class has exactly this many holders, so dividend workflows have a fixed shape.
HOLDERS_PER_CLASS = 3
N_ACCOUNTS = 8
CREATED = "2025-12-31T12:00:00Z"


def build_fixture(seed: int) -> dict[str, list[dict[str, Any]]]:
    rng = rng_for("database-fixture", seed)
    names = rng.sample([(c, s) for c in COMPANIES for s in SUFFIXES], N_ACCOUNTS)
    accounts: list[dict[str, Any]] = []
    for i, (company, suffix) in enumerate(names):
        accounts.append(
            {
                "id": stable_id("acct", seed, i),
                "name": f"{company} {suffix}",
                "email": f"billing@{company.lower()}-{suffix.lower()}.example.com",
                "balance": rng.randint(200, 9000) * 100 + rng.choice([0, 25, 50, 99]),
                # Fewer accounts in the top tiers, so there is almost always one to upgrade.
                "tier": rng.choices(TIERS, weights=[4, 3, 2, 1])[0],
                "created": CREATED,
            }
        )
    holdings: list[dict[str, Any]] = []
    for share_class in SHARE_CLASSES:
        for acct in sorted(rng.sample(accounts, HOLDERS_PER_CLASS), key=lambda a: a["id"]):
            holdings.append(
                {
                    "id": stable_id("hold", seed, acct["id"], share_class),
                    "account_id": acct["id"],
                    "share_class": share_class,
                    "shares": rng.randint(10, 2000),
                }
            )
    orders: list[dict[str, Any]] = []
    for n, number in enumerate(sorted(rng.sample(range(100000, 999999), 5))):
        orders.append(
            {
                "id": stable_id("ord", seed, n),
                "order_number": f"ORD-{number}",
                "account_id": rng.choice(accounts)["id"],
                "total": rng.randint(10, 2000) * 100,
                "status": "open",
                "created": CREATED,
            }
        )
    return {"accounts": accounts, "shareholdings": holdings, "orders": orders}
