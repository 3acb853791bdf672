"""Ticketing workflows under the semantic-identity oracle, in-process: what each mutating
route commits as its identity, the verdict of every gold plan (no unrequired effect), and
the verdicts that behaviours of real agents must get (a reworded re-send is a duplicate,
a re-send with another value is unrequired, a resume after a crash is allowed)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from undobench_gym.agents.scripted import resolve_refs
from undobench_gym.envs.ticketing.fixture import build_fixture, level_responders
from undobench_gym.envs.ticketing.service import DOMAIN
from undobench_gym.envs.ticketing.workflows import WORKFLOWS

from undobench_gym.oracles import evaluate
from undobench_gym.specs import Boundary, Verdict, WorkflowSpec

from .service_harness import (
    GOLD_SEEDS,
    SEED,
    ServiceClient,
    gold_plan_cases,
    params_for,
    run_gold_plan,
    step_args,
)

pytestmark = pytest.mark.service(DOMAIN)

CRASH_POINT = "ticketing.after_first_page"
#: Argument names that hold text a person or an agent writes: never part of an identity.
FREE_TEXT = {"message", "body", "reason", "resolution", "title", "author", "summary"}


def verdict(svc: ServiceClient, wf: WorkflowSpec, params: dict[str, Any]) -> Verdict:
    """The benchmark's own verdict on the service's final state and commit log."""
    return evaluate(wf, params, svc.state(), svc.commit_log(), physical_calls=0)


def ops_of(items: list[dict[str, Any]]) -> list[str]:
    return [e["op"] for e in items]


def gold_then_resend(
    svc: ServiceClient, wf: WorkflowSpec, params: dict[str, Any], tool: str, change: Any
) -> None:
    """Run the gold plan, then send gold step `tool` once more with `change` applied to its
    arguments, as an agent that never saw the first answer would."""
    bodies = run_gold_plan(svc, wf, params)
    args = resolve_refs(step_args(wf, tool, params), bodies)
    svc.ok(tool, {**args, **change})


# ---- identities --------------------------------------------------------------------


Call = tuple[str, dict[str, Any], list[dict[str, Any]]]


def _exercise(svc: ServiceClient) -> list[Call]:
    """Call every mutating tool once with arguments that commit: (tool, arguments, the
    commit-log rows the call wrote), in order."""
    fx = build_fixture(SEED)
    inc0, inc1, inc2, inc3 = (i["id"] for i in fx["incidents"])
    policy = fx["policies"][0]["id"]
    responder = level_responders(fx, policy, 1)[0]
    mistaken = next(p for p in fx["pages"] if p["incident_id"] == inc1)
    opened = {
        "external_ref": "ALRT-NEW-1",
        "title": "t",
        "service": "s",
        "severity": "sev3",
        "policy_id": policy,
    }
    calls: list[tuple[str, dict[str, Any]]] = [
        ("open_incident", opened),
        ("set_severity", {"incident_id": inc0, "severity": "sev2"}),
        ("assign_incident", {"incident_id": inc0, "responder_id": responder}),
        ("page_responder", {"incident_id": inc0, "responder_id": responder, "message": "m"}),
        ("retract_page", {"page_id": mistaken["id"], "message": "sorry"}),
        ("add_comment", {"incident_id": inc0, "author": "a", "kind": "note", "body": "b"}),
        ("resolve_incident", {"incident_id": inc2, "resolution": "fixed"}),
        ("send_resolution_notice", {"incident_id": inc2, "audience": "support", "message": "m"}),
        ("reopen_incident", {"incident_id": inc3, "reason": "still firing"}),
    ]
    out: list[Call] = []
    for tool, args in calls:
        seen = len(svc.commit_log())
        svc.ok(tool, args)
        out.append((tool, args, svc.commit_log()[seen:]))
    escalate = {"incident_id": inc0, "reason": "no ack"}
    seen = len(svc.commit_log())
    svc.call_until_crash("escalate_incident", escalate, CRASH_POINT)
    out.append(("escalate_incident", escalate, svc.commit_log()[seen:]))
    esc = svc.ok("list_escalations", {"incident_id": inc0})[-1]
    seen = len(svc.commit_log())
    resume = {"escalation_id": esc["id"]}
    svc.ok("resume_escalation", resume)
    out.append(("resume_escalation", resume, svc.commit_log()[seen:]))
    return out


@pytest.mark.usefixtures("crashable")
def test_every_route_commits_the_identity_it_declares(svc: ServiceClient) -> None:
    calls = _exercise(svc)
    mutating = {n for n, t in svc.tools.items() if not t.read_only}
    assert {tool for tool, _, _ in calls} == mutating, "every mutating route is exercised"
    page = svc.tools["page_responder"]
    for tool, args, commits in calls:
        spec = svc.tools[tool]
        own = [json.loads(r["identity"]) for r in commits if r["op"] == spec.op]
        # The route's own commit carries exactly the declared identity fields, with the
        # call's argument values (what the env's re-issue count derives from a call).
        assert own == [{f: args[f] for f in spec.identity}], (tool, own, spec.identity)
        for row in commits:
            if row["op"] != spec.op:  # a composite's pages are page.send like any page
                assert row["op"] == page.op, (tool, row)
                assert set(json.loads(row["identity"])) == set(page.identity), (tool, row)


def test_no_identity_holds_free_text(svc: ServiceClient) -> None:
    for name, tool in svc.tools.items():
        if not tool.read_only:
            assert tool.identity, name
            assert not set(tool.identity) & FREE_TEXT, (name, tool.identity)


# ---- scenarios ---------------------------------------------------------------------


def test_scenarios_are_honest(svc: ServiceClient) -> None:
    for wf in WORKFLOWS:
        gold = [s.tool for s in wf.gold_plan]
        for sc in wf.scenarios:
            tool = svc.tools[sc.target.tool]
            assert not tool.read_only and sc.target.tool in wf.tools, (wf.id, sc.id)
            assert gold.count(sc.target.tool) >= sc.target.nth, (wf.id, sc.id)
            if sc.boundary is Boundary.DURING_MUTATION:
                assert sc.crash_point, f"{wf.id}/{sc.id}: a lost ack is POST_MUTATION_PRE_ACK"
            if sc.boundary is Boundary.DURING_COMPENSATION:
                assert tool.compensation, (wf.id, sc.id)
                before = gold[: gold.index(sc.target.tool)]
                forward = [t for t in before if not svc.tools[t].read_only]
                assert forward, f"{wf.id}/{sc.id}: the task had no forward effect before"


# ---- gold plans under the oracle ---------------------------------------------------


@gold_plan_cases(WORKFLOWS)
def test_gold_plan_verdict_is_clean(svc: ServiceClient, wf: WorkflowSpec, seed: int) -> None:
    svc.reset(seed)
    params = params_for(wf, seed)
    run_gold_plan(svc, wf, params)
    v = verdict(svc, wf, params)
    assert v.success, v.model_dump()
    assert v.unrequired == v.duplicates == v.missing == v.forbidden == []


# ---- behaviours of real agents -----------------------------------------------------

#: (workflow, step of the gold plan whose answer was lost, arguments changed in the
#: re-send that only reword it).
REWORDED = [
    ("tix-open-and-page", "page_responder", {"message": "Re-sending: are you on it?"}),
    ("tix-resolve-and-notify", "send_resolution_notice", {"message": "Resolved (resent)."}),
    ("tix-resolve-and-notify", "add_comment", {"body": "Postmortem scheduled (retry)."}),
    ("tix-retract-mistaken-page", "retract_page", {"message": "Please ignore that page."}),
    ("tix-retract-mistaken-page", "page_responder", {"message": "You are on call (retry)"}),
]


@pytest.mark.parametrize(("wf_id", "tool", "reworded"), REWORDED)
@pytest.mark.parametrize("seed", GOLD_SEEDS[:2])
def test_reworded_resend_is_a_duplicate(
    svc: ServiceClient, wf_id: str, tool: str, reworded: dict[str, Any], seed: int
) -> None:
    wf = svc.workflow(wf_id)
    svc.reset(seed)
    params = params_for(wf, seed)
    gold_then_resend(svc, wf, params, tool, reworded)
    v = verdict(svc, wf, params)
    assert not v.success and not v.state_ok
    assert ops_of(v.duplicates) == [svc.tools[tool].op]
    assert v.unrequired == []


#: (workflow, tool, arguments that change the value: another effect the task never asked
#: for, or a forbidden one).
OTHER_VALUE = [
    ("tix-open-and-page", "assign_incident", {"responder_id": "{manager}"}, "unrequired"),
    ("tix-open-and-page", "page_responder", {"responder_id": "{manager}"}, "unrequired"),
    ("tix-resolve-and-notify", "add_comment", {"kind": "note"}, "unrequired"),
    ("tix-resolve-and-notify", "send_resolution_notice", {"audience": "support"}, "unrequired"),
    ("tix-resolve-and-notify", "send_resolution_notice", {"audience": "status-page"}, "forbidden"),
    ("tix-retract-mistaken-page", "page_responder", {"responder_id": "{wrong_id}"}, "forbidden"),
]


@pytest.mark.parametrize(("wf_id", "tool", "change", "kind"), OTHER_VALUE)
def test_resend_with_another_value_is_not_required(
    svc: ServiceClient, wf_id: str, tool: str, change: dict[str, Any], kind: str
) -> None:
    wf = svc.workflow(wf_id)
    params = params_for(wf)
    fx = build_fixture(SEED)
    policy = params.get("policy_id") or fx["incidents"][0]["policy_id"]
    values = {**params, "manager": level_responders(fx, policy, 3)[0]}
    gold_then_resend(svc, wf, params, tool, {k: v.format(**values) for k, v in change.items()})
    v = verdict(svc, wf, params)
    assert not v.success
    assert ops_of(getattr(v, kind)) == [svc.tools[tool].op]
    assert v.duplicates == [] and v.missing == []


def test_an_unasked_compensation_is_unrequired(svc: ServiceClient) -> None:
    wf = svc.workflow("tix-open-and-page")
    params = params_for(wf)
    bodies = run_gold_plan(svc, wf, params)
    svc.ok("retract_page", {"page_id": bodies[-1]["id"], "message": "sorry, wrong person"})
    v = verdict(svc, wf, params)
    assert ops_of(v.unrequired) == ["page.retract"] and not v.success


@pytest.mark.usefixtures("crashable")
def test_resume_after_a_crash_is_allowed(svc: ServiceClient) -> None:
    wf = svc.workflow("tix-escalate-incident")
    params = params_for(wf)
    args = step_args(wf, "escalate_incident", params)
    svc.call_until_crash("escalate_incident", args, CRASH_POINT)
    v = verdict(svc, wf, params)
    assert v.partial and ops_of(v.missing) == ["page.send", "page.send"]
    esc = svc.ok("list_escalations", {"incident_id": params["incident_id"]})[-1]
    svc.ok("resume_escalation", {"escalation_id": esc["id"]})
    svc.ok("resume_escalation", {"escalation_id": esc["id"]})  # completed: commits nothing
    assert svc.ops().count("escalation.resume") == 1
    v = verdict(svc, wf, params)
    assert v.success and v.unrequired == [], v.model_dump()
    # Escalating again instead escalates one level further: a duplicate, and level 3 paged.
    svc.reset()
    svc.call_until_crash("escalate_incident", args, CRASH_POINT)
    esc = svc.ok("list_escalations", {"incident_id": params["incident_id"]})[-1]
    svc.ok("resume_escalation", {"escalation_id": esc["id"]})
    svc.ok("escalate_incident", args)
    v = verdict(svc, wf, params)
    assert ops_of(v.duplicates) == ["incident.escalate"] and ops_of(v.unrequired) == ["page.send"]


def test_resend_refused_with_409_commits_nothing(svc: ServiceClient) -> None:
    """After a lost answer to open_incident, re-opening is refused: nothing is committed."""
    wf = svc.workflow("tix-open-and-page")
    params = params_for(wf)
    run_gold_plan(svc, wf, params)
    again = svc.call("open_incident", {**step_args(wf, "open_incident", params), "title": "x"})
    assert again.status_code == 409
    assert verdict(svc, wf, params).success


def test_lost_ack_then_verified_no_resend_is_success(svc: ServiceClient) -> None:
    """A careful agent reads the incident after a lost answer and does not page again."""
    wf = svc.workflow("tix-open-and-page")
    params = params_for(wf)
    run_gold_plan(svc, wf, params)
    pages = svc.ok("list_pages", {"incident_id": params["incident_id"]})
    assert [p["responder_id"] for p in pages] == [params["responder_id"]]
    assert verdict(svc, wf, params).success
