"""Cloud domain: seeded state, gold plans against the real routes, duplicates, half-done
cutovers and input validation, all in-process (no network, no service subprocess)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from httpx import Response
from undobench_gym.envs._service.app import create_apps
from undobench_gym.envs._service.context import ServiceContext
from undobench_gym.envs.cloud.fixture import active, build_fixture
from undobench_gym.envs.cloud.service import DOMAIN
from undobench_gym.envs.cloud.workflows import WORKFLOWS

from undobench_gym.specs import Boundary, EffectExpectation, StatePredicate, WorkflowSpec, fill

SEED = 3
CRASH = "x-undobench-crash-point"
CRASH_POINTS = {"cloud.after_green_deployed", "cloud.after_endpoint_registered"}


class Service:
    """The public and admin apps of one cloud service, plus a tool-name router."""

    def __init__(self, ctx: ServiceContext, public: FastAPI, admin: FastAPI) -> None:
        self.ctx = ctx
        self.app = public
        self.public = TestClient(public)
        self.admin = TestClient(admin)
        self.routes = routes_by_tool(public)

    def reset(self, seed: int = SEED) -> str:
        res = self.admin.post("/admin/reset", json={"seed": seed})
        assert res.status_code == 200, res.text
        return str(res.json()["hash"])

    def state(self) -> dict[str, Any]:
        res = self.admin.get("/admin/state")
        assert res.status_code == 200, res.text
        return dict(res.json())

    def commit_log(self) -> list[dict[str, Any]]:
        return list(self.admin.get("/admin/commit-log").json())

    def call(self, tool: str, args: dict[str, Any] | None = None, **kw: Any) -> Response:
        """Call a tool the way an agent would: path params in the URL, the rest in the query
        (GET) or the JSON body."""
        method, path = self.routes[tool]
        rest = dict(args or {})
        for name in re.findall(r"\{(\w+)\}", path):
            path = path.replace(f"{{{name}}}", str(rest.pop(name)))
        if method == "get":
            return self.public.get(path, params=rest, **kw)
        if method == "delete":
            return self.public.request("DELETE", path, **kw)
        return self.public.request(method.upper(), path, json=rest, **kw)


def routes_by_tool(app: FastAPI) -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    for path, ops in app.openapi()["paths"].items():
        for method, op in ops.items():
            out[op["operationId"]] = (method, path)
    return out


@pytest.fixture
def svc(tmp_path: Path) -> Iterator[Service]:
    ctx = ServiceContext.open(DOMAIN, tmp_path)
    public, admin = create_apps(DOMAIN, ctx)
    service = Service(ctx, public, admin)
    service.reset()
    yield service
    ctx.engine.dispose()


# ---- evaluation helpers ------------------------------------------------------------


def resolve(value: Any, responses: list[Any]) -> Any:
    """`@N.a.b` -> field a.b of the N-th gold step's response body."""
    if isinstance(value, str) and (m := re.fullmatch(r"@(\d+)\.([\w.]+)", value)):
        out = responses[int(m.group(1))]
        for part in m.group(2).split("."):
            out = out[int(part)] if isinstance(out, list) else out[part]
        return out
    if isinstance(value, dict):
        return {k: resolve(v, responses) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, responses) for v in value]
    return value


def run_steps(svc: Service, wf: WorkflowSpec, params: dict[str, Any], steps: list[int]) -> None:
    """Run the gold steps with these indexes in this order (a repeat re-runs a step)."""
    responses: dict[int, Any] = {}
    for i in steps:
        step = wf.gold_plan[i]
        args = resolve(fill(step.arguments, params), [responses.get(n) for n in range(i)])
        res = svc.call(step.tool, args)
        assert res.status_code < 300, f"{wf.id} {step.tool}: {res.status_code} {res.text}"
        responses[i] = res.json()


def run_gold(svc: Service, wf: WorkflowSpec, params: dict[str, Any]) -> None:
    run_steps(svc, wf, params, list(range(len(wf.gold_plan))))


def evaluate(pred: StatePredicate, params: dict[str, Any], tables: dict[str, Any]) -> bool:
    where = fill(pred.where, params)
    rows = [r for r in tables[pred.table] if all(r.get(k) == v for k, v in where.items())]
    expected = fill(pred.value, params)
    if pred.op == "count":
        return len(rows) == expected
    if len(rows) != 1 or pred.field is None:
        return False
    actual = rows[0][pred.field]
    checks = {
        "eq": lambda: actual == expected,
        "ne": lambda: actual != expected,
        "ge": lambda: actual >= expected,
        "le": lambda: actual <= expected,
    }
    return bool(checks[pred.op]())


def failing(wf: WorkflowSpec, params: dict[str, Any], state: dict[str, Any]) -> list[str]:
    return [p.description for p in wf.invariants if not evaluate(p, params, state["tables"])]


def effect_count(
    log: list[dict[str, Any]], effect: EffectExpectation, params: dict[str, Any]
) -> int:
    identity = fill(effect.identity, params)
    return sum(1 for r in log if r["op"] == effect.op and json.loads(r["identity"]) == identity)


def params_for(wf: WorkflowSpec, seed: int = SEED) -> dict[str, Any]:
    return wf.draw_params(seed, build_fixture(seed))


def workflow(wf_id: str) -> WorkflowSpec:
    return next(w for w in WORKFLOWS if w.id == wf_id)


def assert_done(svc: Service, wf: WorkflowSpec, params: dict[str, Any]) -> None:
    state = svc.state()
    assert failing(wf, params, state) == []
    assert state["partial"] == []
    log = svc.commit_log()
    for effect in wf.required_effects:
        assert effect_count(log, effect, params) == 1, effect
    for effect in wf.forbidden_effects:
        assert effect_count(log, effect, params) == 0, effect


# ---- seeded state ------------------------------------------------------------------


def test_seeded_state_is_deterministic(svc: Service) -> None:
    first = svc.reset(SEED)
    assert svc.reset(SEED) == first
    assert svc.state()["hash"] == first
    assert svc.reset(SEED + 1) != first
    assert build_fixture(SEED) == build_fixture(SEED)
    assert build_fixture(SEED) != build_fixture(SEED + 1)


def test_reset_restores_state_after_changes(svc: Service) -> None:
    fresh = svc.reset(SEED)
    wf = workflow("cloud-blue-green-cutover")
    run_gold(svc, wf, params_for(wf))
    assert svc.state()["hash"] != fresh
    assert svc.reset(SEED) == fresh
    assert svc.commit_log() == []
    assert svc.state()["tables"]["cl_cutovers"] == []


def test_ids_and_timestamps_follow_the_seed(svc: Service) -> None:
    wf = workflow("cloud-canary-release")
    params = params_for(wf)
    run_gold(svc, wf, params)
    first = svc.state()
    svc.reset(SEED)
    run_gold(svc, wf, params)
    assert svc.state()["hash"] == first["hash"]


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


def test_every_route_declares_its_effect(svc: Service) -> None:
    classes = set()
    for path, ops in svc.app.openapi()["paths"].items():
        for method, op in ops.items():
            meta = op["x-undobench"]
            assert op["operationId"] and op.get("description"), path
            if method == "get":
                assert meta == {"read_only": True}, path
            else:
                assert meta["effect_class"] in {"additive", "set", "create_unique"}, path
                assert meta["op"] and meta["identity"], path
                classes.add((meta["effect_class"], meta["idempotency"]))
                keyed = any(p["name"] == "Idempotency-Key" for p in op.get("parameters", []))
                assert keyed == (meta["idempotency"] == "native"), path
    assert {
        ("additive", "native"),
        ("additive", "none"),
        ("create_unique", "constraint"),
    } <= classes


def test_workflows_are_consistent(svc: Service) -> None:
    assert len(WORKFLOWS) == 4
    assert sorted(w.split for w in WORKFLOWS) == ["dev", "test", "val", "val"]
    assert len({w.id for w in WORKFLOWS}) == len(WORKFLOWS)
    boundaries = {s.boundary for w in WORKFLOWS for s in w.scenarios}
    assert {Boundary.DURING_MUTATION, Boundary.DURING_COMPENSATION} <= boundaries
    assert any(s.ambiguous for w in WORKFLOWS for s in w.scenarios)
    for wf in WORKFLOWS:
        assert wf.domain == "cloud" and wf.id.startswith("cloud-")
        gold_tools = [s.tool for s in wf.gold_plan]
        for tool in [*wf.tools, *gold_tools]:
            assert tool in svc.routes, f"{wf.id}: unknown tool {tool}"
        assert set(gold_tools) <= set(wf.tools)
        for sc in wf.scenarios:
            assert sc.target.tool in gold_tools, f"{wf.id}/{sc.id}"
            assert sc.crash_point is None or sc.crash_point in CRASH_POINTS
        if wf.split == "test":
            assert any(s.boundary is Boundary.POST_MUTATION_PRE_ACK for s in wf.scenarios)
        text = json.dumps([wf.instruction, wf.tools]).lower()
        assert not any(w in text for w in ("fault", "inject", "retry", "benchmark", "test"))


# ---- gold plans --------------------------------------------------------------------


@pytest.mark.parametrize("seed", [SEED, 11, 12345])
@pytest.mark.parametrize("wf", WORKFLOWS, ids=lambda w: w.id)
def test_gold_plan_leaves_invariants_true(svc: Service, wf: WorkflowSpec, seed: int) -> None:
    svc.reset(seed)
    params = params_for(wf, seed)
    assert failing(wf, params, svc.state())  # the task is not already done
    run_gold(svc, wf, params)
    assert_done(svc, wf, params)


def test_repeated_deploy_is_a_second_revision(svc: Service) -> None:
    """A retried deploy after a lost response: the agent goes on with the second one."""
    wf = workflow("cloud-canary-release")
    params = params_for(wf)
    run_steps(svc, wf, params, [0, 1, 1, 2, 3])
    state = svc.state()
    assert set(failing(wf, params, state)) == {
        "the release was deployed once",
        "no extra revision was deployed",
        "green is in the catalog",
    }
    assert effect_count(svc.commit_log(), wf.required_effects[0], params) == 2


def test_repeated_restart_breaks_invariants(svc: Service) -> None:
    wf = workflow("cloud-rotate-secrets")
    params = params_for(wf)
    run_steps(svc, wf, params, [0, 1, 2, 2])
    assert set(failing(wf, params, svc.state())) == {
        "the instances were restarted once",
        "one restart in the activity log",
    }


def test_repeated_rollback_rolls_forward_again(svc: Service) -> None:
    wf = workflow("cloud-rollback-bad-release")
    params = params_for(wf)
    run_steps(svc, wf, params, [0, 1, 2, 3])
    again = svc.call("rollback_deployment", {"service_id": params["service_id"], "colour": "green"})
    assert again.status_code == 201 and again.json()["image"] == params["bad_image"]
    assert set(failing(wf, params, svc.state())) == {
        "green runs the previous image again",
        "no extra revision was deployed",
    }


def test_repeated_sets_are_harmless(svc: Service) -> None:
    wf = workflow("cloud-rotate-secrets")
    params = params_for(wf)
    run_steps(svc, wf, params, [0, 1, 1, 2])
    assert failing(wf, params, svc.state()) == []
    wf = workflow("cloud-canary-release")
    svc.reset()
    params = params_for(wf)
    run_steps(svc, wf, params, [0, 1, 2, 3, 3])
    assert failing(wf, params, svc.state()) == []


def test_repeated_cutover_and_registration_conflict(svc: Service) -> None:
    wf = workflow("cloud-blue-green-cutover")
    params = params_for(wf)
    run_gold(svc, wf, params)
    res = svc.call("start_cutover", fill(wf.gold_plan[-1].arguments, params))
    assert res.status_code == 409 and "already exists" in res.json()["detail"]["message"]
    body = {"service_id": params["service_id"], "deployment_id": params["green_id"]}
    again = svc.call("register_endpoint", body)
    assert again.status_code == 409 and "already registered" in again.json()["detail"]["message"]
    assert_done(svc, wf, params)


def test_native_key_replays_create_deployment(svc: Service) -> None:
    wf = workflow("cloud-canary-release")
    params = params_for(wf)
    args = fill(wf.gold_plan[1].arguments, params)
    key = {"Idempotency-Key": "deploy-1"}
    first, again = (
        svc.call("create_deployment", args, headers=key),
        svc.call("create_deployment", args, headers=key),
    )
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json() and again.headers["idempotent-replayed"] == "true"
    other = svc.call("create_deployment", {**args, "replicas": args["replicas"] + 1}, headers=key)
    assert other.status_code == 422
    assert [r["op"] for r in svc.commit_log()] == ["deployment.create"]
    assert svc.commit_log()[0]["idempotency_key"] == "deploy-1"
    # Without a key, every call is a new revision.
    assert svc.call("create_deployment", args).json()["revision"] == first.json()["revision"] + 1


def test_key_is_ignored_on_non_native_routes_unless_all(svc: Service) -> None:
    wf = workflow("cloud-rotate-secrets")
    params = params_for(wf)
    args = fill(wf.gold_plan[2].arguments, params)
    key = {"Idempotency-Key": "r-1"}
    assert svc.call("restart_instances", args, headers=key).status_code == 201
    assert svc.call("restart_instances", args, headers=key).status_code == 201
    assert len(svc.commit_log()) == 2
    svc.reset()
    assert svc.admin.post("/admin/config", json={"idempotency_mode": "all"}).status_code == 200
    assert svc.call("restart_instances", args, headers=key).status_code == 201
    replay = svc.call("restart_instances", args, headers=key)
    assert replay.headers.get("idempotent-replayed") == "true"
    assert len(svc.commit_log()) == 1


# ---- blue/green guards -------------------------------------------------------------


def test_traffic_rules(svc: Service) -> None:
    fx = build_fixture(SEED)
    sid = fx["services"][1]["id"]
    res = svc.call("set_traffic", {"service_id": sid, "blue": 60, "green": 50})
    assert res.status_code == 422
    res = svc.call("set_traffic", {"service_id": sid, "blue": 90, "green": 10})
    assert res.status_code == 409 and "no active green" in res.json()["detail"]["message"]
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


def test_rollback_guards(svc: Service) -> None:
    wf = workflow("cloud-rollback-bad-release")
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


class Crashed(Exception):
    """Stands in for the process exit of an armed crash point."""


@pytest.fixture
def crashable(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_exit(code: int) -> None:
        raise Crashed(code)

    monkeypatch.setattr(os, "_exit", fake_exit)


@pytest.mark.usefixtures("crashable")
@pytest.mark.parametrize(
    ("point", "step", "lacking"),
    [
        ("cloud.after_green_deployed", "deployed", "not yet healthy"),
        ("cloud.after_endpoint_registered", "registered", "the traffic switch is missing"),
    ],
)
def test_crash_mid_cutover_then_resume(svc: Service, point: str, step: str, lacking: str) -> None:
    wf = workflow("cloud-blue-green-cutover")
    params = params_for(wf)
    args = fill(wf.gold_plan[-1].arguments, params)
    with pytest.raises(Crashed):
        svc.call("start_cutover", args, headers={CRASH: point})
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


def test_crash_header_is_ignored_when_crash_points_are_off(svc: Service) -> None:
    assert svc.admin.post("/admin/config", json={"crash_points": False}).is_success
    wf = workflow("cloud-blue-green-cutover")
    params = params_for(wf)
    args = fill(wf.gold_plan[-1].arguments, params)
    res = svc.call("start_cutover", args, headers={CRASH: "cloud.after_green_deployed"})
    assert res.status_code == 201
    assert_done(svc, wf, params)


# ---- validation --------------------------------------------------------------------

FX = build_fixture(SEED)
SID = FX["services"][1]["id"]
DID = FX["deployments"][3]["id"]
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
def test_bad_bodies_are_4xx(svc: Service, method: str, path: str, body: Any) -> None:
    res = svc.public.request(method, path, json=body)
    assert 400 <= res.status_code < 500, res.text
    assert svc.commit_log() == []


@pytest.mark.parametrize("raw", [b"{not json", b"", b"\xff\xfe", b'{"replicas": 5'])
def test_malformed_json_is_4xx(svc: Service, raw: bytes) -> None:
    headers = {"content-type": "application/json"}
    for method, path in (
        ("POST", f"/v1/services/{SID}/deployments"),
        ("PUT", f"/v1/deployments/{DID}/replicas"),
        ("PUT", f"/v1/services/{SID}/traffic"),
        ("POST", f"/v1/services/{SID}/cutovers"),
        ("POST", f"/v1/services/{SID}/rollbacks"),
    ):
        res = svc.public.request(method, path, content=raw, headers=headers)
        assert 400 <= res.status_code < 500, (path, res.status_code, res.text)
    assert svc.commit_log() == []


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
def test_odd_ids_are_4xx(svc: Service, path: str) -> None:
    assert 400 <= svc.public.get(path).status_code < 500


def test_bad_queries_are_4xx(svc: Service) -> None:
    assert svc.public.get("/v1/deployments", params={"colour": "red"}).status_code == 422
    assert svc.public.get("/v1/events", params={"limit": 0}).status_code == 422
    assert svc.public.get("/v1/events", params={"limit": "many"}).status_code == 422
    assert svc.public.get("/v1/services", params={"name": "x" * 100}).status_code == 422
    assert svc.public.get("/v1/services/svc_nope").status_code == 404
