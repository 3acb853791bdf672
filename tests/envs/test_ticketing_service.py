"""Ticketing domain: seeded state, gold plans against the real routes, duplicate pages and
notices, half-done escalations and input validation, all in-process (no network)."""

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
from undobench_gym.envs.ticketing.fixture import LEVEL_SIZES, build_fixture, level_responders
from undobench_gym.envs.ticketing.service import DOMAIN
from undobench_gym.envs.ticketing.workflows import WORKFLOWS

from undobench_gym.specs import Boundary, EffectExpectation, StatePredicate, WorkflowSpec, fill

SEED = 3
CRASH = "x-undobench-crash-point"
CRASH_POINTS = {"ticketing.after_first_page"}


class Service:
    """The public and admin apps of one ticketing service, plus a tool-name router."""

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
    wf = workflow("tix-escalate-incident")
    run_gold(svc, wf, params_for(wf))
    assert svc.state()["hash"] != fresh
    assert svc.reset(SEED) == fresh
    assert svc.commit_log() == []
    assert svc.state()["tables"]["tk_escalations"] == []


def test_ids_and_timestamps_follow_the_seed(svc: Service) -> None:
    wf = workflow("tix-open-and-page")
    params = params_for(wf)
    run_gold(svc, wf, params)
    first = svc.state()
    svc.reset(SEED)
    run_gold(svc, wf, params)
    assert svc.state()["hash"] == first["hash"]


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


def test_every_route_declares_its_effect(svc: Service) -> None:
    classes = set()
    for path, ops in svc.app.openapi()["paths"].items():
        for method, op in ops.items():
            meta = op["x-undobench"]
            assert op["operationId"] and op.get("description"), path
            if method == "get":
                assert meta == {"read_only": True}, path
            else:
                assert meta["effect_class"] in {
                    "additive",
                    "set",
                    "create_unique",
                    "irreversible_send",
                }, path
                assert meta["op"] and meta["identity"], path
                classes.add((meta["effect_class"], meta["idempotency"]))
                keyed = any(p["name"] == "Idempotency-Key" for p in op.get("parameters", []))
                assert keyed == (meta["idempotency"] == "native"), path
    assert {
        ("irreversible_send", "native"),
        ("irreversible_send", "none"),
        ("create_unique", "constraint"),
        ("additive", "none"),
        ("set", "none"),
    } <= classes


def test_workflows_are_consistent(svc: Service) -> None:
    assert len(WORKFLOWS) == 4
    assert sorted(w.split for w in WORKFLOWS) == ["dev", "test", "val", "val"]
    assert len({w.id for w in WORKFLOWS}) == len(WORKFLOWS)
    boundaries = {s.boundary for w in WORKFLOWS for s in w.scenarios}
    assert {
        Boundary.DURING_MUTATION,
        Boundary.DURING_COMPENSATION,
        Boundary.POST_ACK_PRE_CHECKPOINT,
    } <= boundaries
    assert any(s.ambiguous for w in WORKFLOWS for s in w.scenarios)
    for wf in WORKFLOWS:
        assert wf.domain == "ticketing" and wf.id.startswith("tix-")
        gold_tools = [s.tool for s in wf.gold_plan]
        for tool in [*wf.tools, *gold_tools]:
            assert tool in svc.routes, f"{wf.id}: unknown tool {tool}"
        assert set(gold_tools) <= set(wf.tools)
        for sc in wf.scenarios:
            assert sc.target.tool in gold_tools, f"{wf.id}/{sc.id}"
            assert sc.crash_point is None or sc.crash_point in CRASH_POINTS
            if sc.boundary in (Boundary.DURING_COMPENSATION, Boundary.POST_ACK_PRE_CHECKPOINT):
                method, path = svc.routes[str(sc.target.tool)]
                meta = svc.app.openapi()["paths"][path][method]["x-undobench"]
                assert "effect_class" in meta  # a mutating call
                if sc.boundary is Boundary.DURING_COMPENSATION:
                    assert meta["compensation"], f"{wf.id}/{sc.id}"
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


def test_repeated_page_is_a_second_page(svc: Service) -> None:
    wf = workflow("tix-open-and-page")
    params = params_for(wf)
    run_steps(svc, wf, params, [0, 1, 2, 3, 3])
    assert set(failing(wf, params, svc.state())) == {
        "the on-call was paged once",
        "nobody else was paged",
    }
    assert effect_count(svc.commit_log(), wf.required_effects[2], params) == 2


def test_repeated_escalation_goes_a_level_further(svc: Service) -> None:
    wf = workflow("tix-escalate-incident")
    params = params_for(wf)
    run_steps(svc, wf, params, [0, 1, 1])
    assert set(failing(wf, params, svc.state())) == {
        "the severity went up one step",
        "the incident is at level 2",
        "the escalation completed",
        "one escalation only",
        "level 3 was not paged",
    }
    again = svc.call("escalate_incident", fill(wf.gold_plan[1].arguments, params))
    assert again.status_code == 409 and "last level" in again.json()["detail"]["message"]


@pytest.mark.parametrize(
    ("steps", "broken"),
    [
        ([0, 1, 2, 2, 3], {"the stakeholders got one notice", "no other resolution notice"}),
        ([0, 1, 2, 3, 3], {"the comment was added once"}),
    ],
)
def test_repeated_notice_or_comment_breaks_invariants(
    svc: Service, steps: list[int], broken: set[str]
) -> None:
    wf = workflow("tix-resolve-and-notify")
    params = params_for(wf)
    run_steps(svc, wf, params, steps)
    assert set(failing(wf, params, svc.state())) == broken


def test_repeated_retraction_is_a_second_notice(svc: Service) -> None:
    wf = workflow("tix-retract-mistaken-page")
    params = params_for(wf)
    run_steps(svc, wf, params, [0, 1, 1, 2, 3])
    assert set(failing(wf, params, svc.state())) == {"one disregard notice"}


def test_repeated_sets_are_harmless(svc: Service) -> None:
    wf = workflow("tix-retract-mistaken-page")
    params = params_for(wf)
    run_steps(svc, wf, params, [0, 1, 2, 2, 3])
    assert failing(wf, params, svc.state()) == []
    svc.reset()
    wf = workflow("tix-resolve-and-notify")
    params = params_for(wf)
    run_steps(svc, wf, params, [0, 1, 1, 2, 3])
    assert failing(wf, params, svc.state()) == []


def test_repeated_open_conflicts(svc: Service) -> None:
    wf = workflow("tix-open-and-page")
    params = params_for(wf)
    args = fill(wf.gold_plan[1].arguments, params)
    assert svc.call("open_incident", args).status_code == 201
    again = svc.call("open_incident", {**args, "title": "something else"})
    assert again.status_code == 409 and "already exists" in again.json()["detail"]["message"]
    found = svc.call("list_incidents", {"external_ref": params["external_ref"]}).json()
    assert [i["id"] for i in found] == [params["incident_id"]]
    assert found[0]["title"] == params["title"]
    assert [r["op"] for r in svc.commit_log()] == ["incident.open"]


def test_native_key_replays_page(svc: Service) -> None:
    wf = workflow("tix-escalate-incident")
    params = params_for(wf)
    args = {
        "incident_id": params["incident_id"],
        "responder_id": params["level2_0"],
        "message": "m",
    }
    key = {"Idempotency-Key": "page-1"}
    first = svc.call("page_responder", args, headers=key)
    again = svc.call("page_responder", args, headers=key)
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json() and again.headers["idempotent-replayed"] == "true"
    assert svc.call("page_responder", {**args, "message": "n"}, headers=key).status_code == 422
    log = svc.commit_log()
    assert [(r["op"], r["idempotency_key"]) for r in log] == [("page.send", "page-1")]
    assert svc.call("page_responder", args).status_code == 201  # no key: another page
    assert len(svc.commit_log()) == 2


def test_key_is_ignored_on_notices_unless_all(svc: Service) -> None:
    wf = workflow("tix-retract-mistaken-page")
    params = params_for(wf)
    args = fill(wf.gold_plan[1].arguments, params)
    key = {"Idempotency-Key": "r-1"}
    assert svc.call("retract_page", args, headers=key).status_code == 201
    assert svc.call("retract_page", args, headers=key).status_code == 201
    assert len(svc.commit_log()) == 2
    svc.reset()
    assert svc.admin.post("/admin/config", json={"idempotency_mode": "all"}).status_code == 200
    assert svc.call("retract_page", args, headers=key).status_code == 201
    replay = svc.call("retract_page", args, headers=key)
    assert replay.headers.get("idempotent-replayed") == "true"
    assert len(svc.commit_log()) == 1


def test_resolved_incident_rules_and_reopen(svc: Service) -> None:
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


class Crashed(Exception):
    """Stands in for the process exit of an armed crash point."""


@pytest.fixture
def crashable(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_exit(code: int) -> None:
        raise Crashed(code)

    monkeypatch.setattr(os, "_exit", fake_exit)


@pytest.mark.usefixtures("crashable")
def test_crash_between_pages_then_resume(svc: Service) -> None:
    wf = workflow("tix-escalate-incident")
    params = params_for(wf)
    args = fill(wf.gold_plan[-1].arguments, params)
    with pytest.raises(Crashed):
        svc.call("escalate_incident", args, headers={CRASH: "ticketing.after_first_page"})
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


def test_crash_header_is_ignored_when_crash_points_are_off(svc: Service) -> None:
    assert svc.admin.post("/admin/config", json={"crash_points": False}).is_success
    wf = workflow("tix-escalate-incident")
    params = params_for(wf)
    args = fill(wf.gold_plan[-1].arguments, params)
    res = svc.call("escalate_incident", args, headers={CRASH: "ticketing.after_first_page"})
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
    ("POST", f"/v1/incidents/{INC}/comments", {"author": "a", "body": ""}),
    ("POST", f"/v1/incidents/{INC}/comments", {"author": "a", "body": 5}),
    ("POST", "/v1/incidents/inc_nope/comments", {"author": "a", "body": "b"}),
    ("POST", f"/v1/incidents/{INC}/resolve", {"resolution": ""}),
    ("POST", f"/v1/incidents/{INC}/reopen", {}),
    ("POST", f"/v1/incidents/{INC}/escalations", {"reason": ""}),
    ("POST", f"/v1/incidents/{INC}/escalations", {"reason": ["a"]}),
    ("POST", "/v1/incidents/inc_nope/escalations", {"reason": "r"}),
    ("POST", "/v1/escalations/esc_nope/resume", {}),
]


@pytest.mark.parametrize(("method", "path", "body"), BAD_BODIES)
def test_bad_bodies_are_4xx(svc: Service, method: str, path: str, body: Any) -> None:
    res = svc.public.request(method, path, json=body)
    assert 400 <= res.status_code < 500, res.text
    assert svc.commit_log() == []


@pytest.mark.parametrize("raw", [b"{not json", b"", b"\xff\xfe", b'{"message": "m"'])
def test_malformed_json_is_4xx(svc: Service, raw: bytes) -> None:
    headers = {"content-type": "application/json"}
    for method, path in (
        ("POST", "/v1/incidents"),
        ("PUT", f"/v1/incidents/{INC}/severity"),
        ("POST", f"/v1/incidents/{INC}/pages"),
        ("POST", f"/v1/incidents/{INC}/escalations"),
        ("POST", f"/v1/pages/{PAGE}/retractions"),
    ):
        res = svc.public.request(method, path, content=raw, headers=headers)
        assert 400 <= res.status_code < 500, (path, res.status_code, res.text)
    assert svc.commit_log() == []


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
def test_odd_ids_are_4xx(svc: Service, path: str) -> None:
    assert 400 <= svc.public.get(path).status_code < 500


def test_bad_queries_are_4xx(svc: Service) -> None:
    assert svc.public.get("/v1/incidents", params={"status": "closed"}).status_code == 422
    assert svc.public.get("/v1/incidents", params={"external_ref": "x" * 100}).status_code == 422
    assert svc.public.get("/v1/pages", params={"incident_id": "x" * 100}).status_code == 422
    assert svc.public.get("/v1/incidents/inc_nope").status_code == 404
