"""Ticketing domain: seeded state, gold plans against the real routes, duplicate pages and
notices, half-done escalations and input validation, all in-process (no network)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from undobench_gym.contract.specs import Boundary, WorkflowSpec
from undobench_gym.services.domains._service.context import CRASH_HEADER
from undobench_gym.services.domains.ticketing.fixture import (
    LEVEL_SIZES,
    build_fixture,
    level_responders,
)
from undobench_gym.services.domains.ticketing.service import DOMAIN
from undobench_gym.services.domains.ticketing.workflows import WORKFLOWS

from .service_harness import (
    MALFORMED_JSON,
    SEED,
    ServiceClient,
    assert_done,
    assert_gold_plan_completes,
    assert_gold_plan_is_reproducible,
    assert_key_ignored_unless_all,
    assert_key_replays,
    assert_malformed_json_rejected,
    assert_rejected,
    assert_reset_is_deterministic,
    assert_reset_undoes_gold_plan,
    assert_routes_declare_effects,
    assert_workflow_is_consistent,
    effect_count,
    failed_invariants,
    gold_plan_cases,
    params_for,
    run_gold_plan,
    step_args,
)

pytestmark = pytest.mark.service(DOMAIN)

CRASH_POINT = "ticketing.after_first_page"

# ---- seeded state ------------------------------------------------------------------


def test_seeded_state_is_deterministic(svc: ServiceClient) -> None:
    assert_reset_is_deterministic(svc)


def test_reset_restores_state_after_changes(svc: ServiceClient) -> None:
    assert_reset_undoes_gold_plan(svc, svc.workflow("tix-escalate-incident"))
    assert svc.state()["tables"]["tk_escalations"] == build_fixture(SEED)["escalations"]


def test_ids_and_timestamps_follow_the_seed(svc: ServiceClient) -> None:
    assert_gold_plan_is_reproducible(svc, svc.workflow("tix-open-and-page"))


def test_fixture_shape_supports_workflows() -> None:
    for seed in range(30):
        fx = build_fixture(seed)
        ids = [r["id"] for r in fx["responders"]]
        assert len(set(ids)) == len(ids)
        for policy in fx["policies"]:
            sizes = [len(level_responders(fx, policy["id"], n)) for n in (1, 2, 3)]
            assert tuple(sizes) == LEVEL_SIZES
        mistaken = fx["incidents"][1]
        rota = [r for n in (1, 2, 3) for r in level_responders(fx, mistaken["policy_id"], n)]
        assert mistaken["assignee_id"] not in rota
        for wf in WORKFLOWS:
            wf.instruction.format(**wf.draw_params(seed, fx))


# ---- tool catalogue ----------------------------------------------------------------


def test_every_route_declares_its_effect(svc: ServiceClient) -> None:
    assert {
        ("irreversible_send", "native"),
        ("irreversible_send", "none"),
        ("create_unique", "constraint"),
        ("additive", "none"),
        ("set", "none"),
    } <= assert_routes_declare_effects(svc)


def test_workflows_are_consistent(svc: ServiceClient) -> None:
    assert len(WORKFLOWS) == 7  # three of them the stress split's (cascades, a writer)
    assert sorted(w.split for w in WORKFLOWS) == [
        "dev",
        "stress",
        "stress",
        "stress",
        "test",
        "val",
        "val",
    ]
    assert len({w.id for w in WORKFLOWS}) == len(WORKFLOWS)
    boundaries = {s.boundary for w in WORKFLOWS for s in w.scenarios}
    assert {
        Boundary.DURING_MUTATION,
        Boundary.DURING_COMPENSATION,
        Boundary.POST_ACK_PRE_CHECKPOINT,
    } <= boundaries
    assert any(s.ambiguous for w in WORKFLOWS for s in w.scenarios)
    for wf in WORKFLOWS:
        assert_workflow_is_consistent(svc, wf, prefix="tix-")
        for sc in wf.scenarios:
            assert sc.crash_point is None or sc.crash_point == CRASH_POINT
            if sc.boundary is Boundary.DURING_COMPENSATION:
                assert svc.tools[str(sc.target.tool)].compensation, f"{wf.id}/{sc.id}"
        text = json.dumps([wf.instruction, wf.tools]).lower()
        assert not any(w in text for w in ("fault", "inject", "retry", "benchmark", "test"))


# ---- gold plans --------------------------------------------------------------------


@gold_plan_cases(WORKFLOWS)
def test_gold_plan_leaves_invariants_true(svc: ServiceClient, wf: WorkflowSpec, seed: int) -> None:
    assert_gold_plan_completes(svc, wf, seed)


def test_repeated_page_is_a_second_page(svc: ServiceClient) -> None:
    wf = svc.workflow("tix-open-and-page")
    params = params_for(wf)
    run_gold_plan(svc, wf, params, [0, 1, 2, 3, 3])
    assert set(failed_invariants(svc, wf, params)) == {
        "the on-call was paged once",
        "the page has the message",
        "nobody else was paged",
    }
    assert effect_count(svc.commit_log(), wf.required_effects[2], params) == 2


def test_repeated_escalation_goes_a_level_further(svc: ServiceClient) -> None:
    wf = svc.workflow("tix-escalate-incident")
    params = params_for(wf)
    run_gold_plan(svc, wf, params, [0, 1, 1])
    assert set(failed_invariants(svc, wf, params)) == {
        "the severity went up one step",
        "the incident is at level 2",
        "the escalation completed",
        "one escalation only",
        "level 3 was not paged",
    }
    again = svc.call("escalate_incident", step_args(wf, 1, params))
    assert again.status_code == 409 and "last level" in again.json()["detail"]["message"]


@pytest.mark.parametrize(
    ("wf_id", "steps", "broken"),
    [
        # a repeated notice, comment or retraction is a second one
        (
            "tix-resolve-and-notify",
            [0, 1, 2, 2, 3],
            {"the stakeholders got one notice", "no other resolution notice"},
        ),
        (
            "tix-resolve-and-notify",
            [0, 1, 2, 3, 3],
            {"the comment was added once", "the comment is the owner's"},
        ),
        (
            "tix-retract-mistaken-page",
            [0, 1, 2, 3, 3],
            {"one disregard notice", "the notice names the page"},
        ),
        # repeated sets (assignee, resolution) are harmless
        ("tix-retract-mistaken-page", [0, 1, 1, 2, 3], set()),
        ("tix-resolve-and-notify", [0, 1, 1, 2, 3], set()),
    ],
)
def test_repeated_steps_break_exactly(
    svc: ServiceClient, wf_id: str, steps: list[int], broken: set[str]
) -> None:
    wf = svc.workflow(wf_id)
    params = params_for(wf)
    run_gold_plan(svc, wf, params, steps)
    assert set(failed_invariants(svc, wf, params)) == broken


def test_repeated_open_conflicts(svc: ServiceClient) -> None:
    wf = svc.workflow("tix-open-and-page")
    params = params_for(wf)
    args = step_args(wf, 1, params)
    assert svc.call("open_incident", args).status_code == 201
    again = svc.call("open_incident", {**args, "title": "something else"})
    assert again.status_code == 409 and "already exists" in again.json()["detail"]["message"]
    found = svc.call("list_incidents", {"external_ref": params["external_ref"]}).json()
    assert [i["id"] for i in found] == [params["incident_id"]]
    assert found[0]["title"] == params["title"]
    assert svc.ops() == ["incident.open"]


def test_native_key_replays_page(svc: ServiceClient) -> None:
    params = params_for(svc.workflow("tix-escalate-incident"))
    args = {
        "incident_id": params["incident_id"],
        "responder_id": params["level2_0"],
        "message": "m",
    }
    assert_key_replays(svc, "page_responder", args, "page-1", changed={"message": "n"})
    log = svc.commit_log()
    assert [(r["op"], r["idempotency_key"]) for r in log] == [("page.send", "page-1")]
    assert svc.call("page_responder", args).status_code == 201  # no key: another page
    assert len(svc.commit_log()) == 2


def test_key_is_ignored_on_notices_unless_all(svc: ServiceClient) -> None:
    wf = svc.workflow("tix-retract-mistaken-page")
    args = step_args(wf, "retract_page", params_for(wf))
    assert_key_ignored_unless_all(svc, "retract_page", args)


def test_resolved_incident_rules_and_reopen(svc: ServiceClient) -> None:
    fx = build_fixture(SEED)
    done = fx["incidents"][3]
    assert done["status"] == "resolved"
    page = {"responder_id": fx["responders"][0]["id"], "message": "hello"}
    res = svc.call("page_responder", {"incident_id": done["id"], **page})
    assert res.status_code == 409 and "reopen_incident" in res.json()["detail"]["message"]
    res = svc.call("escalate_incident", {"incident_id": done["id"], "reason": "r"})
    assert res.status_code == 409
    live = fx["incidents"][0]["id"]
    notice = {"incident_id": live, "audience": "stakeholders", "message": "over"}
    res = svc.call("send_resolution_notice", notice)
    assert res.status_code == 409 and "resolve_incident" in res.json()["detail"]["message"]
    assert svc.commit_log() == []
    assert svc.call("reopen_incident", {"incident_id": live, "reason": "x"}).status_code == 200
    assert svc.commit_log() == []  # it was not resolved: nothing to undo
    reopened = svc.call("reopen_incident", {"incident_id": done["id"], "reason": "still firing"})
    assert reopened.status_code == 200 and reopened.json()["status"] == "open"
    assert [(r["op"], r["compensation"]) for r in svc.commit_log()] == [("incident.reopen", True)]
    assert svc.call("page_responder", {"incident_id": done["id"], **page}).status_code == 201


# ---- half-done escalations ---------------------------------------------------------


@pytest.mark.usefixtures("crashable")
def test_crash_between_pages_then_resume(svc: ServiceClient) -> None:
    wf = svc.workflow("tix-escalate-incident")
    params = params_for(wf)
    args = step_args(wf, -1, params)
    svc.call_until_crash("escalate_incident", args, CRASH_POINT)
    state = svc.state()
    assert len(state["partial"]) == 1
    assert "in_progress with 1/3 pages sent" in state["partial"][0]
    assert params["level2_1"] in state["partial"][0] and params["level2_2"] in state["partial"][0]
    pages = svc.call("list_pages", {"incident_id": params["incident_id"]}).json()
    assert [p["responder_id"] for p in pages if p["escalation_id"]] == [params["level2_0"]]

    again = svc.call("escalate_incident", args)
    assert again.status_code == 409 and "resume_escalation" in again.json()["detail"]["message"]
    resolve = {"incident_id": params["incident_id"], "resolution": "x"}
    assert svc.call("resolve_incident", resolve).status_code == 409
    esc = svc.call("list_escalations", {"incident_id": params["incident_id"]}).json()[0]
    assert esc["status"] == "in_progress"
    assert esc["not_yet_paged"] == [params["level2_1"], params["level2_2"]]
    done = svc.call("resume_escalation", {"escalation_id": esc["id"]})
    assert done.status_code == 200 and done.json()["status"] == "completed"
    assert done.json()["not_yet_paged"] == []
    assert svc.call("resume_escalation", {"escalation_id": esc["id"]}).status_code == 200
    assert_done(svc, wf, params)


def test_crash_header_is_ignored_when_crash_points_are_off(svc: ServiceClient) -> None:
    svc.configure(crash_points=False)
    wf = svc.workflow("tix-escalate-incident")
    params = params_for(wf)
    args = step_args(wf, -1, params)
    res = svc.call("escalate_incident", args, headers={CRASH_HEADER: CRASH_POINT})
    assert res.status_code == 201
    assert_done(svc, wf, params)


# ---- validation --------------------------------------------------------------------

FX = build_fixture(SEED)
INC = FX["incidents"][0]["id"]
POL = FX["policies"][0]["id"]
RSP = FX["responders"][0]["id"]
PAGE = FX["pages"][0]["id"]
OPEN = {
    "external_ref": "ALRT-1",
    "title": "t",
    "service": "s",
    "severity": "sev2",
    "policy_id": POL,
}
BAD_BODIES: list[tuple[str, str, Any]] = [
    ("POST", "/v1/incidents", {**OPEN, "external_ref": "../../etc/passwd"}),
    ("POST", "/v1/incidents", {**OPEN, "external_ref": "has space"}),
    ("POST", "/v1/incidents", {**OPEN, "external_ref": "A" * 65}),
    ("POST", "/v1/incidents", {**OPEN, "external_ref": "bad\x00ref"}),
    ("POST", "/v1/incidents", {**OPEN, "severity": "sev5"}),
    ("POST", "/v1/incidents", {**OPEN, "severity": 2}),
    ("POST", "/v1/incidents", {**OPEN, "title": ""}),
    ("POST", "/v1/incidents", {**OPEN, "title": "x" * 500}),
    ("POST", "/v1/incidents", {**OPEN, "policy_id": "pol_nope"}),
    ("POST", "/v1/incidents", {**OPEN, "external_ref": FX["incidents"][0]["external_ref"]}),
    ("POST", "/v1/incidents", {"external_ref": "ALRT-2"}),
    ("POST", "/v1/incidents", [1, 2]),
    ("POST", "/v1/incidents", None),
    ("PUT", f"/v1/incidents/{INC}/severity", {"severity": "high"}),
    ("PUT", "/v1/incidents/inc_nope/severity", {"severity": "sev1"}),
    ("PUT", f"/v1/incidents/{INC}/assignee", {"responder_id": "rsp_nope"}),
    ("PUT", f"/v1/incidents/{INC}/assignee", {"responder_id": ""}),
    ("POST", f"/v1/incidents/{INC}/pages", {"responder_id": "rsp_nope", "message": "m"}),
    ("POST", f"/v1/incidents/{INC}/pages", {"responder_id": RSP, "message": ""}),
    ("POST", f"/v1/incidents/{INC}/pages", {"responder_id": RSP, "message": "m" * 501}),
    ("POST", f"/v1/incidents/{INC}/pages", {"responder_id": RSP}),
    ("POST", "/v1/incidents/" + "i" * 65 + "/pages", {"responder_id": RSP, "message": "m"}),
    ("POST", "/v1/pages/page_nope/retractions", {"message": "m"}),
    ("POST", f"/v1/pages/{PAGE}/retractions", {"message": ""}),
    ("POST", f"/v1/incidents/{INC}/resolution-notices", {"audience": "everyone", "message": "m"}),
    ("POST", f"/v1/incidents/{INC}/comments", {"author": "a", "kind": "note", "body": ""}),
    ("POST", f"/v1/incidents/{INC}/comments", {"author": "a", "kind": "note", "body": 5}),
    ("POST", f"/v1/incidents/{INC}/comments", {"author": "a", "body": "no kind"}),
    ("POST", f"/v1/incidents/{INC}/comments", {"author": "a", "kind": "rant", "body": "b"}),
    ("POST", "/v1/incidents/inc_nope/comments", {"author": "a", "kind": "note", "body": "b"}),
    ("POST", f"/v1/incidents/{INC}/resolve", {"resolution": ""}),
    ("POST", f"/v1/incidents/{INC}/reopen", {}),
    ("POST", f"/v1/incidents/{INC}/escalations", {"reason": ""}),
    ("POST", f"/v1/incidents/{INC}/escalations", {"reason": ["a"]}),
    ("POST", "/v1/incidents/inc_nope/escalations", {"reason": "r"}),
    ("POST", "/v1/escalations/esc_nope/resume", {}),
]


@pytest.mark.parametrize(("method", "path", "body"), BAD_BODIES)
def test_bad_bodies_are_4xx(svc: ServiceClient, method: str, path: str, body: Any) -> None:
    assert_rejected(svc, method, path, json=body)


@pytest.mark.parametrize("raw", [*MALFORMED_JSON, b'{"message": "m"'])
def test_malformed_json_is_4xx(svc: ServiceClient, raw: bytes) -> None:
    routes = [
        ("POST", "/v1/incidents"),
        ("PUT", f"/v1/incidents/{INC}/severity"),
        ("POST", f"/v1/incidents/{INC}/pages"),
        ("POST", f"/v1/incidents/{INC}/escalations"),
        ("POST", f"/v1/pages/{PAGE}/retractions"),
    ]
    assert_malformed_json_rejected(svc, routes, raw)


@pytest.mark.parametrize(
    "path",
    [
        "/v1/incidents/..%2F..%2Fetc%2Fpasswd",
        "/v1/incidents/%00",
        "/v1/policies/" + "p" * 65,
        "/v1/policies/..",
        "/v1/incidents/1' OR '1'='1",
    ],
)
def test_odd_ids_are_4xx(svc: ServiceClient, path: str) -> None:
    assert 400 <= svc.public.get(path).status_code < 500


def test_bad_queries_are_4xx(svc: ServiceClient) -> None:
    assert svc.public.get("/v1/incidents", params={"status": "closed"}).status_code == 422
    assert svc.public.get("/v1/incidents", params={"external_ref": "x" * 100}).status_code == 422
    assert svc.public.get("/v1/pages", params={"incident_id": "x" * 100}).status_code == 422
    assert svc.public.get("/v1/incidents/inc_nope").status_code == 404
