"""Cloud domain: seeded state, gold plans against the real routes, duplicates, half-done
cutovers and input validation, all in-process (no network, no service subprocess)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from undobench_gym.contract.specs import Boundary, WorkflowSpec
from undobench_gym.services.domains._service.context import CRASH_HEADER
from undobench_gym.services.domains.cloud.fixture import active, build_fixture
from undobench_gym.services.domains.cloud.service import DOMAIN
from undobench_gym.services.domains.cloud.workflows import WORKFLOWS

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
    retry_after_gold_plan,
    run_gold_plan,
    step_args,
)

pytestmark = pytest.mark.service(DOMAIN)

CRASH_POINTS = {"cloud.after_green_deployed", "cloud.after_endpoint_registered"}

# ---- seeded state ------------------------------------------------------------------


def test_seeded_state_is_deterministic(svc: ServiceClient) -> None:
    assert_reset_is_deterministic(svc)


def test_reset_restores_state_after_changes(svc: ServiceClient) -> None:
    assert_reset_undoes_gold_plan(svc, svc.workflow("cloud-blue-green-cutover"))
    history = build_fixture(SEED)["cutovers"]
    assert [c["id"] for c in svc.state()["tables"]["cl_cutovers"]] == sorted(
        c["id"] for c in history
    )


def test_ids_and_timestamps_follow_the_seed(svc: ServiceClient) -> None:
    assert_gold_plan_is_reproducible(svc, svc.workflow("cloud-canary-release"))


def test_fixture_shape_supports_workflows() -> None:
    for seed in range(30):
        fx = build_fixture(seed)
        ids = [d["id"] for d in fx["deployments"]]
        assert len(set(ids)) == len(ids)
        for service in fx["services"]:
            weights = {
                t["colour"]: t["weight"] for t in fx["traffic"] if t["service_id"] == service["id"]
            }
            assert sum(weights.values()) == 100
            assert active(fx, service["id"], "blue") is not None
        first = fx["services"][0]["id"]
        assert active(fx, first, "green") is not None
        for wf in WORKFLOWS:
            wf.instruction.format(**wf.draw_params(seed, fx))


# ---- tool catalogue ----------------------------------------------------------------


def test_every_route_declares_its_effect(svc: ServiceClient) -> None:
    classes = assert_routes_declare_effects(svc)
    assert {c for c, _ in classes} <= {"additive", "set", "create_unique"}
    assert {
        ("additive", "native"),
        ("additive", "none"),
        ("create_unique", "constraint"),
    } <= classes


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
    assert {Boundary.DURING_MUTATION, Boundary.DURING_COMPENSATION} <= boundaries
    assert any(s.ambiguous for w in WORKFLOWS for s in w.scenarios)
    for wf in WORKFLOWS:
        assert_workflow_is_consistent(svc, wf, prefix="cloud-")
        for sc in wf.scenarios:
            assert sc.crash_point is None or sc.crash_point in CRASH_POINTS
        text = json.dumps([wf.instruction, wf.tools]).lower()
        assert not any(w in text for w in ("fault", "inject", "retry", "benchmark", "test"))


# ---- gold plans --------------------------------------------------------------------


@gold_plan_cases(WORKFLOWS)
def test_gold_plan_leaves_invariants_true(svc: ServiceClient, wf: WorkflowSpec, seed: int) -> None:
    assert_gold_plan_completes(svc, wf, seed)


def test_repeated_deploy_is_a_second_revision(svc: ServiceClient) -> None:
    """A retried deploy after a lost response: the agent goes on with the second one."""
    wf = svc.workflow("cloud-canary-release")
    params = params_for(wf)
    run_gold_plan(svc, wf, params, [0, 1, 1, 2, 3])
    assert set(failed_invariants(svc, wf, params)) == {
        "the release was deployed once",
        "no extra revision was deployed",
        "green is in the catalog",
    }
    assert effect_count(svc.commit_log(), wf.required_effects[0], params) == 2


@pytest.mark.parametrize(
    ("wf_id", "steps", "broken"),
    [
        # a repeated restart is a second restart
        (
            "cloud-rotate-secrets",
            [0, 1, 2, 2],
            {
                "the instances were restarted once",
                "one restart more in the activity log than before the task",
            },
        ),
        # repeated sets (secret value, traffic split) are harmless
        ("cloud-rotate-secrets", [0, 1, 1, 2], set()),
        ("cloud-canary-release", [0, 1, 2, 3, 3], set()),
    ],
)
def test_repeated_steps_break_exactly(
    svc: ServiceClient, wf_id: str, steps: list[int], broken: set[str]
) -> None:
    wf = svc.workflow(wf_id)
    params = params_for(wf)
    run_gold_plan(svc, wf, params, steps)
    assert set(failed_invariants(svc, wf, params)) == broken


def test_repeated_rollback_rolls_forward_again(svc: ServiceClient) -> None:
    wf = svc.workflow("cloud-rollback-bad-release")
    params = params_for(wf)
    run_gold_plan(svc, wf, params, [0, 1, 2, 3])
    again = svc.call("rollback_deployment", {"service_id": params["service_id"], "colour": "green"})
    assert again.status_code == 201 and again.json()["image"] == params["bad_image"]
    assert set(failed_invariants(svc, wf, params)) == {
        "green runs the previous image again",
        "no extra revision was deployed",
    }


def test_repeated_cutover_and_registration_conflict(svc: ServiceClient) -> None:
    wf = svc.workflow("cloud-blue-green-cutover")
    params, res = retry_after_gold_plan(svc, wf, "start_cutover")
    assert res.status_code == 409 and "already exists" in res.json()["detail"]["message"]
    body = {"service_id": params["service_id"], "deployment_id": params["green_id"]}
    again = svc.call("register_endpoint", body)
    assert again.status_code == 409 and "already registered" in again.json()["detail"]["message"]
    assert_done(svc, wf, params)


def test_native_key_replays_create_deployment(svc: ServiceClient) -> None:
    wf = svc.workflow("cloud-canary-release")
    args = step_args(wf, 1, params_for(wf))
    first = assert_key_replays(
        svc, "create_deployment", args, "deploy-1", changed={"replicas": args["replicas"] + 1}
    )
    assert [r["op"] for r in svc.commit_log()] == ["deployment.create"]
    assert svc.commit_log()[0]["idempotency_key"] == "deploy-1"
    # Without a key, every call is a new revision.
    assert svc.call("create_deployment", args).json()["revision"] == first.json()["revision"] + 1


def test_key_is_ignored_on_non_native_routes_unless_all(svc: ServiceClient) -> None:
    wf = svc.workflow("cloud-rotate-secrets")
    assert_key_ignored_unless_all(svc, "restart_instances", step_args(wf, 2, params_for(wf)))


# ---- blue/green guards -------------------------------------------------------------


def test_traffic_rules(svc: ServiceClient) -> None:
    fx = build_fixture(SEED)
    sid = fx["services"][1]["id"]
    res = svc.call("set_traffic", {"service_id": sid, "blue": 60, "green": 50})
    assert res.status_code == 422
    # Green's earlier release is still deployed and registered: it may take traffic back.
    assert svc.call("set_traffic", {"service_id": sid, "blue": 90, "green": 10}).is_success
    assert svc.call("set_traffic", {"service_id": sid, "blue": 100, "green": 0}).is_success
    dep = svc.call(
        "create_deployment",
        {"service_id": sid, "colour": "green", "image": "registry.internal/x:1.0.0", "replicas": 1},
    ).json()
    res = svc.call("set_traffic", {"service_id": sid, "blue": 90, "green": 10})
    assert res.status_code == 409 and "register_endpoint" in res.json()["detail"]["message"]
    assert svc.call("register_endpoint", {"service_id": sid, "deployment_id": dep["id"]}).is_success
    assert svc.call("set_traffic", {"service_id": sid, "blue": 90, "green": 10}).is_success
    res = svc.call(
        "create_deployment",
        {"service_id": sid, "colour": "green", "image": "registry.internal/x:1.0.1", "replicas": 1},
    )
    assert res.status_code == 409 and "set_traffic" in res.json()["detail"]["message"]
    res = svc.call("deregister_endpoint", {"service_id": sid, "deployment_id": dep["id"]})
    assert res.status_code == 409
    res = svc.call("scale_deployment", {"deployment_id": dep["id"], "replicas": 0})
    assert res.status_code == 409


def test_rollback_guards(svc: ServiceClient) -> None:
    wf = svc.workflow("cloud-rollback-bad-release")
    params = params_for(wf)
    sid = params["service_id"]
    res = svc.call("rollback_deployment", {"service_id": sid, "colour": "green"})
    assert res.status_code == 409 and "set_traffic" in res.json()["detail"]["message"]
    res = svc.call("rollback_deployment", {"service_id": sid, "colour": "purple"})
    assert res.status_code == 422
    res = svc.call("deregister_endpoint", {"service_id": sid, "deployment_id": "dep_nope"})
    assert res.status_code == 404
    old = build_fixture(SEED)["deployments"][0]
    assert old["status"] == "superseded"
    res = svc.call("restart_instances", {"deployment_id": old["id"], "reason": "x"})
    assert res.status_code == 409 and "superseded" in res.json()["detail"]["message"]
    assert svc.commit_log() == []


# ---- half-done cutovers ------------------------------------------------------------


@pytest.mark.usefixtures("crashable")
@pytest.mark.parametrize(
    ("point", "step", "lacking"),
    [
        ("cloud.after_green_deployed", "deployed", "not yet healthy"),
        ("cloud.after_endpoint_registered", "registered", "the traffic switch is missing"),
    ],
)
def test_crash_mid_cutover_then_resume(
    svc: ServiceClient, point: str, step: str, lacking: str
) -> None:
    wf = svc.workflow("cloud-blue-green-cutover")
    params = params_for(wf)
    args = step_args(wf, -1, params)
    svc.call_until_crash("start_cutover", args, point)
    state = svc.state()
    assert len(state["partial"]) == 1
    assert f"after step '{step}'" in state["partial"][0] and lacking in state["partial"][0]
    assert params["green_id"] in state["partial"][0]
    traffic = {
        t["colour"]: t["weight"]
        for t in state["tables"]["cl_traffic"]
        if t["service_id"] == params["service_id"]
    }
    assert traffic == {"blue": 100, "green": 0}  # the new release never got the switch

    again = svc.call("start_cutover", args)
    assert again.status_code == 409 and "resume_cutover" in again.json()["detail"]["message"]
    other = svc.call("start_cutover", {**args, "change_id": "CHG-OTHER"})
    assert other.status_code == 409 and "in progress" in other.json()["detail"]["message"]
    deploy = {
        "service_id": params["service_id"],
        "colour": "blue",
        "image": params["image"],
        "replicas": 1,
    }
    assert svc.call("create_deployment", deploy).status_code == 409

    cut = svc.call("list_cutovers", {"change_id": params["change_id"]}).json()[0]
    assert cut["status"] == "in_progress" and cut["step"] == step
    done = svc.call("resume_cutover", {"cutover_id": cut["id"]})
    assert done.status_code == 200 and done.json()["status"] == "completed"
    assert svc.call("resume_cutover", {"cutover_id": cut["id"]}).status_code == 200
    assert_done(svc, wf, params)


def test_crash_header_is_ignored_when_crash_points_are_off(svc: ServiceClient) -> None:
    svc.configure(crash_points=False)
    wf = svc.workflow("cloud-blue-green-cutover")
    params = params_for(wf)
    headers = {CRASH_HEADER: "cloud.after_green_deployed"}
    res = svc.call("start_cutover", step_args(wf, -1, params), headers=headers)
    assert res.status_code == 201
    assert_done(svc, wf, params)


# ---- validation --------------------------------------------------------------------

FX = build_fixture(SEED)
SID = FX["services"][1]["id"]
_BLUE = active(FX, SID, "blue")
assert _BLUE is not None
DID = _BLUE["id"]
IMG = "registry.internal/search:1.2.3"
BAD_BODIES: list[tuple[str, str, Any]] = [
    ("POST", f"/v1/services/{SID}/deployments", {"colour": "red", "image": IMG, "replicas": 1}),
    ("POST", f"/v1/services/{SID}/deployments", {"colour": "green", "image": IMG, "replicas": 0}),
    ("POST", f"/v1/services/{SID}/deployments", {"colour": "green", "image": IMG, "replicas": "2"}),
    (
        "POST",
        f"/v1/services/{SID}/deployments",
        {"colour": "green", "image": IMG, "replicas": True},
    ),
    ("POST", f"/v1/services/{SID}/deployments", {"colour": "green", "image": IMG, "replicas": 999}),
    (
        "POST",
        f"/v1/services/{SID}/deployments",
        {"colour": "green", "image": "no tag", "replicas": 1},
    ),
    (
        "POST",
        f"/v1/services/{SID}/deployments",
        {"colour": "green", "image": "../x:1", "replicas": 1},
    ),
    ("POST", f"/v1/services/{SID}/deployments", {"colour": "green", "replicas": 1}),
    ("POST", f"/v1/services/{SID}/deployments", [1, 2]),
    ("POST", f"/v1/services/{SID}/deployments", None),
    ("POST", "/v1/services/svc_nope/deployments", {"colour": "green", "image": IMG, "replicas": 1}),
    (
        "POST",
        "/v1/services/" + "s" * 100 + "/deployments",
        {"colour": "green", "image": IMG, "replicas": 1},
    ),
    ("PUT", f"/v1/deployments/{DID}/replicas", {"replicas": -1}),
    ("PUT", f"/v1/deployments/{DID}/replicas", {"replicas": 1.5}),
    ("PUT", "/v1/deployments/dep_nope/replicas", {"replicas": 2}),
    ("POST", f"/v1/deployments/{DID}/restarts", {"reason": ""}),
    ("POST", f"/v1/deployments/{DID}/restarts", {"reason": "x" * 500}),
    ("POST", f"/v1/deployments/{DID}/restarts", {}),
    ("PUT", f"/v1/services/{SID}/traffic", {"blue": 101, "green": -1}),
    ("PUT", f"/v1/services/{SID}/traffic", {"blue": 50, "green": 40}),
    ("PUT", f"/v1/services/{SID}/traffic", {"blue": "100", "green": 0}),
    ("PUT", f"/v1/services/{SID}/traffic", {"blue": 100}),
    ("POST", f"/v1/services/{SID}/endpoints", {"deployment_id": ""}),
    ("POST", f"/v1/services/{SID}/endpoints", {"deployment_id": "dep_nope"}),
    ("POST", f"/v1/services/{SID}/endpoints", {"deployment_id": DID}),  # already registered
    ("DELETE", f"/v1/services/{SID}/endpoints/dep_nope", None),
    ("POST", f"/v1/services/{SID}/cutovers", {"change_id": "../etc", "image": IMG, "replicas": 1}),
    ("POST", f"/v1/services/{SID}/cutovers", {"change_id": "CHG 1", "image": IMG, "replicas": 1}),
    ("POST", f"/v1/services/{SID}/cutovers", {"change_id": "C" * 65, "image": IMG, "replicas": 1}),
    ("POST", f"/v1/services/{SID}/cutovers", {"change_id": "CHG-1", "image": IMG}),
    ("POST", "/v1/cutovers/cut_nope/resume", {}),
    ("POST", f"/v1/services/{SID}/rollbacks", {"colour": "green"}),  # no green history
    ("POST", f"/v1/services/{SID}/rollbacks", {"colour": 1}),
]


@pytest.mark.parametrize(("method", "path", "body"), BAD_BODIES)
def test_bad_bodies_are_4xx(svc: ServiceClient, method: str, path: str, body: Any) -> None:
    assert_rejected(svc, method, path, json=body)


@pytest.mark.parametrize("raw", [*MALFORMED_JSON, b'{"replicas": 5'])
def test_malformed_json_is_4xx(svc: ServiceClient, raw: bytes) -> None:
    routes = [
        ("POST", f"/v1/services/{SID}/deployments"),
        ("PUT", f"/v1/deployments/{DID}/replicas"),
        ("PUT", f"/v1/services/{SID}/traffic"),
        ("POST", f"/v1/services/{SID}/cutovers"),
        ("POST", f"/v1/services/{SID}/rollbacks"),
    ]
    assert_malformed_json_rejected(svc, routes, raw)


@pytest.mark.parametrize(
    "path",
    [
        "/v1/services/..%2F..%2Fetc%2Fpasswd",
        "/v1/services/%00",
        "/v1/deployments/" + "d" * 65,
        "/v1/cutovers/..",
        "/v1/services/1' OR '1'='1/endpoints",
    ],
)
def test_odd_ids_are_4xx(svc: ServiceClient, path: str) -> None:
    assert 400 <= svc.public.get(path).status_code < 500


def test_bad_queries_are_4xx(svc: ServiceClient) -> None:
    assert svc.public.get("/v1/deployments", params={"colour": "red"}).status_code == 422
    assert svc.public.get("/v1/events", params={"limit": 0}).status_code == 422
    assert svc.public.get("/v1/events", params={"limit": "many"}).status_code == 422
    assert svc.public.get("/v1/services", params={"name": "x" * 100}).status_code == 422
    assert svc.public.get("/v1/services/svc_nope").status_code == 404
