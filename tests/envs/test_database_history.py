"""The database fixture carries a history that agrees with its current state: every
balance is the sum of its audited adjustments and dividend credits, tiers and orders have
the audit rows that made them, paid orders their payment, earlier dividends their
credits, earlier migrations their catalog rows and tables. All of it predates the virtual
clock, so an episode's effects are told apart from old rows."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from undobench_gym.services.domains.database.fixture import build_fixture
from undobench_gym.services.domains.database.service import DOMAIN
from undobench_gym.services.domains.database.workflows import WORKFLOWS

from .service_harness import ServiceClient, params_for, run_gold_plan
from .workflow_harness import CLOCK, assert_service_seeds_fixture, where

pytestmark = pytest.mark.service(DOMAIN)

SEEDS = [0, 1, 2, 3, 7, 11, 42, 12345, 2**40 + 3]


def audit(fx: dict[str, Any], action: str, **match: Any) -> list[dict[str, Any]]:
    return where(fx["audit"], action=action, **match)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_audit_trail_is_in_time_order_and_predates_the_clock(seed: int) -> None:
    fx = build_fixture(seed)
    trail = fx["audit"]
    assert [a["seq"] for a in trail] == list(range(1, len(trail) + 1))
    assert [a["at"] for a in trail] == sorted(a["at"] for a in trail)
    assert trail[-1]["at"] < CLOCK
    for table, column in [
        ("accounts", "created"),
        ("orders", "created"),
        ("dividends", "created"),
        ("dividend_credits", "created"),
        ("migrations", "applied"),
    ]:
        assert all(r[column] < CLOCK for r in fx[table]), table


@pytest.mark.parametrize("seed", SEEDS)
def test_balances_are_their_audited_history(seed: int) -> None:
    """Each account opened with a deposit; its balance is the sum of its adjustments and
    dividend credits, and each audit row's balance_after is the running balance, never
    below zero."""
    fx = build_fixture(seed)
    for acct in fx["accounts"]:
        moves = [
            a
            for a in fx["audit"]
            if a["account_id"] == acct["id"]
            and a["action"] in ("account.adjust", "dividend.credit")
        ]
        assert moves[0]["ref"] == "opening deposit" and moves[0]["at"] == acct["created"]
        running = 0
        for a in moves:
            running += a["amount"]
            assert a["detail"]["balance_after"] == running >= 0, a
        assert acct["balance"] == running


@pytest.mark.parametrize("seed", SEEDS)
def test_tiers_orders_dividends_and_migrations_have_their_history(seed: int) -> None:
    fx = build_fixture(seed)
    accounts = {a["id"]: a for a in fx["accounts"]}
    for acct in fx["accounts"]:
        upgrades = audit(fx, "account.tier", account_id=acct["id"])
        if acct["tier"] == "bronze":
            assert upgrades == []
        else:
            assert [u["detail"] for u in upgrades] == [{"from": "bronze", "to": acct["tier"]}]
    for order in fx["orders"]:
        assert order["account_id"] in accounts
        assert order["created"] > accounts[order["account_id"]]["created"]
        created = audit(fx, "order.create", ref=order["order_number"])
        assert [(a["account_id"], a["amount"], a["at"]) for a in created] == [
            (order["account_id"], order["total"], order["created"])
        ]
        payments = audit(fx, "account.adjust", ref=f"payment {order['order_number']}")
        expected = [(order["account_id"], -order["total"])] if order["status"] == "paid" else []
        assert [(a["account_id"], a["amount"]) for a in payments] == expected
    holdings = fx["shareholdings"]
    for d in fx["dividends"]:
        assert d["status"] == "paid"
        holders = sorted(
            (h for h in holdings if h["share_class"] == d["share_class"]),
            key=lambda h: str(h["account_id"]),
        )
        assert d["holders"] == [
            {
                "account_id": h["account_id"],
                "shares": h["shares"],
                "amount": h["shares"] * d["amount_per_share"],
            }
            for h in holders
        ]
        credits = [c for c in fx["dividend_credits"] if c["dividend_id"] == d["id"]]
        assert sorted((c["account_id"], c["amount"]) for c in credits) == sorted(
            (h["account_id"], h["amount"]) for h in d["holders"]
        )
        (declared,) = audit(fx, "dividend.declare", ref=d["reference"])
        assert declared["amount"] == sum(h["amount"] for h in d["holders"])
        assert len(audit(fx, "dividend.credit", ref=d["reference"])) == len(credits)
    assert len({d["reference"] for d in fx["dividends"]}) == len(fx["dividends"]) == 2
    for m in fx["migrations"]:
        (applied,) = audit(fx, "migration.apply", ref=m["name"])
        assert applied["detail"] == {"columns": m["columns"]} and applied["at"] == m["applied"]
    assert len({m["name"] for m in fx["migrations"]}) == len(fx["migrations"]) == 2


@pytest.mark.parametrize("seed", SEEDS)
def test_task_parameters_stay_apart_from_history(seed: int) -> None:
    """A read-back by the effect's semantic fields finds the new effect only."""
    fx = build_fixture(seed)
    params = {w.id: w.draw_params(seed, fx) for w in WORKFLOWS}
    moved = Counter((a["account_id"], a["amount"]) for a in audit(fx, "account.adjust"))
    t = params["db-transfer-funds"]
    for acct in (t["from_id"], t["to_id"]):
        assert moved[(acct, t["amount"])] == moved[(acct, -t["amount"])] == 0
    u = params["db-upgrade-tier"]
    assert moved[(u["account_id"], u["bonus"])] == 0
    d = params["db-pay-dividend"]
    assert d["reference"] not in {x["reference"] for x in fx["dividends"]}
    earlier = {(c["account_id"], c["amount"]) for c in fx["dividend_credits"]}
    assert all((d[f"account{i}"], d[f"credit{i}"]) not in earlier for i in range(3))
    assert params["db-apply-migration"]["name"] not in {m["name"] for m in fx["migrations"]}
    assert params["db-create-order"]["order_number"] not in {
        o["order_number"] for o in fx["orders"]
    }


def test_history_has_the_shapes_the_workflows_read() -> None:
    """Across seeds, history reaches the cases that make read-backs hard: a dividend
    holder credited before, a transfer account adjusted before, paid and open orders."""
    seen: Counter[str] = Counter()
    for seed in range(30):
        fx = build_fixture(seed)
        params = {w.id: w.draw_params(seed, fx) for w in WORKFLOWS}
        d = params["db-pay-dividend"]
        seen["holder credited before"] += any(d[f"credits{i}"] > 1 for i in range(3))
        seen["adjusted before"] += params["db-transfer-funds"]["from_adjustments"] > 2
        statuses = {o["status"] for o in fx["orders"]}
        seen["paid and open orders"] += statuses == {"paid", "open"}
    assert min(seen.values()) >= 5 and len(seen) == 3, seen


@pytest.mark.parametrize("seed", [3, 12345])
def test_the_service_seeds_exactly_the_fixture(svc: ServiceClient, seed: int) -> None:
    fx = build_fixture(seed)
    tables = [
        ("accounts", "db_accounts"),
        ("shareholdings", "db_shareholdings"),
        ("orders", "db_orders"),
        ("dividends", "db_dividends"),
        ("dividend_credits", "db_dividend_credits"),
        ("migrations", "db_migrations"),
        ("audit", "db_audit"),
    ]
    state = assert_service_seeds_fixture(svc, seed, fx, tables)
    ext = {f"ext_{m['name']}": m["columns"] for m in fx["migrations"]}
    assert state["extra"]["ext_tables"] == ext


def test_new_audit_rows_follow_the_history(svc: ServiceClient) -> None:
    """The gold plan's audit rows come after the history, on the episode's clock."""
    wf = svc.workflow("db-transfer-funds")
    history = len(build_fixture(svc.seed)["audit"])
    run_gold_plan(svc, wf, params_for(wf, svc.seed))
    trail = svc.ok("list_audit", {"limit": 1000})
    assert [a["seq"] for a in trail] == list(range(1, history + 3))
    assert all(a["at"] >= CLOCK for a in trail[history:])
    assert all(a["at"] < CLOCK for a in trail[:history])
