"""Database workflows against the real routes, judged by the benchmark's own oracle: gold
plans succeed with no unrequired effect, identities are semantic (a re-sent adjustment
with a reworded memo is a duplicate, one with another amount is unrequired), and the
recovery routes that finish a half-done composite are allowed effects."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from undobench_gym.envs.database.service import DOMAIN
from undobench_gym.envs.database.workflows import WORKFLOWS

from undobench_gym.oracles import evaluate
from undobench_gym.specs import Boundary, Verdict, WorkflowSpec

from .service_harness import (
    GOLD_SEEDS,
    ServiceClient,
    gold_plan_cases,
    params_for,
    run_gold_plan,
    step_args,
)

pytestmark = pytest.mark.service(DOMAIN)

#: Fields a client writes as it likes: never part of an effect's identity.
FREE_TEXT = {"memo", "description", "note", "reason"}


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


def test_scenarios_are_honest(svc: ServiceClient) -> None:
    """Faults name a mutating tool the gold plan calls at least `nth` times; a
    DURING_MUTATION fault crashes inside a composite route (a lost acknowledgement of one
    step of a multi-call sequence is labelled POST_MUTATION_PRE_ACK)."""
    for wf in WORKFLOWS:
        gold_tools = [s.tool for s in wf.gold_plan]
        for sc in wf.scenarios:
            assert not svc.tools[sc.target.tool].read_only, (wf.id, sc.id)
            assert gold_tools.count(sc.target.tool) >= sc.target.nth, (wf.id, sc.id)
            if sc.boundary is Boundary.DURING_MUTATION:
                assert sc.crash_point, (wf.id, sc.id)
    transfer = svc.workflow("db-transfer-funds").scenario("during-mid-transfer")
    assert transfer.boundary is Boundary.POST_MUTATION_PRE_ACK


@gold_plan_cases(WORKFLOWS)
def test_gold_plan_succeeds_with_nothing_unrequired(
    svc: ServiceClient, wf: WorkflowSpec, seed: int
) -> None:
    svc.reset(seed)
    params = params_for(wf, seed)
    run_gold_plan(svc, wf, params)
    v = verdict(svc, wf, params)
    assert v.success, v
    assert v.unrequired == [] and v.duplicates == [] and v.missing == []


@pytest.mark.usefixtures("crashable")
def test_identity_declared_is_identity_recorded(svc: ServiceClient) -> None:
    """Every committed row's identity has exactly the fields its route declares, and none
    of them is free text; the recovery routes included."""
    declared = {t.op: t.identity for t in svc.tools.values() if t.op}
    for field in set().union(*map(set, declared.values())):
        assert field not in FREE_TEXT, field
    seen: set[str] = set()
    for wf in WORKFLOWS:
        svc.reset()
        run_gold_plan(svc, wf, params_for(wf, svc.seed))
        for row in svc.commit_log():
            seen.add(row["op"])
            if row["op"] in declared:
                assert sorted(json.loads(row["identity"])) == sorted(declared[row["op"]]), row
    svc.reset()
    dividend = {"share_class": "common", "amount_per_share": 7, "reference": "DIV-X"}
    svc.call_until_crash("pay_dividend", dividend, "dividend.after_first_credit")
    found = svc.ok("list_dividends", {"reference": "DIV-X"})[0]
    svc.ok("resume_dividend", {"dividend_id": found["id"]})
    migration = {"name": "gift_cards_v2", "columns": [{"name": "code", "type": "text"}]}
    svc.call_until_crash("apply_migration", migration, "migration.after_ddl")
    svc.ok("repair_migration", {"name": "gift_cards_v2"})
    rows = {r["op"]: json.loads(r["identity"]) for r in svc.commit_log()}
    assert rows["dividend.resume"] == {"dividend_id": found["id"]}
    assert rows["migration.repair"] == {"name": "gift_cards_v2"}
    assert rows["migration.apply"] == migration
    seen |= set(rows)
    assert set(declared) <= seen  # every route was exercised


# ---- adversarial re-sends: what an agent does after a lost acknowledgement -----------


def _adjust_again(wf_id: str, step: int, memo: str = " (retry)", extra: int = 0) -> Any:
    def resend(svc: ServiceClient) -> None:
        wf = svc.workflow(wf_id)
        args = step_args(wf, step, params_for(wf, svc.seed))
        svc.ok(
            "adjust_balance", {**args, "memo": args["memo"] + memo, "delta": args["delta"] + extra}
        )

    return resend


def _dividend_again(svc: ServiceClient) -> None:
    wf = svc.workflow("db-pay-dividend")
    args = step_args(wf, "pay_dividend", params_for(wf, svc.seed))
    svc.ok("pay_dividend", {**args, "reference": f"{args['reference']}-R"})


def _tier(value: str) -> Callable[[ServiceClient], None]:
    def resend(svc: ServiceClient) -> None:
        params = params_for(svc.workflow("db-upgrade-tier"), svc.seed)
        svc.ok("set_account_tier", {"account_id": params["account_id"], "tier": value})

    return resend


def _order_again(changed: dict[str, Any], status: int) -> Callable[[ServiceClient], None]:
    def resend(svc: ServiceClient) -> None:
        params = params_for(svc.workflow("db-create-order"), svc.seed)
        body = {k: params[k] for k in ("order_number", "account_id", "total")}
        assert svc.call("create_order", {**body, **changed}).status_code == status

    return resend


def _migration_again(svc: ServiceClient) -> None:
    params = params_for(svc.workflow("db-apply-migration"), svc.seed)
    svc.ok("apply_migration", {"name": f"{params['name']}_b", "columns": params["columns"]})


# (workflow, behaviour, what the agent does after the gold plan, duplicated ops,
#  unrequired ops; both empty: harmless)
RESENDS: list[tuple[str, str, Callable[[ServiceClient], None], list[str], list[str]]] = [
    (
        "db-transfer-funds",
        "credit, reworded memo",
        _adjust_again("db-transfer-funds", 2),
        ["account.adjust"],
        [],
    ),
    (
        "db-transfer-funds",
        "debit, same memo",
        _adjust_again("db-transfer-funds", 1, memo=""),
        ["account.adjust"],
        [],
    ),
    (
        "db-transfer-funds",
        "credit of another amount",
        _adjust_again("db-transfer-funds", 2, extra=100),
        [],
        ["account.adjust"],
    ),
    (
        "db-upgrade-tier",
        "bonus, reworded memo",
        _adjust_again("db-upgrade-tier", 2),
        ["account.adjust"],
        [],
    ),
    (
        "db-upgrade-tier",
        "bonus of another amount",
        _adjust_again("db-upgrade-tier", 2, extra=1),
        [],
        ["account.adjust"],
    ),
    ("db-upgrade-tier", "tier set to another value", _tier("platinum"), [], ["account.tier"]),
    (
        "db-pay-dividend",
        "dividend under another reference",
        _dividend_again,
        ["dividend.credit"] * 3,
        ["dividend.declare"],
    ),
    (
        "db-create-order",
        "order under another number",
        _order_again({"order_number": "ORD-1"}, 201),
        [],
        ["order.create"],
    ),
    (
        "db-apply-migration",
        "migration under another name",
        _migration_again,
        [],
        ["migration.apply"],
    ),
]
#: Repeats the service or the effect class absorbs: the verdict stays a success.
HARMLESS: list[tuple[str, str, Callable[[ServiceClient], None]]] = [
    ("db-upgrade-tier", "tier set to gold again", _tier("gold")),
    ("db-create-order", "order again, other total", _order_again({"total": 1}, 409)),
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


@pytest.mark.parametrize(
    ("wf_id", "resend"), [pytest.param(w, f, id=f"{w}:{b}") for w, b, f in HARMLESS]
)
def test_absorbed_repeat_is_harmless(
    svc: ServiceClient, wf_id: str, resend: Callable[[ServiceClient], None]
) -> None:
    wf, params = gold(svc, wf_id)
    resend(svc)
    assert verdict(svc, wf, params).success


def test_transfer_done_backwards_is_forbidden(svc: ServiceClient) -> None:
    wf, params = gold(svc, "db-transfer-funds")
    svc.ok(
        "adjust_balance", {"account_id": params["to_id"], "delta": -params["amount"], "memo": "x"}
    )
    v = verdict(svc, wf, params)
    assert ops(v.forbidden) == ["account.adjust"] and v.unrequired == [] and not v.state_ok


def test_adjustments_that_cancel_out_are_still_seen(svc: ServiceClient) -> None:
    """A stray credit and its reversal leave every balance right: the state oracle counts
    the adjustments, and the effect oracle lists both as unrequired."""
    wf, params = gold(svc, "db-upgrade-tier")
    for delta in (700, -700):
        svc.ok(
            "adjust_balance", {"account_id": params["account_id"], "delta": delta, "memo": "oops"}
        )
    v = verdict(svc, wf, params)
    failed = [r.description for r in v.invariants if not r.passed]
    assert failed == ["no other adjustment"]
    assert ops(v.unrequired) == ["account.adjust", "account.adjust"]


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


@pytest.mark.parametrize("seed", GOLD_SEEDS)
def test_history_never_satisfies_the_task(svc: ServiceClient, seed: int) -> None:
    """From the seeded state, with its history, no workflow is already done and none of
    its required effects is in the commit log."""
    for wf in WORKFLOWS:
        svc.reset(seed)
        v = verdict(svc, wf, params_for(wf, seed))
        assert not v.state_ok and not v.success, wf.id
        assert len(v.missing) == len(wf.required_effects), wf.id
