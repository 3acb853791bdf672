"""The payments fixture carries a history that agrees with its current state: invoices
and the charges they billed for every period a subscription has been through, refunds
that add up to what charges say was refunded, payouts with their transfers, wires with
their fees, and a balance that is the sum of all of it. All of it predates the virtual
clock, so an episode's effects are told apart from old rows."""

from __future__ import annotations

from collections import Counter

import pytest

from undobench_gym.services.domains.payments.fixture import (
    OPENING,
    PLANS,
    WIRE_FEE,
    build_fixture,
    fx_rate,
    quote_id,
)
from undobench_gym.services.domains.payments.service import DOMAIN
from undobench_gym.services.domains.payments.workflows import WORKFLOWS

from .service_harness import ServiceClient, params_for
from .workflow_harness import CLOCK, assert_service_seeds_fixture, by_id

pytestmark = pytest.mark.service(DOMAIN, seed=7)

SEEDS = [0, 1, 2, 3, 7, 11, 42, 12345, 2**40 + 3]


@pytest.mark.parametrize("seed", SEEDS)
def test_everything_predates_the_clock_and_keys_resolve(seed: int) -> None:
    fx = build_fixture(seed)
    customers, charges = by_id(fx["customers"]), by_id(fx["charges"])
    for table in ("customers", "charges", "refunds", "invoices", "payouts", "transfers", "wires"):
        ids = [r["id"] for r in fx[table]]
        assert len(ids) == len(set(ids)), table
        assert all(r["created"] < CLOCK for r in fx[table]), table
    for ch in fx["charges"]:
        assert ch["customer_id"] in customers
        assert ch["created"] > customers[ch["customer_id"]]["created"]
    for sub in fx["subscriptions"]:
        assert sub["customer_id"] in customers
    for r in fx["refunds"]:
        assert r["charge_id"] in charges and r["created"] > charges[r["charge_id"]]["created"]
    payouts = by_id(fx["payouts"])
    for t in fx["transfers"]:
        assert t["payout_id"] in payouts and t["created"] > payouts[t["payout_id"]]["created"]


@pytest.mark.parametrize("seed", SEEDS)
def test_a_subscription_in_period_k_has_its_k_minus_1_invoices(seed: int) -> None:
    """Period 1 is the trial; each later period was billed once, by an invoice and the
    charge it names, for the plan's price, a month apart, the last in December 2025."""
    fx = build_fixture(seed)
    charges = by_id(fx["charges"])
    for sub in fx["subscriptions"]:
        invoices = sorted(
            (i for i in fx["invoices"] if i["subscription_id"] == sub["id"]),
            key=lambda i: i["period"],
        )
        assert [i["period"] for i in invoices] == list(range(2, sub["period"] + 1))
        assert sub["amount"] == PLANS[sub["plan"]]
        for inv in invoices:
            ch = charges[inv["charge_id"]]
            assert ch["customer_id"] == sub["customer_id"]
            assert ch["amount"] == inv["amount"] == sub["amount"]
            assert ch["created"] == inv["created"]
            assert ch["description"] == f"Subscription {sub['id']} period {inv['period']}"
        months = [int(i["created"][5:7]) for i in invoices]
        assert months == list(range(13 - len(invoices), 13))
    billed = [i["charge_id"] for i in fx["invoices"]]
    assert len(billed) == len(set(billed))  # one invoice per charge


@pytest.mark.parametrize("seed", SEEDS)
def test_charges_refunds_payouts_and_wires_add_up(seed: int) -> None:
    fx = build_fixture(seed)
    refunded = Counter[str]()
    for r in fx["refunds"]:
        refunded[r["charge_id"]] += r["amount"]
    for ch in fx["charges"]:
        assert ch["amount_refunded"] == refunded[ch["id"]] <= ch["amount"]
        assert ch["status"] == (
            "refunded" if ch["amount_refunded"] == ch["amount"] else "succeeded"
        )
    for p in fx["payouts"]:
        paid = [
            {"account": t["account"], "amount": t["amount"]}
            for t in fx["transfers"]
            if t["payout_id"] == p["id"]
        ]
        assert p["status"] == "paid" and sorted(paid, key=str) == sorted(p["recipients"], key=str)
    rate = fx_rate(seed, "usd", "eur")
    fees = [c for c in fx["charges"] if c["description"].startswith("Wire fee ")]
    assert len(fees) == len(fx["wires"])
    for w, fee in zip(fx["wires"], fees, strict=True):
        assert w["quote_id"] == quote_id(seed, "usd", "eur", w["amount"])
        assert w["target_amount"] == round(w["amount"] * rate)
        assert fee["description"] == f"Wire fee {w['beneficiary_iban'][-6:]}"
        assert fee["amount"] == WIRE_FEE and fee["created"] > w["created"]
    # Customer 0's order was charged twice, a minute apart; every other order once.
    orders = Counter((c["customer_id"], c["description"]) for c in fx["charges"])
    doubled = [k for k, n in orders.items() if k[1].startswith("Order #") and n > 1]
    assert doubled == [(fx["customers"][0]["id"], doubled[0][1])]
    balance = {b["currency"]: b["available"] for b in fx["balance"]}
    assert balance["usd"] == (
        OPENING["usd"]
        + sum(c["amount"] for c in fx["charges"])
        - sum(r["amount"] for r in fx["refunds"])
        - sum(t["amount"] for t in fx["transfers"])
        - sum(w["amount"] for w in fx["wires"])
    )
    assert balance["eur"] == OPENING["eur"]


@pytest.mark.parametrize("seed", SEEDS)
def test_task_parameters_stay_apart_from_history(seed: int) -> None:
    """A read-back by the effect's semantic fields finds the new effect only: the task's
    amounts are not those of earlier rows of the same customer, beneficiary or period."""
    fx = build_fixture(seed)
    params = {w.id: w.draw_params(seed, fx) for w in WORKFLOWS}
    charge = params["pay-charge-customer"]
    mine = [c for c in fx["charges"] if c["customer_id"] == charge["customer_id"]]
    assert charge["amount"] not in {c["amount"] for c in mine}
    renew = params["pay-renew-subscription"]
    assert renew["next_period"] not in {
        i["period"] for i in fx["invoices"] if i["subscription_id"] == renew["subscription_id"]
    }
    wire = params["pay-cross-border-wire"]
    assert (wire["iban"], wire["amount"]) not in {
        (w["beneficiary_iban"], w["amount"]) for w in fx["wires"]
    }
    payout = params["pay-split-payout"]
    assert payout["reference"] not in {p["reference"] for p in fx["payouts"]}
    refund = params["pay-refund-duplicate-charge"]
    keep, dup = (
        by_id(fx["charges"])[refund["keep_charge"]],
        by_id(fx["charges"])[refund["dup_charge"]],
    )
    assert keep["created"] < dup["created"] and keep["amount"] == dup["amount"]
    assert keep["description"] == dup["description"] and keep["amount_refunded"] == 0


def test_history_has_the_shapes_the_workflows_read() -> None:
    """Across seeds, history reaches the cases that make read-backs hard: subscriptions
    with several invoices, a recurring wire beneficiary, a recipient paid before, a
    customer already charged a wire fee."""
    seen: Counter[str] = Counter()
    for seed in range(40):
        fx = build_fixture(seed)
        params = {w.id: w.draw_params(seed, fx) for w in WORKFLOWS}
        seen["several invoices"] += params["pay-renew-subscription"]["invoices_after"] > 2
        seen["recurring beneficiary"] += params["pay-cross-border-wire"]["wires_to_iban"] > 1
        seen["earlier fee"] += params["pay-cross-border-wire"]["fees_of_customer"] > 1
        payout = params["pay-split-payout"]
        seen["recipient paid before"] += any(payout[f"transfers{i}"] > 1 for i in range(3))
    assert all(seen[k] >= 2 for k in ("several invoices", "recurring beneficiary", "earlier fee"))
    assert seen["recipient paid before"] >= 1, seen


@pytest.mark.parametrize("seed", [3, 12345])
def test_the_service_seeds_exactly_the_fixture(svc: ServiceClient, seed: int) -> None:
    tables = [
        ("customers", "pay_customers"),
        ("charges", "pay_charges"),
        ("refunds", "pay_refunds"),
        ("subscriptions", "pay_subscriptions"),
        ("invoices", "pay_invoices"),
        ("payouts", "pay_payouts"),
        ("transfers", "pay_transfers"),
        ("wires", "pay_wires"),
        ("balance", "pay_balance"),
    ]
    assert_service_seeds_fixture(svc, seed, build_fixture(seed), tables)


def test_a_renewal_reads_back_apart_from_old_invoices(svc: ServiceClient) -> None:
    """The new invoice is for the next period and carries the episode's clock; the old
    ones stay as they were."""
    wf = svc.workflow("pay-renew-subscription")
    params = params_for(wf, svc.seed)
    before = svc.ok("list_invoices", {"subscription_id": params["subscription_id"]})
    body = svc.ok("renew_subscription", {"subscription_id": params["subscription_id"]})
    after = svc.ok("list_invoices", {"subscription_id": params["subscription_id"]})
    assert after[: len(before)] == before and after[-1] == body["invoice"]
    assert body["invoice"]["period"] == params["next_period"]
    assert body["invoice"]["created"] >= CLOCK > max((i["created"] for i in before), default="")
    charge = svc.ok("get_charge", {"charge_id": body["invoice"]["charge_id"]})
    assert charge["created"] == body["invoice"]["created"]
