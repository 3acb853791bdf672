"""Database workflows against the real routes, judged by the benchmark's own oracle: the
shared `WorkflowContract` (gold plans succeed with no unrequired effect, identities are
semantic: a re-sent adjustment with a reworded memo is a duplicate, one with another
amount is unrequired), and here what is particular to the database: adjustments that
cancel out, a transfer done backwards, and the recovery routes that finish a half-done
dividend or migration."""

from __future__ import annotations

from typing import Any

import pytest

from undobench_gym.contract.specs import Boundary
from undobench_gym.services.domains.database.service import DOMAIN
from undobench_gym.services.domains.database.workflows import WORKFLOWS

from .service_harness import ServiceClient, params_for, run_gold_plan, step_args
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

pytestmark = pytest.mark.service(DOMAIN)

REWORDED = {"memo": "{memo} (retry)"}


def _adjusted_by(delta: int) -> Send:
    """The adjustment of gold step 2 again, its memo reworded and `delta` more."""
    return resend_step(2, lambda a: {"memo": a["memo"] + " (retry)", "delta": a["delta"] + delta})


def _order_again(changed: dict[str, Any], status: int) -> Send:
    def send(ep: Episode) -> None:
        body = {k: ep.params[k] for k in ("order_number", "account_id", "total")}
        assert ep.svc.call("create_order", {**body, **changed}).status_code == status

    return send


class TestWorkflowContract(WorkflowContract):
    workflows = WORKFLOWS
    free_text = frozenset({"memo", "description", "note", "reason"})
    sub_effects = {"dividend.credit": frozenset({"account_id", "amount", "share_class"})}
    resends = [
        *reworded(
            "database",
            [
                ("db-transfer-funds", 2, REWORDED),  # the credit
                ("db-transfer-funds", 1, {}),  # the debit, memo and all
                ("db-upgrade-tier", 2, REWORDED),  # the bonus
            ],
        ),
        Resend(
            "db-transfer-funds",
            "credit of another amount",
            _adjusted_by(100),
            unrequired=["account.adjust"],
        ),
        Resend(
            "db-upgrade-tier",
            "bonus of another amount",
            _adjusted_by(1),
            unrequired=["account.adjust"],
        ),
        Resend(
            "db-upgrade-tier",
            "tier set to another value",
            resend_step("set_account_tier", {"tier": "platinum"}),
            unrequired=["account.tier"],
        ),
        Resend(
            "db-pay-dividend",
            "dividend under another reference",
            resend_step("pay_dividend", {"reference": "{reference}-R"}),
            duplicates=["dividend.credit"] * 3,
            unrequired=["dividend.declare"],
        ),
        Resend(
            "db-create-order",
            "order under another number",
            _order_again({"order_number": "ORD-1"}, 201),
            unrequired=["order.create"],
        ),
        Resend(
            "db-apply-migration",
            "migration under another name",
            resend_step("apply_migration", {"name": "{name}_b"}),
            unrequired=["migration.apply"],
        ),
        # Repeats the service or the effect class absorbs: the verdict stays a success.
        Resend(
            "db-upgrade-tier",
            "tier set to gold again",
            resend_step("set_account_tier"),
            state_ok=True,
        ),
        Resend(
            "db-create-order",
            "order again, other total",
            _order_again({"total": 1}, 409),
            state_ok=True,
        ),
    ]

    def exercise(self, svc: ServiceClient) -> list[Row]:
        """Every gold plan, a dividend and a migration a crash stopped, finished by their
        recovery routes, and an order cancelled."""
        log = gold_plan_logs(svc, WORKFLOWS)
        dividend = {"share_class": "common", "amount_per_share": 7, "reference": "DIV-X"}
        migration = {"name": "gift_cards_v2", "columns": [{"name": "code", "type": "text"}]}
        calls = [record(svc, "pay_dividend", dividend, crash="dividend.after_first_credit")]
        found = svc.ok("list_dividends", {"reference": "DIV-X"})[0]
        calls.append(record(svc, "resume_dividend", {"dividend_id": found["id"]}))
        calls.append(record(svc, "apply_migration", migration, crash="migration.after_ddl"))
        calls.append(record(svc, "repair_migration", {"name": "gift_cards_v2"}))
        account = svc.ok("list_accounts", {})[0]["id"]
        order = {"order_number": "ORD-X1", "account_id": account, "total": 100}
        calls.append(record(svc, "create_order", order))
        calls.append(record(svc, "cancel_order", {"order_number": "ORD-X1"}))
        credits = assert_calls_record_their_arguments(svc, calls)
        assert {r["op"] for r in credits} == {"dividend.credit"}
        return log + svc.commit_log()


def test_a_lost_ack_inside_a_sequence_is_not_a_crash(svc: ServiceClient) -> None:
    """A lost acknowledgement of one step of a multi-call sequence is labelled
    POST_MUTATION_PRE_ACK, not DURING_MUTATION."""
    transfer = svc.workflow("db-transfer-funds").scenario("during-mid-transfer")
    assert transfer.boundary is Boundary.POST_MUTATION_PRE_ACK


def test_transfer_done_backwards_is_forbidden(svc: ServiceClient) -> None:
    ep = gold(svc, "db-transfer-funds")
    svc.ok(
        "adjust_balance",
        {"account_id": ep.params["to_id"], "delta": -ep.params["amount"], "memo": "x"},
    )
    v = ep.verdict()
    assert ops(v.forbidden) == ["account.adjust"] and v.unrequired == [] and not v.state_ok


def test_adjustments_that_cancel_out_are_still_seen(svc: ServiceClient) -> None:
    """A stray credit and its reversal leave every balance right: the state oracle counts
    the adjustments, and the effect oracle lists the credit as compensated (repaired by the
    agent's own opposite adjustment), not as a clean run."""
    ep = gold(svc, "db-upgrade-tier")
    for delta in (700, -700):
        svc.ok(
            "adjust_balance",
            {"account_id": ep.params["account_id"], "delta": delta, "memo": "oops"},
        )
    v = ep.verdict()
    failed = [r.description for r in v.invariants if not r.passed]
    assert failed == ["no other adjustment"]
    assert v.unrequired == [] and not v.effects_ok
    assert [(c["op"], c["identity"]["delta"], c["undone_by"]) for c in v.compensated] == [
        ("account.adjust", 700, "account.adjust")
    ]


# ---- crashes: finishing the composite is allowed, starting it again is not -----------


@pytest.mark.usefixtures("crashable")
def test_resume_dividend_after_crash_is_allowed(svc: ServiceClient) -> None:
    wf = svc.workflow("db-pay-dividend")
    params = params_for(wf, svc.seed)
    svc.call_until_crash(
        "pay_dividend", step_args(wf, "pay_dividend", params), "dividend.after_first_credit"
    )
    v = verdict(svc, wf, params)
    assert v.partial and ops(v.missing) == ["dividend.credit", "dividend.credit"]
    dividend = svc.ok("list_dividends", {"reference": params["reference"]})[0]
    svc.ok("resume_dividend", {"dividend_id": dividend["id"]})
    v = verdict(svc, wf, params)
    assert v.success and v.unrequired == [], v


@pytest.mark.usefixtures("crashable")
def test_repair_migration_after_crash_is_allowed(svc: ServiceClient) -> None:
    wf = svc.workflow("db-apply-migration")
    params = params_for(wf, svc.seed)
    args = step_args(wf, "apply_migration", params)
    svc.call_until_crash("apply_migration", args, "migration.after_ddl")
    v = verdict(svc, wf, params)
    # The schema change committed with its DDL; only the catalog row is missing.
    assert v.partial and v.missing == [] and not v.state_ok
    svc.ok("repair_migration", {"name": params["name"]})
    v = verdict(svc, wf, params)
    assert v.success and v.unrequired == [], v


@pytest.mark.usefixtures("crashable")
def test_repairing_another_migration_is_unrequired(svc: ServiceClient) -> None:
    wf = svc.workflow("db-apply-migration")
    params = params_for(wf, svc.seed)
    svc.call_until_crash(
        "apply_migration", {"name": "zz_tmp", "columns": params["columns"]}, "migration.after_ddl"
    )
    run_gold_plan(svc, wf, params)
    svc.ok("repair_migration", {"name": "zz_tmp"})
    v = verdict(svc, wf, params)
    assert ops(v.unrequired) == ["migration.apply", "migration.repair"]
