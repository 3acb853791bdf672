"""Payments workflows against the real routes, judged by the benchmark's own oracle: the
shared `WorkflowContract` (gold plans succeed with no unrequired effect, identities are
semantic: a reworded re-send is a duplicate, a re-send with another amount is unrequired),
and here what is particular to payments: a forbidden refund, a detour through another
subscription status, and the recovery route that finishes a half-done payout."""

from __future__ import annotations

from typing import Any

import pytest

from undobench_gym.contract.specs import fill
from undobench_gym.services.domains.payments.service import DOMAIN
from undobench_gym.services.domains.payments.workflows import WORKFLOWS

from .service_harness import (
    ServiceClient,
    assert_workflow_is_consistent,
    params_for,
    step_args,
)
from .workflow_harness import (
    Episode,
    Resend,
    Row,
    Send,
    WorkflowContract,
    assert_calls_record_their_arguments,
    gold,
    gold_plan_logs,
    ops,
    record,
    resend_step,
    reworded,
    verdict,
)

pytestmark = pytest.mark.service(DOMAIN, seed=7)

REWORDED = {"description": "{description} (retry)"}


def _wire_again(extra: int = 0) -> Send:
    """A new quote and a new wire to the same beneficiary (`extra` more in amount)."""

    def send(ep: Episode) -> None:
        amount = ep.params["amount"] + extra
        quote = ep.svc.ok("get_fx_quote", {"source": "usd", "target": "eur", "amount": amount})
        wire = {
            "quote_id": quote["quote_id"],
            "beneficiary_iban": ep.params["iban"],
            "amount": amount,
            "source_currency": "usd",
            "target_currency": "eur",
        }
        ep.svc.ok("create_wire", wire)

    return send


def _payout_again(more: int) -> Send:
    """The payout again under another reference, its recipients listed in another order
    (the order is not identity), the first one `more` richer."""

    def change(args: dict[str, Any]) -> dict[str, Any]:
        recipients = [dict(r) for r in args["recipients"]]
        recipients[0]["amount"] += more
        return {"reference": f"{args['reference']}-retry", "recipients": recipients[::-1]}

    return resend_step("create_payout", change)


class TestWorkflowContract(WorkflowContract):
    workflows = WORKFLOWS
    free_text = frozenset({"description", "reason", "name", "reference", "memo"})
    sub_effects = {"payout.transfer": frozenset({"account", "amount", "currency"})}
    resends = [
        *reworded(
            "payments",
            [
                ("pay-charge-customer", "create_charge", REWORDED),
                ("pay-refund-duplicate-charge", "create_charge", REWORDED),
                ("pay-cross-border-wire", "create_charge", REWORDED),
                ("pay-renew-subscription", "renew_subscription", {}),
            ],
        ),
        Resend(
            "pay-charge-customer",
            "other amount",
            resend_step("create_charge", lambda a: {"amount": a["amount"] + 100}),
            unrequired=["charge.create"],
        ),
        Resend("pay-cross-border-wire", "wire again", _wire_again(), duplicates=["wire.send"]),
        Resend(
            "pay-cross-border-wire",
            "wire another amount",
            _wire_again(extra=100),
            unrequired=["wire.send"],
        ),
        Resend(
            "pay-split-payout",
            "payout under another reference",
            _payout_again(0),
            duplicates=["payout.create", *["payout.transfer"] * 3],
        ),
        Resend(
            "pay-split-payout",
            "payout with one amount changed",
            _payout_again(100),
            duplicates=["payout.transfer", "payout.transfer"],
            unrequired=["payout.create", "payout.transfer"],
        ),
    ]

    def exercise(self, svc: ServiceClient) -> list[Row]:
        """Every gold plan, a status set and a new customer, and a payout a crash stopped,
        finished by resume_payout."""
        log = gold_plan_logs(svc, WORKFLOWS)
        sub = svc.tables()["pay_subscriptions"][0]["id"]
        calls = [
            record(svc, "set_subscription_status", {"subscription_id": sub, "status": "paused"}),
            record(svc, "create_customer", {"email": "new@example.com", "name": "New Customer"}),
        ]
        assert assert_calls_record_their_arguments(svc, calls) == []
        wf = svc.workflow("pay-split-payout")
        params = params_for(wf, svc.seed)
        args = step_args(wf, "create_payout", params)
        svc.call_until_crash("create_payout", args, "payout.after_first_transfer")
        payout = svc.ok("list_payouts", {"reference": params["reference"]})[-1]
        svc.ok("resume_payout", {"payout_id": payout["id"]})
        return log + svc.commit_log()


def test_workflows_are_consistent(svc: ServiceClient) -> None:
    assert {w.split for w in WORKFLOWS} == {"dev", "val", "test", "stress"}
    assert len({w.id for w in WORKFLOWS}) == len(WORKFLOWS)
    for wf in WORKFLOWS:
        assert_workflow_is_consistent(svc, wf, prefix="pay-")
        fill(wf.instruction, params_for(wf))  # every {param} of the instruction is drawn


def test_forbidden_refund_is_forbidden_not_unrequired(svc: ServiceClient) -> None:
    ep = gold(svc, "pay-refund-duplicate-charge")
    svc.ok("create_refund", {"charge_id": ep.params["keep_charge"], "amount": ep.params["amount"]})
    v = ep.verdict()
    assert ops(v.forbidden) == ["refund.create"] and v.unrequired == [] and not v.state_ok


def test_cancel_on_the_way_is_unrequired(svc: ServiceClient) -> None:
    """A set the task never asked for (the subscription paused, then resumed) leaves the
    state as it was, and is still an effect nobody required."""
    ep = gold(svc, "pay-renew-subscription")
    for status in ("paused", "active"):
        svc.ok(
            "set_subscription_status",
            {"subscription_id": ep.params["subscription_id"], "status": status},
        )
    v = ep.verdict()
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
    assert svc.ops().count("payout.resume") == 1
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
    from undobench_gym.core.catalog import domain

    tools = {t.op: t for t in domain("payments").tools.values() if t.op}
    for wf in WORKFLOWS:
        for exp in wf.allowed_effects:
            assert exp.op.endswith(".resume") and not tools[exp.op].compensation, wf.id
    assert {e.op for w in WORKFLOWS for e in w.allowed_effects} == {"payout.resume"}
