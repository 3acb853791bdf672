"""The seeded initial state of the database service: a pure function of the seed.

The service inserts it on reset, and the env draws task parameters from the same rows.

The state carries the history that produced it, in the audit trail, all dated in 2025,
before the virtual clock's epoch (2026-01-01), so a read-back can tell an episode's
effects from old rows:
- every account opened with a deposit (an `account.adjust` audit row) and had one or two
  later adjustments; every balance is the sum of its audited adjustments and dividend
  credits, and each audit row's `balance_after` is the running balance;
- accounts above bronze were upgraded from bronze once (an `account.tier` audit row);
- every order has its `order.create` audit row; a paid order was paid by one debit of
  its total (memo `payment <order number>`);
- two earlier dividends, paid in full: a declaration and one credit per holder of the
  share class (holdings have not changed since);
- two earlier schema migrations (`<name>_v1`), each with its catalog row and its
  `ext_` table.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from undobench_gym.contract.seeding import rng_for, stable_id

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
#: Migration families: history applied `<family>_v1`, tasks apply a later version.
MIGRATION_NAMES = ["loyalty_points", "gift_cards", "shipping_zones", "tax_rates", "price_tiers"]
COLUMN_POOL = [
    ("code", "text"),
    ("label", "text"),
    ("points", "integer"),
    ("rate", "real"),
    ("valid_from", "text"),
    ("priority", "integer"),
    ("weight", "real"),
    ("region", "text"),
]
ADJUSTMENT_MEMOS = ["service credit", "late fee", "billing correction", "goodwill credit"]


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def day(month: int, dom: int, hour: int = 9, minute: int = 0) -> datetime:
    return datetime(2025, month, dom, hour, minute, tzinfo=UTC)


@dataclass
class _Ledger:
    """Running balances and the audit trail, written in time order."""

    balances: dict[str, int] = field(default_factory=dict)
    audit: list[dict[str, Any]] = field(default_factory=list)

    def log(
        self,
        at: datetime,
        action: str,
        *,
        account_id: str | None = None,
        ref: str | None = None,
        amount: int | None = None,
        detail: dict[str, Any] | None = None,
    ) -> None:
        self.audit.append(
            {
                "seq": len(self.audit) + 1,
                "at": stamp(at),
                "action": action,
                "account_id": account_id,
                "ref": ref,
                "amount": amount,
                "detail": detail or {},
            }
        )

    def adjust(self, at: datetime, account_id: str, delta: int, memo: str) -> None:
        self.balances[account_id] = self.balances.get(account_id, 0) + delta
        if self.balances[account_id] < 0:
            raise ValueError(f"the history overdraws {account_id}")
        self.log(
            at,
            "account.adjust",
            account_id=account_id,
            ref=memo,
            amount=delta,
            detail={"balance_after": self.balances[account_id]},
        )


def build_fixture(seed: int) -> dict[str, list[dict[str, Any]]]:
    rng = rng_for("database-fixture", seed)
    ledger = _Ledger()
    names = rng.sample([(c, s) for c in COMPANIES for s in SUFFIXES], N_ACCOUNTS)
    accounts: list[dict[str, Any]] = []
    for i, (company, suffix) in enumerate(names):
        opened = day(2, 1 + i, 10)
        acct: dict[str, Any] = {
            "id": stable_id("acct", seed, i),
            "name": f"{company} {suffix}",
            "email": f"billing@{company.lower()}-{suffix.lower()}.example.com",
            "balance": 0,
            # Fewer accounts in the top tiers, so there is almost always one to upgrade.
            "tier": rng.choices(TIERS, weights=[4, 3, 2, 1])[0],
            "created": stamp(opened),
        }
        accounts.append(acct)
        deposit = rng.randint(200, 9000) * 100 + rng.choice([0, 25, 50, 99])
        ledger.adjust(opened, acct["id"], deposit, "opening deposit")
    for i, acct in enumerate(accounts):
        if acct["tier"] != "bronze":
            detail = {"from": "bronze", "to": acct["tier"]}
            ledger.log(
                day(3, 1 + i),
                "account.tier",
                account_id=acct["id"],
                ref=acct["tier"],
                detail=detail,
            )
    for month in (4, 5):
        for i, acct in enumerate(accounts):
            if rng.random() < 0.6:
                _past_adjustment(rng, ledger, day(month, 1 + 2 * i, 15), acct["id"])
    holdings = _holdings(seed, rng, accounts)
    dividends: list[dict[str, Any]] = []
    credits: list[dict[str, Any]] = []
    classes = rng.sample(SHARE_CLASSES, 2)
    # In time order, so that the audit trail's seq follows its clock: the Q2 dividend
    # (June), the summer's orders (July, August), the Q3 dividend (September).
    _past_dividend(seed, rng, ledger, 0, classes[0], 2, holdings, dividends, credits)
    orders = _orders(seed, rng, ledger, accounts)
    _past_dividend(seed, rng, ledger, 1, classes[1], 3, holdings, dividends, credits)
    migrations = _migrations(seed, rng, ledger)
    for acct in accounts:
        acct["balance"] = ledger.balances[acct["id"]]
    return {
        "accounts": accounts,
        "shareholdings": holdings,
        "orders": orders,
        "dividends": dividends,
        "dividend_credits": credits,
        "migrations": migrations,
        "audit": ledger.audit,
    }


def _past_adjustment(rng: random.Random, ledger: _Ledger, at: datetime, account_id: str) -> None:
    memo = rng.choice(ADJUSTMENT_MEMOS)
    delta = rng.randint(5, 50) * 100
    if memo == "late fee" and ledger.balances[account_id] > delta:
        delta = -delta
    ledger.adjust(at, account_id, delta, memo)


def _holdings(
    seed: int, rng: random.Random, accounts: list[dict[str, Any]]
) -> list[dict[str, Any]]:
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
    return holdings


def _past_dividend(
    seed: int,
    rng: random.Random,
    ledger: _Ledger,
    n: int,
    share_class: str,
    quarter: int,
    holdings: list[dict[str, Any]],
    dividends: list[dict[str, Any]],
    credits: list[dict[str, Any]],
) -> None:
    """A dividend declared at the end of the quarter and paid to every holder at once."""
    per_share = rng.randint(5, 250)
    reference = f"DIV-2025-Q{quarter}-{rng.randint(100, 999)}"
    declared = day(3 * quarter, 30, 17)
    holders = [
        {"account_id": h["account_id"], "shares": h["shares"], "amount": h["shares"] * per_share}
        for h in sorted(holdings, key=lambda h: str(h["account_id"]))
        if h["share_class"] == share_class
    ]
    did = stable_id("div", seed, n)
    dividends.append(
        {
            "id": did,
            "reference": reference,
            "share_class": share_class,
            "amount_per_share": per_share,
            "holders": holders,
            "status": "paid",
            "created": stamp(declared),
        }
    )
    declaration = {
        "share_class": share_class,
        "amount_per_share": per_share,
        "reference": reference,
    }
    total = sum(h["amount"] for h in holders)
    ledger.log(declared, "dividend.declare", ref=reference, amount=total, detail=declaration)
    for j, h in enumerate(holders):
        at = declared + timedelta(seconds=j + 1)
        credits.append(
            {
                "id": stable_id("dcr", seed, n, h["account_id"]),
                "dividend_id": did,
                "account_id": h["account_id"],
                "shares": h["shares"],
                "amount": h["amount"],
                "created": stamp(at),
            }
        )
        ledger.balances[h["account_id"]] += h["amount"]
        ledger.log(
            at,
            "dividend.credit",
            account_id=h["account_id"],
            ref=reference,
            amount=h["amount"],
            detail={"dividend_id": did, "balance_after": ledger.balances[h["account_id"]]},
        )


def _orders(
    seed: int, rng: random.Random, ledger: _Ledger, accounts: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Five orders over the summer; most were paid a few days later by a debit."""
    orders: list[dict[str, Any]] = []
    for n, number in enumerate(sorted(rng.sample(range(100000, 999999), 5))):
        placed = day(7 + n // 3, 1 + 9 * (n % 3), 11)
        order = {
            "id": stable_id("ord", seed, n),
            "order_number": f"ORD-{number}",
            "account_id": rng.choice(accounts)["id"],
            "total": rng.randint(10, 2000) * 100,
            "status": "open",
            "created": stamp(placed),
        }
        orders.append(order)
        ledger.log(
            placed,
            "order.create",
            account_id=order["account_id"],
            ref=order["order_number"],
            amount=order["total"],
        )
        # Paid only from a balance that keeps a float, so that tasks can still debit it.
        left = ledger.balances[order["account_id"]] - order["total"]
        if rng.random() < 0.6 and left >= 20_000:
            order["status"] = "paid"
            memo = f"payment {order['order_number']}"
            ledger.adjust(placed + timedelta(days=5), order["account_id"], -order["total"], memo)
    return orders


def _migrations(seed: int, rng: random.Random, ledger: _Ledger) -> list[dict[str, Any]]:
    migrations: list[dict[str, Any]] = []
    for n, family in enumerate(rng.sample(MIGRATION_NAMES, 2)):
        applied = day(10 + n, 14, 8)
        name = f"{family}_v1"
        pool = rng.sample(COLUMN_POOL, rng.randint(2, 4))
        columns = [{"name": c, "type": t} for c, t in pool]
        migrations.append(
            {
                "id": stable_id("mig", seed, n),
                "name": name,
                "columns": columns,
                "repaired": False,
                "applied": stamp(applied),
            }
        )
        ledger.log(applied, "migration.apply", ref=name, detail={"columns": columns})
    return migrations
