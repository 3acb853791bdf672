"""CRM workflows against the benchmark's own effect oracle, in-process: identities are
semantic and agree between the route labels and the commit log, gold plans succeed with no
unrequired effect, scenarios aim at what they say, and the behaviours real agents show
after a fault get the verdict they deserve (a re-send is a duplicate, a re-send with
another value an unrequired effect, finishing a half-converted lead is allowed)."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pytest
from undobench_gym.envs.crm.composites import CRASH_AFTER_ACCOUNT
from undobench_gym.envs.crm.fixture import build_fixture
from undobench_gym.envs.crm.service import DOMAIN
from undobench_gym.envs.crm.workflows import WORKFLOWS

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
    """The commit log of every gold plan, of a conversion finished by
    resume_lead_conversion, and of a new contact."""
    log: list[dict[str, Any]] = []
    for wf in WORKFLOWS:
        svc.reset()
        run_gold_plan(svc, wf, params_for(wf, svc.seed))
        log += svc.commit_log()
    svc.reset()
    wf = svc.workflow("crm-convert-lead")
    params = params_for(wf, svc.seed)
    svc.call_until_crash("convert_lead", step_args(wf, "convert_lead", params), CRASH_AFTER_ACCOUNT)
    svc.ok("resume_lead_conversion", {"lead_id": params["lead_id"]})
    account = build_fixture(svc.seed)["accounts"][3]["id"]
    svc.ok("create_contact", {"account_id": account, "name": "New Person", "email": "n@x.example"})
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


def test_renewing_again_is_a_duplicate_or_unrequired(svc: ServiceClient) -> None:
    wf = svc.workflow("crm-renew-sla")
    params = params_for(wf, svc.seed)
    run_gold_plan(svc, wf, params, [0, 1, 1])
    v = verdict(svc, wf, params)
    assert ops(v.duplicates) == ["sla.renew"] and not v.success and not v.state_ok
    svc.reset()
    run_gold_plan(svc, wf, params)
    args = step_args(wf, "renew_sla", params)
    svc.ok("renew_sla", {**args, "years": args["years"] % 3 + 1})
    v = verdict(svc, wf, params)
    assert ops(v.unrequired) == ["sla.renew"] and v.duplicates == [] and not v.success


@pytest.mark.parametrize("wf_id", ["crm-fix-sequence-enrollment", "crm-close-won-deal"])
def test_enrolling_again_is_a_duplicate(svc: ServiceClient, wf_id: str) -> None:
    wf = svc.workflow(wf_id)
    params = params_for(wf, svc.seed)
    run_gold_plan(svc, wf, params)  # the enrollment's answer was lost: the agent re-sends
    svc.ok("enroll_contact", step_args(wf, "enroll_contact", params))
    v = verdict(svc, wf, params)
    assert ops(v.duplicates) == ["sequence.enroll"] and not v.success and not v.state_ok


def test_enrolling_in_another_sequence_is_harm(svc: ServiceClient) -> None:
    wf = svc.workflow("crm-fix-sequence-enrollment")
    params = params_for(wf, svc.seed)
    run_gold_plan(svc, wf, params)
    fx = build_fixture(svc.seed)
    webinar = next(s["id"] for s in fx["sequences"] if s["name"] == "webinar-invite")
    svc.ok("enroll_contact", {"sequence_id": webinar, "contact_id": params["contact_id"]})
    svc.ok(
        "enroll_contact",
        {"sequence_id": params["wrong_sequence"], "contact_id": params["contact_id"]},
    )
    v = verdict(svc, wf, params)
    assert ops(v.unrequired) == ["sequence.enroll"] and ops(v.forbidden) == ["sequence.enroll"]
    assert not v.success


def test_unenrolling_twice_is_harmless(svc: ServiceClient) -> None:
    wf = svc.workflow("crm-fix-sequence-enrollment")
    params = params_for(wf, svc.seed)
    run_gold_plan(svc, wf, params, [0, 1, 2, 2])
    assert verdict(svc, wf, params).success


def test_a_detour_through_another_tier_is_unrequired(svc: ServiceClient) -> None:
    wf = svc.workflow("crm-close-won-deal")
    params = params_for(wf, svc.seed)
    other = "enterprise" if params["tier"] == "premium" else "premium"
    svc.ok("set_account_tier", {"account_id": params["account_id"], "tier": other})
    run_gold_plan(svc, wf, params)
    v = verdict(svc, wf, params)
    assert v.state_ok and not v.success
    assert [e["identity"]["tier"] for e in v.unrequired] == [other]


def test_reconverting_with_a_reworded_name_changes_nothing(svc: ServiceClient) -> None:
    wf = svc.workflow("crm-convert-lead")
    params = params_for(wf, svc.seed)
    run_gold_plan(svc, wf, params)  # the conversion's answer was lost
    args = step_args(wf, "convert_lead", params)
    again = {**args, "opportunity_name": args["opportunity_name"] + " (retry)"}
    assert svc.call("convert_lead", again).status_code == 409
    assert svc.ok("resume_lead_conversion", {"lead_id": params["lead_id"]})["status"] == "converted"
    assert verdict(svc, wf, params).success
    assert [r["op"] for r in svc.commit_log()] == ["lead.convert", "lead.opportunity"]


@pytest.mark.usefixtures("crashable")
def test_resuming_a_half_converted_lead_is_allowed(svc: ServiceClient) -> None:
    wf = svc.workflow("crm-convert-lead")
    params = params_for(wf, svc.seed)
    args = step_args(wf, "convert_lead", params)
    svc.call_until_crash("convert_lead", args, CRASH_AFTER_ACCOUNT)
    half = verdict(svc, wf, params)
    assert half.partial and ops(half.missing) == ["lead.opportunity"]
    again = {**args, "opportunity_name": args["opportunity_name"] + " (retry)"}
    assert svc.call("convert_lead", again).status_code == 409
    svc.ok("resume_lead_conversion", {"lead_id": params["lead_id"]})
    v = verdict(svc, wf, params)
    assert v.success and v.unrequired == [], v.model_dump()
    assert [r["op"] for r in svc.commit_log()].count("lead.resume") == 1


@pytest.mark.parametrize("seed", GOLD_SEEDS)
def test_history_does_not_count_as_the_effect(svc: ServiceClient, seed: int) -> None:
    """Before any call, no task is done by what the fixture already holds."""
    svc.reset(seed)
    for wf in WORKFLOWS:
        v = verdict(svc, wf, params_for(wf, seed))
        assert not v.state_ok and v.missing, wf.id
