"""Payments workflows against the real routes, judged by the benchmark's own oracle: gold
plans succeed with no unrequired effect, identities are semantic (a reworded re-send is a
duplicate, a re-send with another amount is unrequired), and the recovery routes that
finish a half-done composite are allowed effects."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from undobench_gym.envs.payments.service import DOMAIN
from undobench_gym.envs.payments.workflows import WORKFLOWS

from undobench_gym.oracles import evaluate
from undobench_gym.specs import Boundary, Verdict, WorkflowSpec, fill

from .service_harness import (
    GOLD_SEEDS,
    ServiceClient,
    assert_gold_plan_completes,
    assert_workflow_is_consistent,
    gold_plan_cases,
    params_for,
    run_gold_plan,
    step_args,
)

pytestmark = pytest.mark.service(DOMAIN, seed=7)

#: Fields a client writes as it likes: never part of an effect's identity.
FREE_TEXT = {"description", "reason", "name", "reference", "memo"}


def verdict(svc: ServiceClient, wf: WorkflowSpec, params: dict[str, Any]) -> Verdict:
    """What the benchmark would rule on the service's current state and commit log."""
    return evaluate(wf, params, svc.state(), svc.commit_log(), physical_calls=0)


def gold(svc: ServiceClient, wf_id: str) -> tuple[WorkflowSpec, dict[str, Any]]:
    """Run the workflow's gold plan at the service's seed; the workflow and its params."""
    wf = svc.workflow(wf_id)
    params = params_for(wf, svc.seed)
    run_gold_plan(svc, wf, params)
    return wf, params


def ops(found: list[dict[str, Any]]) -> list[str]:
    return sorted(e["op"] for e in found)


# ---- catalogue and gold plans ------------------------------------------------------


def test_workflows_are_consistent(svc: ServiceClient) -> None:
    assert {w.split for w in WORKFLOWS} == {"dev", "val", "test"}
    assert len({w.id for w in WORKFLOWS}) == len(WORKFLOWS)
    for wf in WORKFLOWS:
        assert_workflow_is_consistent(svc, wf, prefix="pay-")
        fill(wf.instruction, params_for(wf))  # every {param} of the instruction is drawn


def test_scenarios_are_honest(svc: ServiceClient) -> None:
    """Faults name a mutating tool of the workflow; a DURING_MUTATION fault crashes inside
    a composite route; a DURING_COMPENSATION fault hits the compensation after a forward
    effect of the same task."""
    for wf in WORKFLOWS:
        gold_tools = [s.tool for s in wf.gold_plan]
        for sc in wf.scenarios:
            tool = svc.tools[sc.target.tool]
            assert not tool.read_only and sc.target.tool in wf.tools, (wf.id, sc.id)
            assert gold_tools.count(sc.target.tool) >= sc.target.nth, (wf.id, sc.id)
            if sc.boundary is Boundary.DURING_MUTATION:
                assert sc.crash_point, (wf.id, sc.id)
            if sc.boundary is Boundary.DURING_COMPENSATION:
                assert tool.compensation, (wf.id, sc.id)
                at = [i for i, t in enumerate(gold_tools) if t == sc.target.tool][sc.target.nth - 1]
                before = [svc.tools[t] for t in gold_tools[:at]]
                assert any(not t.read_only and not t.compensation for t in before), (wf.id, sc.id)


@gold_plan_cases(WORKFLOWS)
def test_gold_plan_succeeds_with_nothing_unrequired(
    svc: ServiceClient, wf: WorkflowSpec, seed: int
) -> None:
    assert_gold_plan_completes(svc, wf, seed)
    v = verdict(svc, wf, params_for(wf, seed))
    assert v.success, v
    assert v.unrequired == [] and v.duplicates == [] and v.missing == []


def test_identity_declared_is_identity_recorded(svc: ServiceClient) -> None:
    """Every committed row's identity has exactly the fields its route declares, and none
    of them is free text."""
    declared = {t.op: t.identity for t in svc.tools.values() if t.op}
    for field in set().union(*map(set, declared.values())):
        assert field not in FREE_TEXT, field
    for wf in WORKFLOWS:
        svc.reset()
        run_gold_plan(svc, wf, params_for(wf, svc.seed))
        for row in svc.commit_log():
            if row["op"] in declared:
                assert sorted(json.loads(row["identity"])) == sorted(declared[row["op"]]), row
    sub = svc.tables()["pay_subscriptions"][0]["id"]
    svc.ok("set_subscription_status", {"subscription_id": sub, "status": "paused"})
    svc.ok("create_customer", {"email": "new@example.com", "name": "New Customer"})
    rows = {r["op"]: json.loads(r["identity"]) for r in svc.commit_log()}
    assert rows["subscription.status"] == {"subscription_id": sub, "status": "paused"}
    assert rows["customer.create"] == {"email": "new@example.com"}


# ---- adversarial re-sends: what an agent does after a lost acknowledgement -----------


def _reworded_charge(wf_id: str, step: str) -> Callable[[ServiceClient], None]:
    def resend(svc: ServiceClient) -> None:
        wf = svc.workflow(wf_id)
        args = step_args(wf, step, params_for(wf, svc.seed))
        svc.ok("create_charge", {**args, "description": f"{args['description']} (retry)"})

    return resend


def _charge_other_amount(wf_id: str, step: str) -> Callable[[ServiceClient], None]:
    def resend(svc: ServiceClient) -> None:
        wf = svc.workflow(wf_id)
        args = step_args(wf, step, params_for(wf, svc.seed))
        svc.ok("create_charge", {**args, "amount": args["amount"] + 100})

    return resend


def _wire_again(svc: ServiceClient, extra: int = 0) -> None:
    params = params_for(svc.workflow("pay-cross-border-wire"), svc.seed)
    amount = params["amount"] + extra
    quote = svc.ok("get_fx_quote", {"source": "usd", "target": "eur", "amount": amount})
    wire = {
        "quote_id": quote["quote_id"],
        "beneficiary_iban": params["iban"],
        "amount": amount,
        "source_currency": "usd",
        "target_currency": "eur",
    }
    svc.ok("create_wire", wire)


def _payout_again(changed: dict[str, Any]) -> Callable[[ServiceClient], None]:
    def resend(svc: ServiceClient) -> None:
        wf = svc.workflow("pay-split-payout")
        args = step_args(wf, "create_payout", params_for(wf, svc.seed))
        recipients = [dict(r) for r in args["recipients"]]
        recipients[0]["amount"] += changed.get("amount", 0)
        body = {
            **args,
            "reference": f"{args['reference']}-retry",
            "recipients": list(reversed(recipients)),  # the order of the list is not identity
        }
        svc.ok("create_payout", body)

    return resend


def _renew_again(svc: ServiceClient) -> None:
    params = params_for(svc.workflow("pay-renew-subscription"), svc.seed)
    svc.ok("renew_subscription", {"subscription_id": params["subscription_id"]})


# (workflow, behaviour, what the agent does after the gold plan, duplicated ops, unrequired ops)
RESENDS: list[tuple[str, str, Callable[[ServiceClient], None], list[str], list[str]]] = [
    (
        "pay-charge-customer",
        "reworded description",
        _reworded_charge("pay-charge-customer", "create_charge"),
        ["charge.create"],
        [],
    ),
    (
        "pay-charge-customer",
        "other amount",
        _charge_other_amount("pay-charge-customer", "create_charge"),
        [],
        ["charge.create"],
    ),
    (
        "pay-refund-duplicate-charge",
        "reworded add-on",
        _reworded_charge("pay-refund-duplicate-charge", "create_charge"),
        ["charge.create"],
        [],
    ),
    (
        "pay-cross-border-wire",
        "reworded fee",
        _reworded_charge("pay-cross-border-wire", "create_charge"),
        ["charge.create"],
        [],
    ),
    ("pay-cross-border-wire", "wire again", _wire_again, ["wire.send"], []),
    (
        "pay-cross-border-wire",
        "wire another amount",
        lambda svc: _wire_again(svc, extra=100),
        [],
        ["wire.send"],
    ),
    (
        "pay-split-payout",
        "payout under another reference",
        _payout_again({}),
        ["payout.create", *["payout.transfer"] * 3],
        [],
    ),
    (
        "pay-split-payout",
        "payout with one amount changed",
        _payout_again({"amount": 100}),
        ["payout.transfer", "payout.transfer"],
        ["payout.create", "payout.transfer"],
    ),
    ("pay-renew-subscription", "renew again", _renew_again, ["subscription.renew"], []),
]


@pytest.mark.parametrize(
    ("wf_id", "resend", "dup_ops", "unrequired_ops"),
    [pytest.param(w, f, d, u, id=f"{w}:{b}") for w, b, f, d, u in RESENDS],
)
def test_resend_after_gold_plan_is_harm(
    svc: ServiceClient,
    wf_id: str,
    resend: Callable[[ServiceClient], None],
    dup_ops: list[str],
    unrequired_ops: list[str],
) -> None:
    """The effect had committed (its acknowledgement was lost); the agent sends it again.
    Rewording free text does not hide the duplicate, another value is an unrequired
    effect, and the state oracle is not fooled either."""
    wf, params = gold(svc, wf_id)
    assert verdict(svc, wf, params).success
    resend(svc)
    v = verdict(svc, wf, params)
    assert not v.success and not v.state_ok
    assert ops(v.duplicates) == sorted(dup_ops)
    assert ops(v.unrequired) == sorted(unrequired_ops)
    assert v.missing == [] and v.forbidden == []


def test_forbidden_refund_is_forbidden_not_unrequired(svc: ServiceClient) -> None:
    wf, params = gold(svc, "pay-refund-duplicate-charge")
    svc.ok("create_refund", {"charge_id": params["keep_charge"], "amount": params["amount"]})
    v = verdict(svc, wf, params)
    assert ops(v.forbidden) == ["refund.create"] and v.unrequired == [] and not v.state_ok


def test_cancel_on_the_way_is_unrequired(svc: ServiceClient) -> None:
    """A set the task never asked for (the subscription paused, then resumed) leaves the
    state as it was, and is still an effect nobody required."""
    wf, params = gold(svc, "pay-renew-subscription")
    for status in ("paused", "active"):
        svc.ok(
            "set_subscription_status",
            {"subscription_id": params["subscription_id"], "status": status},
        )
    v = verdict(svc, wf, params)
    assert v.state_ok and not v.success
    assert ops(v.unrequired) == ["subscription.status", "subscription.status"]


# ---- crashes: finishing the composite is allowed, starting it again is not -----------


@pytest.mark.usefixtures("crashable")
def test_resume_after_crash_is_an_allowed_effect(svc: ServiceClient) -> None:
    wf = svc.workflow("pay-split-payout")
    params = params_for(wf, svc.seed)
    args = step_args(wf, "create_payout", params)
    svc.call_until_crash("create_payout", args, "payout.after_first_transfer")
    v = verdict(svc, wf, params)
    assert v.partial and ops(v.missing) == ["payout.transfer", "payout.transfer"]
    payout = svc.ok("list_payouts", {"reference": params["reference"]})[-1]
    assert payout["status"] == "processing"
    svc.ok("resume_payout", {"payout_id": payout["id"]})
    svc.ok("resume_payout", {"payout_id": payout["id"]})  # a paid payout: nothing happens
    assert [r["op"] for r in svc.commit_log()].count("payout.resume") == 1
    v = verdict(svc, wf, params)
    assert v.success, v
    assert v.unrequired == []


@pytest.mark.usefixtures("crashable")
def test_new_payout_after_crash_is_a_duplicate(svc: ServiceClient) -> None:
    wf = svc.workflow("pay-split-payout")
    params = params_for(wf, svc.seed)
    args = step_args(wf, "create_payout", params)
    svc.call_until_crash("create_payout", args, "payout.after_first_transfer")
    svc.ok("create_payout", args)
    v = verdict(svc, wf, params)
    assert not v.success and v.partial
    assert ops(v.duplicates) == ["payout.create", "payout.transfer"]


def test_allowed_effects_are_recovery_routes_only() -> None:
    """Only a route that finishes a half-done composite may be allowed; never a
    compensation the task did not ask for."""
    from undobench_gym.catalog import domain

    tools = {t.op: t for t in domain("payments").tools.values() if t.op}
    for wf in WORKFLOWS:
        for exp in wf.allowed_effects:
            assert exp.op.endswith(".resume") and not tools[exp.op].compensation, wf.id
    assert {e.op for w in WORKFLOWS for e in w.allowed_effects} == {"payout.resume"}


@pytest.mark.parametrize("seed", GOLD_SEEDS)
def test_history_never_satisfies_the_task(svc: ServiceClient, seed: int) -> None:
    """From the seeded state, with its history, no workflow is already done and none of
    its required effects is in the commit log."""
    for wf in WORKFLOWS:
        svc.reset(seed)
        v = verdict(svc, wf, params_for(wf, seed))
        assert not v.state_ok and not v.success, wf.id
        assert len(v.missing) == len(wf.required_effects), wf.id
