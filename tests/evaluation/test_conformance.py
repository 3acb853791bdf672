"""Oracle conformance: the perturbed agents (unit tests, no services) and the whole suite
against the real services of every domain in the catalogue."""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest

from undobench_gym.contract.specs import fill
from undobench_gym.core.catalog import all_workflows, domain, find_workflow
from undobench_gym.evaluation import perturb as pt
from undobench_gym.evaluation.conformance import EXPECTED_FAILURES, run_conformance


def _ctx(workflow: str, seed: int = 1) -> pt.Context:
    w = find_workflow(workflow)
    dom = domain(w.domain)
    params = w.draw_params(seed, dom.fixture(seed))
    gold = [{"tool": s.tool, "arguments": fill(s.arguments, params)} for s in w.gold_plan]
    return pt.Context(w, dom.tools, gold, params)


def _tools(plan: list[pt.Step] | None) -> list[str]:
    assert plan is not None
    return [s.tool for s in plan]


def test_always_retry_repeats_every_mutating_call_once() -> None:
    plan = pt.always_retry(_ctx("pay-cross-border-wire"))
    assert _tools(plan) == [
        "get_fx_quote",
        "create_wire",
        "create_wire",
        "create_charge",
        "create_charge",
    ]
    assert plan is not None and [s.repeat for s in plan] == [False, False, True, False, True]
    assert plan[2].gold == plan[1].gold == 1  # the repeat reads the same references


def test_duplicate_repeats_the_last_additive_call() -> None:
    plan = pt.duplicate_last_additive(_ctx("pay-cross-border-wire"))
    assert _tools(plan)[-2:] == ["create_charge", "create_charge"]
    # No additive or irreversible step: the perturbation does not apply.
    assert pt.duplicate_last_additive(_ctx("db-create-order")) is None


def test_skip_and_wrong_value() -> None:
    ctx = _ctx("pay-cross-border-wire")
    assert _tools(pt.skip_step(1)(ctx)) == ["get_fx_quote", "create_charge"]
    plan = pt.wrong_value_in(pt.mutating_steps)(ctx)
    assert plan is not None
    # The first number of the first mutating step: the wire amount, one cent off.
    assert plan[1].arguments["amount"] == ctx.gold[1]["arguments"]["amount"] + 1
    assert plan[2].arguments == ctx.gold[2]["arguments"]


def test_compensate_wrongly_re_aims_at_the_forbidden_effect() -> None:
    ctx = _ctx("pay-refund-duplicate-charge")
    plan = pt.commit_forbidden(ctx)
    assert plan is not None
    refund = next(s for s in plan if s.tool == "create_refund")
    assert refund.marked and refund.arguments["charge_id"] == ctx.params["keep_charge"]
    assert pt.commit_forbidden(_ctx("pay-charge-customer")) is None  # nothing forbidden


def test_plan_agent_keeps_references_to_gold_steps_when_steps_move() -> None:
    plan = [
        pt.Step("get_fx_quote", {}, 0),
        pt.Step("get_fx_quote", {}, 0, repeat=True),
        pt.Step("create_wire", {"quote_id": "@0.quote_id"}, 1),
    ]
    agent = pt.PlanAgent(plan)
    agent.reset([])

    def obs(status: int, body: Any) -> str:
        return json.dumps({"tool": "x", "status": status, "body": body})

    assert agent.act("{}")["tool"] == "get_fx_quote"
    assert agent.act(obs(200, {"quote_id": "q1"}))["tool"] == "get_fx_quote"
    # The repeat failed (tolerated) and did not overwrite gold step 0's response.
    action = agent.act(obs(500, {"quote_id": "other"}))
    assert action == {"tool": "create_wire", "arguments": {"quote_id": "q1"}}
    assert agent.act(obs(409, {}))["arguments"]["status"] == "gave_up"
    assert agent.gave_up and [s.status for s in agent.sent] == [200, 500, 409]


def test_expected_failures_name_real_cases() -> None:
    ids = {w.id for w in all_workflows()}
    for (workflow, _case), reason in EXPECTED_FAILURES.items():
        assert workflow in ids and len(reason) > 40


@pytest.mark.slow
def test_the_oracles_conform_on_every_workflow() -> None:
    report = run_conformance()
    counts = report.counts
    for r in report.results:
        if r.status == "flaky":  # nondeterminism in a stack: visible, not an oracle error
            warnings.warn(
                f"flaky conformance case {r.workflow} {r.case}: {r.message}", stacklevel=1
            )
    bad = [r for r in report.results if r.status not in ("pass", "expected_failure", "flaky")]
    assert not bad, "\n".join(
        f"{r.status}: {r.workflow} {r.case} {r.failed} {r.message}" for r in bad
    )
    assert counts["errors"] == 0
    assert counts["false_positives"] == counts["false_negatives"] == 0
    workflows = {w.id for w in all_workflows()}
    perfect = {
        r.workflow for r in report.results if r.case == "perfect" and r.status in ("pass", "flaky")
    }
    assert perfect == workflows  # every gold plan succeeds
    kinds = {r.case.split(":")[0] for r in report.results}
    assert {"perfect", "always-retry", "skip-effect", "wrong-value", "never-retry"} <= kinds
    assert counts["cases"] > 5 * len(workflows)
    assert counts["skipped"] == len(report.skipped)
