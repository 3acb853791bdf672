"""The seeded initial state of the payments service: a pure function of the seed.

The service inserts it on reset, and the env draws task parameters from the same rows.

The state carries the history that produced it, all dated in 2025, before the virtual
clock's epoch (2026-01-01), so a read-back can tell an episode's effects from old rows:
- a subscription in period k (1-6) started k-1 months before December 2025; period 1 was
  a free trial and each later period was billed by one renewal: periods 2..k each have
  one invoice and the charge it billed;
- every customer has one order charge (customer 0 was charged twice for the same order,
  a minute apart: the duplicate the refund workflow fixes); customer 2 got a partial
  goodwill refund, recorded in its charge's `amount_refunded`;
- earlier payouts, all paid, with one transfer per recipient (accounts come from the same
  pool the payout workflow draws from, so a recipient may have been paid before);
- earlier usd->eur wires at the seeded fx rate, each followed by a wire fee charged to the
  customer it was sent for;
- the platform balance is its opening float plus every charge, less every refund,
  transfer and wire.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

from undobench_gym.contract.seeding import rng_for, stable_id

FIRST = ["Ada", "Grace", "Linus", "Barbara", "Ken", "Radia", "Edsger", "Frances", "Tim", "Shafi"]
LAST = ["Lovelace", "Hopper", "Torvalds", "Liskov", "Thompson", "Perlman", "Dijkstra", "Allen"]
PLANS = {"basic": 900, "pro": 2900, "team": 7900}
#: The platform's float before any of the history below (minor units).
OPENING = {"usd": 5_000_000, "eur": 2_000_000}
#: Payout recipients, history and tasks alike.
ACCOUNT_POOL = [f"acct_{c}{n}" for c in "abcdefgh" for n in range(10)]
WIRE_FEE = 2500
N_CUSTOMERS = 6
#: The virtual clock's epoch: every fixture row is older.
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def fx_rate(seed: int, source: str, target: str) -> float:
    """A seeded, stable exchange rate (4 decimals)."""
    rng = rng_for("fx", seed, source, target)
    return round(rng.uniform(0.7, 1.3), 4)


def quote_id(seed: int, source: str, target: str, amount: int) -> str:
    """The id get_fx_quote answers for this conversion; create_wire checks it."""
    return stable_id("quote", seed, source, target, amount)


def iban(rng: random.Random) -> str:
    country = rng.choice(["DE", "FR", "NL", "ES"])
    return f"{country}{rng.randint(10, 99)}{''.join(rng.choice('0123456789') for _ in range(18))}"


def _charge(
    cid: str, customer: str, amount: int, description: str, created: datetime
) -> dict[str, Any]:
    return {
        "id": cid,
        "customer_id": customer,
        "amount": amount,
        "currency": "usd",
        "description": description,
        "amount_refunded": 0,
        "status": "succeeded",
        "created": stamp(created),
    }


def build_fixture(seed: int) -> dict[str, list[dict[str, Any]]]:
    rng = rng_for("payments-fixture", seed)
    customers: list[dict[str, Any]] = []
    charges: list[dict[str, Any]] = []
    subs: list[dict[str, Any]] = []
    invoices: list[dict[str, Any]] = []
    refunds: list[dict[str, Any]] = []
    names = rng.sample([(f, s) for f in FIRST for s in LAST], N_CUSTOMERS)
    for i, (first, last) in enumerate(names):
        cid = stable_id("cus", seed, i)
        joined = datetime(2025, 1, 6 + i, 9, 30, tzinfo=UTC)
        customers.append(
            {
                "id": cid,
                "email": f"{first.lower()}.{last.lower()}@example.com",
                "name": f"{first} {last}",
                "created": stamp(joined),
            }
        )
        order = rng.randint(1000, 9999)
        amount = rng.randint(10, 500) * 100
        ordered = datetime(2025, rng.randint(2, 11), rng.randint(1, 28), 14, i, tzinfo=UTC)
        # Customer 0 was charged twice for the same order: the refund workflow refunds one.
        for c in range(2 if i == 0 else 1):
            when = ordered + timedelta(minutes=c)
            charges.append(
                _charge(stable_id("ch", seed, i, c), cid, amount, f"Order #{order}", when)
            )
        if i == 2:
            refund = max(100, amount // 400 * 100)
            charges[-1]["amount_refunded"] = refund
            refunds.append(
                {
                    "id": stable_id("re", seed, i),
                    "charge_id": charges[-1]["id"],
                    "amount": refund,
                    "reason": "requested_by_customer",
                    "created": stamp(ordered + timedelta(days=3)),
                }
            )
        plan = rng.choice(sorted(PLANS))
        sid = stable_id("sub", seed, i)
        period = rng.randint(1, 6)
        subs.append(
            {
                "id": sid,
                "customer_id": cid,
                "plan": plan,
                "amount": PLANS[plan],
                "currency": "usd",
                "status": "active",
                "period": period,
            }
        )
        for p in range(2, period + 1):
            # Period k is December 2025; period p began (k - p) months earlier.
            billed = datetime(2025, 12 - (period - p), 1, 6, i, tzinfo=UTC)
            ch = _charge(
                stable_id("ch", seed, "sub", i, p),
                cid,
                PLANS[plan],
                f"Subscription {sid} period {p}",
                billed,
            )
            charges.append(ch)
            invoices.append(
                {
                    "id": stable_id("in", seed, i, p),
                    "subscription_id": sid,
                    "period": p,
                    "charge_id": ch["id"],
                    "amount": PLANS[plan],
                    "created": ch["created"],
                }
            )
    payouts, transfers = _payouts(seed, rng)
    wires, fees = _wires(seed, rng, customers)
    charges.extend(fees)
    usd = (
        OPENING["usd"]
        + sum(c["amount"] for c in charges)
        - sum(r["amount"] for r in refunds)
        - sum(t["amount"] for t in transfers)
        - sum(w["amount"] for w in wires)
    )
    return {
        "customers": customers,
        "charges": sorted(charges, key=lambda c: (c["created"], c["id"])),
        "refunds": refunds,
        "subscriptions": subs,
        "invoices": invoices,
        "payouts": payouts,
        "transfers": transfers,
        "wires": wires,
        "balance": [
            {"currency": "usd", "available": usd},
            {"currency": "eur", "available": OPENING["eur"]},
        ],
    }


def _payouts(seed: int, rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Two monthly payouts, paid in full: one transfer per recipient."""
    payouts, transfers = [], []
    for n, month in enumerate((10, 11)):
        created = datetime(2025, month, 28, 16, 0, tzinfo=UTC)
        recipients = [
            {"account": a, "amount": rng.randint(10, 300) * 100}
            for a in sorted(rng.sample(ACCOUNT_POOL, rng.randint(2, 3)))
        ]
        pid = stable_id("po", seed, n)
        payouts.append(
            {
                "id": pid,
                "reference": f"payout-2025-{month:02d}",
                "currency": "usd",
                "recipients": recipients,
                "status": "paid",
                "created": stamp(created),
            }
        )
        for j, r in enumerate(recipients):
            transfers.append(
                {
                    "id": stable_id("tr", seed, n, j),
                    "payout_id": pid,
                    "account": r["account"],
                    "amount": r["amount"],
                    "created": stamp(created + timedelta(seconds=j + 1)),
                }
            )
    return payouts, transfers


def _wires(
    seed: int, rng: random.Random, customers: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Two usd->eur wires, each followed by its fee charge to the customer it was for."""
    wires, fees = [], []
    rate = fx_rate(seed, "usd", "eur")
    for n, month in enumerate((9, 11)):
        sent = datetime(2025, month, 15, 11, 0, tzinfo=UTC)
        amount = rng.randint(100, 2000) * 100
        to = iban(rng)
        customer = rng.choice(customers)
        wires.append(
            {
                "id": stable_id("wire", seed, n),
                "quote_id": quote_id(seed, "usd", "eur", amount),
                "beneficiary_iban": to,
                "amount": amount,
                "source_currency": "usd",
                "target_currency": "eur",
                "target_amount": round(amount * rate),
                "status": "sent",
                "created": stamp(sent),
            }
        )
        fees.append(
            _charge(
                stable_id("ch", seed, "wire", n),
                customer["id"],
                WIRE_FEE,
                f"Wire fee {to[-6:]}",
                sent + timedelta(seconds=30),
            )
        )
    return wires, fees
