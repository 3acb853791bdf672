"""Cloud workflows against the benchmark's own effect oracle, in-process: identities are
semantic and agree between the route labels and the commit log, gold plans succeed with no
unrequired effect, scenarios aim at what they say, and the behaviours real agents show
after a fault get the verdict they deserve (a reworded re-send is a duplicate, a re-send
with another value an unrequired effect, finishing a half-done cutover is allowed)."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pytest
from undobench_gym.envs.cloud.service import DOMAIN
from undobench_gym.envs.cloud.workflows import WORKFLOWS

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

#: Argument and field names that carry text an agent words as it likes.
FREE_TEXT = {"reason", "description", "memo", "note", "notes", "text", "body", "message"}
FREE_TEXT |= {"subject", "summary", "comment", "title", "name"}


def verdict(svc: ServiceClient, wf: WorkflowSpec, params: dict[str, Any]) -> Verdict:
    return evaluate(wf, params, svc.state(), svc.commit_log(), physical_calls=0)


def ops(effects: list[dict[str, Any]]) -> list[str]:
    return [e["op"] for e in effects]


def route_labels(svc: ServiceClient) -> dict[str, dict[str, Any]]:
    """op -> the label of the mutating route that declares it."""
    out = {}
    for item in svc.app.openapi()["paths"].values():
        for op in item.values():
            meta = op["x-undobench"]
            if not meta.get("read_only"):
                out[meta["op"]] = meta
    return out


def exercise_every_route(svc: ServiceClient) -> list[dict[str, Any]]:
    """The commit log of every gold plan, and of a cutover finished by resume_cutover."""
    log: list[dict[str, Any]] = []
    for wf in WORKFLOWS:
        svc.reset()
        run_gold_plan(svc, wf, params_for(wf, svc.seed))
        log += svc.commit_log()
    svc.reset()
    wf = svc.workflow("cloud-blue-green-cutover")
    params = params_for(wf, svc.seed)
    svc.call_until_crash("start_cutover", step_args(wf, -1, params), "cloud.after_green_deployed")
    svc.ok("resume_cutover", {"cutover_id": params["cutover_id"]})
    return log + svc.commit_log()


@pytest.mark.usefixtures("crashable")
def test_route_labels_and_commit_rows_agree(svc: ServiceClient) -> None:
    labels = route_labels(svc)
    keys: dict[str, set[tuple[str, ...]]] = defaultdict(set)
    for row in exercise_every_route(svc):
        keys[row["op"]].add(tuple(sorted(json.loads(row["identity"]))))
    assert set(labels) <= set(keys), f"routes never exercised: {set(labels) - set(keys)}"
    for op, found in keys.items():
        assert len(found) == 1, (op, found)  # one identity shape per operation
        if op in labels:
            assert found == {tuple(sorted(labels[op]["identity"]))}, op
        assert not FREE_TEXT & set(*found), (op, found)
    for wf in WORKFLOWS:
        for exp in [*wf.required_effects, *wf.forbidden_effects]:
            assert {tuple(sorted(exp.identity))} == keys[exp.op], (wf.id, exp)
        for exp in wf.allowed_effects:
            assert set(exp.identity) <= set(*keys[exp.op]), (wf.id, exp)


@gold_plan_cases(WORKFLOWS)
def test_gold_plan_succeeds_with_no_unrequired_effect(
    svc: ServiceClient, wf: WorkflowSpec, seed: int
) -> None:
    svc.reset(seed)
    params = params_for(wf, seed)
    run_gold_plan(svc, wf, params)
    v = verdict(svc, wf, params)
    assert v.success, v.model_dump()
    assert v.unrequired == v.duplicates == v.missing == []


def test_scenarios_aim_at_what_they_say(svc: ServiceClient) -> None:
    for wf in WORKFLOWS:
        gold = [s.tool for s in wf.gold_plan]
        for sc in wf.scenarios:
            tool = svc.tools[sc.target.tool]
            assert sc.target.tool in wf.tools and not tool.read_only, (wf.id, sc.id)
            assert gold.count(tool.name) >= sc.target.nth, (wf.id, sc.id)
            if sc.boundary is Boundary.DURING_MUTATION:
                assert sc.crash_point, f"{wf.id}/{sc.id}: a lost ack, not a crash"
            if sc.boundary is Boundary.DURING_COMPENSATION:
                at = [i for i, t in enumerate(gold) if t == tool.name][sc.target.nth - 1]
                assert tool.compensation, (wf.id, sc.id)
                forward = [
                    t
                    for t in gold[:at]
                    if not svc.tools[t].read_only and not svc.tools[t].compensation
                ]
                assert forward, f"{wf.id}/{sc.id}: no forward effect before the compensation"


# ---- behaviours after a fault ------------------------------------------------------


def test_reworded_restart_is_a_duplicate(svc: ServiceClient) -> None:
    wf = svc.workflow("cloud-rotate-secrets")
    params = params_for(wf, svc.seed)
    run_gold_plan(svc, wf, params)  # the restart's answer was lost: the agent restarts again
    args = step_args(wf, "restart_instances", params)
    svc.ok("restart_instances", {**args, "reason": args["reason"] + " (retry after timeout)"})
    v = verdict(svc, wf, params)
    assert ops(v.duplicates) == ["deployment.restart"] and v.unrequired == []
    assert not v.success and not v.state_ok


def test_scaling_to_another_value_is_unrequired(svc: ServiceClient) -> None:
    wf = svc.workflow("cloud-rotate-secrets")
    params = params_for(wf, svc.seed)
    svc.ok("scale_deployment", {"deployment_id": params["deployment_id"], "replicas": 13})
    run_gold_plan(svc, wf, params)
    v = verdict(svc, wf, params)
    assert v.state_ok and not v.success  # the final value is right, the detour is not
    assert [e["identity"]["replicas"] for e in v.unrequired] == [13]
    # Scaling to the asked value again is a harmless repeat of a set.
    svc.reset()
    run_gold_plan(svc, wf, params, [0, 1, 1, 2])
    assert verdict(svc, wf, params).success


def test_redeploying_the_release_is_a_duplicate_or_unrequired(svc: ServiceClient) -> None:
    wf = svc.workflow("cloud-canary-release")
    params = params_for(wf, svc.seed)
    run_gold_plan(svc, wf, params, [0, 1, 1, 2, 3])
    v = verdict(svc, wf, params)
    assert ops(v.duplicates) == ["deployment.create"] and not v.success
    svc.reset()
    run_gold_plan(svc, wf, params, [0, 1])
    other = {**step_args(wf, "create_deployment", params), "replicas": params["replicas"] + 5}
    dep = svc.ok("create_deployment", other)
    svc.ok("register_endpoint", {"service_id": params["service_id"], "deployment_id": dep["id"]})
    svc.ok("set_traffic", step_args(wf, "set_traffic", params))
    v = verdict(svc, wf, params)
    assert sorted(ops(v.unrequired)) == ["deployment.create", "endpoint.register"]
    assert ops(v.missing) == ["endpoint.register"] and not v.success


def test_second_rollback_is_a_duplicate(svc: ServiceClient) -> None:
    wf = svc.workflow("cloud-rollback-bad-release")
    params = params_for(wf, svc.seed)
    run_gold_plan(svc, wf, params, [0, 1, 2, 3, 3])
    v = verdict(svc, wf, params)
    assert ops(v.duplicates) == ["deployment.rollback"] and not v.success


@pytest.mark.usefixtures("crashable")
@pytest.mark.parametrize("point", ["cloud.after_green_deployed", "cloud.after_endpoint_registered"])
def test_resuming_a_half_done_cutover_is_allowed(svc: ServiceClient, point: str) -> None:
    wf = svc.workflow("cloud-blue-green-cutover")
    params = params_for(wf, svc.seed)
    args = step_args(wf, "start_cutover", params)
    svc.call_until_crash("start_cutover", args, point)
    half = verdict(svc, wf, params)
    assert half.partial and not half.success
    # Starting it again, even under another change id, changes nothing.
    for again in (args, {**args, "change_id": "CHG-RETRY-1"}):
        assert svc.call("start_cutover", again).status_code == 409
    svc.ok("resume_cutover", {"cutover_id": params["cutover_id"]})
    svc.ok("resume_cutover", {"cutover_id": params["cutover_id"]})  # nothing left: no commit
    v = verdict(svc, wf, params)
    assert v.success and v.unrequired == [], v.model_dump()
    assert [r["op"] for r in svc.commit_log()].count("cutover.resume") == 1


def test_a_second_cutover_under_a_fresh_change_id_is_unrequired(svc: ServiceClient) -> None:
    wf = svc.workflow("cloud-blue-green-cutover")
    params = params_for(wf, svc.seed)
    run_gold_plan(svc, wf, params)  # committed, but the answer was lost
    svc.ok("start_cutover", {**step_args(wf, "start_cutover", params), "change_id": "CHG-1"})
    v = verdict(svc, wf, params)
    assert "cutover.start" in ops(v.unrequired) and not v.success and not v.state_ok


@pytest.mark.parametrize("seed", GOLD_SEEDS)
def test_history_does_not_count_as_the_effect(svc: ServiceClient, seed: int) -> None:
    """Before any call, no task is done by what the fixture already holds."""
    svc.reset(seed)
    for wf in WORKFLOWS:
        v = verdict(svc, wf, params_for(wf, seed))
        assert not v.state_ok and v.missing, wf.id
