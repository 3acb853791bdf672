"""CRM domain: seeded state, gold plans against the real routes, duplicates, the
half-converted lead and input validation, all in-process (no network, no subprocess)."""

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
from jsonschema import Draft202012Validator
from undobench_gym.envs._service.app import create_apps
from undobench_gym.envs._service.context import CRASH_HEADER, ServiceContext
from undobench_gym.envs.crm.composites import CRASH_AFTER_ACCOUNT
from undobench_gym.envs.crm.fixture import build_fixture
from undobench_gym.envs.crm.service import DOMAIN
from undobench_gym.envs.crm.workflows import WORKFLOWS

from undobench_gym.catalog import tools_from_openapi
from undobench_gym.specs import Boundary, EffectExpectation, StatePredicate, WorkflowSpec, fill

SEED = 3


class Service:
    """The public and admin apps of one CRM service, plus a tool-name router."""

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
        method, path = self.routes[tool]
        rest = dict(args or {})
        for name in re.findall(r"\{(\w+)\}", path):
            path = path.replace(f"{{{name}}}", str(rest.pop(name)))
        if method == "get":
            return self.public.get(path, params=rest, **kw)
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


def resolve(value: Any, responses: list[Any]) -> Any:
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


def run_gold(svc: Service, wf: WorkflowSpec, params: dict[str, Any]) -> list[Any]:
    responses: list[Any] = []
    for step in wf.gold_plan:
        args = resolve(fill(step.arguments, params), responses)
        res = svc.call(step.tool, args)
        assert res.status_code < 300, f"{wf.id} {step.tool}: {res.status_code} {res.text}"
        responses.append(res.json())
    return responses


def evaluate(pred: StatePredicate, params: dict[str, Any], tables: dict[str, Any]) -> bool:
    where = fill(pred.where, params)
    rows = [r for r in tables[pred.table] if all(r.get(k) == v for k, v in where.items())]
    expected = fill(pred.value, params)
    if pred.op == "count":
        return len(rows) == expected
    if len(rows) != 1 or pred.field is None:
        return False
    assert pred.op == "eq"
    return bool(rows[0][pred.field] == expected)


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


def step_args(wf: WorkflowSpec, tool: str, params: dict[str, Any]) -> dict[str, Any]:
    step = next(s for s in wf.gold_plan if s.tool == tool)
    return dict(fill(step.arguments, params))


# ---- seeded state ------------------------------------------------------------------


def test_seeded_state_is_deterministic(svc: Service) -> None:
    first = svc.reset(SEED)
    assert svc.reset(SEED) == first
    assert svc.state()["hash"] == first
    assert svc.reset(SEED + 1) != first
    assert build_fixture(SEED) == build_fixture(SEED)
    assert build_fixture(SEED) != build_fixture(SEED + 1)


def test_reset_restores_state(svc: Service) -> None:
    fresh = svc.reset(SEED)
    wf = workflow("crm-close-won-deal")
    run_gold(svc, wf, params_for(wf))
    assert svc.state()["hash"] != fresh
    assert svc.reset(SEED) == fresh
    assert svc.commit_log() == []


def test_fixture_shape_supports_workflows() -> None:
    for seed in range(30):
        fx = build_fixture(seed)
        emails = [c["email"] for c in fx["contacts"]] + [lead["email"] for lead in fx["leads"]]
        assert len(set(emails)) == len(emails)
        for key in ("accounts", "contacts", "leads", "opportunities"):
            ids = [r["id"] for r in fx[key]]
            assert len(set(ids)) == len(ids)
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
                assert meta["op"] and meta["identity"], path
                classes.add((meta["effect_class"], meta["idempotency"]))
                keyed = any(p["name"] == "Idempotency-Key" for p in op.get("parameters", []))
                assert keyed == (meta["idempotency"] == "native"), path
    assert {c for c, _ in classes} == {"additive", "set", "create_unique", "irreversible_send"}
    assert {i for _, i in classes} == {"native", "constraint", "none"}


def test_workflows_are_consistent(svc: Service) -> None:
    assert len(WORKFLOWS) == 4
    assert sorted(w.split for w in WORKFLOWS) == ["dev", "dev", "test", "val"]
    assert len({w.id for w in WORKFLOWS}) == 4
    boundaries = {s.boundary for w in WORKFLOWS for s in w.scenarios}
    assert set(Boundary) <= boundaries
    for wf in WORKFLOWS:
        assert wf.domain == "crm" and wf.id.startswith("crm-")
        for tool in [*wf.tools, *(s.tool for s in wf.gold_plan)]:
            assert tool in svc.routes, f"{wf.id}: unknown tool {tool}"
        gold_tools = [s.tool for s in wf.gold_plan]
        for sc in wf.scenarios:
            assert sc.target.tool in gold_tools, f"{wf.id}/{sc.id}"
            assert svc.routes[sc.target.tool][0] != "get", f"{wf.id}/{sc.id}"
        if wf.split == "test":
            assert any(s.boundary is Boundary.POST_MUTATION_PRE_ACK for s in wf.scenarios)
        text = wf.instruction.lower()
        assert not any(w in text for w in ("fault", "inject", "retry", "benchmark", "test"))


def test_gold_arguments_fit_the_tool_schemas(svc: Service) -> None:
    """The env validates every call against the schema generated from OpenAPI."""
    tools = tools_from_openapi(svc.app.openapi())
    for wf in WORKFLOWS:
        params = params_for(wf)
        for step in wf.gold_plan:
            errors = list(
                Draft202012Validator(tools[step.tool].parameters).iter_errors(
                    fill(step.arguments, params)
                )
            )
            assert errors == [], (wf.id, step.tool, errors)


# ---- gold plans --------------------------------------------------------------------


@pytest.mark.parametrize("seed", [SEED, 11, 12345])
@pytest.mark.parametrize("wf", WORKFLOWS, ids=lambda w: w.id)
def test_gold_plan_leaves_invariants_true(svc: Service, wf: WorkflowSpec, seed: int) -> None:
    svc.reset(seed)
    params = params_for(wf, seed)
    assert failing(wf, params, svc.state())  # the task is not already done
    run_gold(svc, wf, params)
    state = svc.state()
    assert failing(wf, params, state) == []
    assert state["partial"] == []
    log = svc.commit_log()
    for effect in wf.required_effects:
        assert effect_count(log, effect, params) == 1, effect
    for effect in wf.forbidden_effects:
        assert effect_count(log, effect, params) == 0, effect


@pytest.mark.parametrize(
    ("wf_id", "tool"),
    [
        ("crm-renew-sla", "renew_sla"),
        ("crm-fix-sequence-enrollment", "enroll_contact"),
        ("crm-close-won-deal", "enroll_contact"),
    ],
)
def test_repeated_additive_or_send_breaks_invariants(svc: Service, wf_id: str, tool: str) -> None:
    wf = workflow(wf_id)
    params = params_for(wf)
    run_gold(svc, wf, params)
    assert svc.call(tool, step_args(wf, tool, params)).status_code == 201
    assert failing(wf, params, svc.state())
    rows = [r for r in svc.commit_log() if r["effect_class"] in ("additive", "irreversible_send")]
    assert len(rows) == 2 and rows[0]["identity"] == rows[1]["identity"]


def test_repeated_sets_are_harmless(svc: Service) -> None:
    wf = workflow("crm-close-won-deal")
    params = params_for(wf)
    run_gold(svc, wf, params)
    for tool in ("set_opportunity_amount", "update_opportunity_stage", "set_account_tier"):
        assert svc.call(tool, step_args(wf, tool, params)).status_code == 200
    fix = workflow("crm-fix-sequence-enrollment")
    fix_params = params_for(fix)
    run_gold(svc, fix, fix_params)
    again = svc.call("unenroll_contact", {"enrollment_id": fix_params["wrong_enrollment"]})
    assert again.status_code == 200 and again.json()["status"] == "unenrolled"
    assert failing(wf, params, svc.state()) == failing(fix, fix_params, svc.state()) == []


def test_closed_opportunity_keeps_its_values(svc: Service) -> None:
    wf = workflow("crm-close-won-deal")
    params = params_for(wf)
    run_gold(svc, wf, params)
    opp = params["opportunity_id"]
    res = svc.call("update_opportunity_stage", {"opportunity_id": opp, "stage": "proposal"})
    assert res.status_code == 409
    res = svc.call("set_opportunity_amount", {"opportunity_id": opp, "amount": 1})
    assert res.status_code == 409
    assert svc.call("get_opportunity", {"opportunity_id": opp}).json()["amount"] == params["amount"]


def test_renew_sla_idempotency_key(svc: Service) -> None:
    wf = workflow("crm-renew-sla")
    params = params_for(wf)
    args = step_args(wf, "renew_sla", params)
    key = {"Idempotency-Key": "renew-1"}
    first, again = (
        svc.call("renew_sla", args, headers=key),
        svc.call("renew_sla", args, headers=key),
    )
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json() and again.headers.get("Idempotent-Replayed") == "true"
    assert failing(wf, params, svc.state()) == []
    assert [r["idempotency_key"] for r in svc.commit_log()] == ["renew-1"]
    other = svc.call("renew_sla", {**args, "years": args["years"] % 3 + 1}, headers=key)
    assert other.status_code == 422
    # Without a key every call is a new renewal.
    assert svc.call("renew_sla", args).status_code == 201
    assert "exactly one renewal" in failing(wf, params, svc.state())


def test_keys_are_ignored_where_not_native_unless_all(svc: Service) -> None:
    contact = build_fixture(SEED)["contacts"][4]["id"]
    seq = build_fixture(SEED)["sequences"][0]["id"]
    args = {"sequence_id": seq, "contact_id": contact}
    key = {"Idempotency-Key": "enroll-1"}
    assert svc.call("enroll_contact", args, headers=key).status_code == 201
    assert svc.call("enroll_contact", args, headers=key).status_code == 201
    assert len(svc.commit_log()) == 2
    assert svc.admin.post("/admin/config", json={"idempotency_mode": "all"}).status_code == 200
    key = {"Idempotency-Key": "enroll-2"}
    assert svc.call("enroll_contact", args, headers=key).status_code == 201
    again = svc.call("enroll_contact", args, headers=key)
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert len(svc.commit_log()) == 3
    wf = workflow("crm-convert-lead")
    params = params_for(wf)
    convert = step_args(wf, "convert_lead", params)
    key = {"Idempotency-Key": "convert-1"}
    first = svc.call("convert_lead", convert, headers=key)
    again = svc.call("convert_lead", convert, headers=key)
    assert first.status_code == again.status_code == 201 and first.json() == again.json()


# ---- unique constraints ------------------------------------------------------------


def test_converting_twice_conflicts(svc: Service) -> None:
    wf = workflow("crm-convert-lead")
    params = params_for(wf)
    run_gold(svc, wf, params)
    again = svc.call("convert_lead", step_args(wf, "convert_lead", params))
    assert again.status_code == 409 and "already converted" in again.json()["detail"]["message"]
    assert failing(wf, params, svc.state()) == []
    done = svc.call("resume_lead_conversion", {"lead_id": params["lead_id"]})
    assert done.status_code == 200 and done.json()["status"] == "converted"
    assert len(svc.commit_log()) == 2


def test_contact_email_is_unique(svc: Service) -> None:
    fx = build_fixture(SEED)
    taken = fx["contacts"][1]
    body = {"account_id": fx["accounts"][3]["id"], "name": "Someone Else", "email": taken["email"]}
    res = svc.call("create_contact", body)
    assert res.status_code == 409 and taken["id"] in res.json()["detail"]["message"]
    fresh = {**body, "email": "new.person@example.com"}
    assert svc.call("create_contact", fresh).status_code == 201
    assert svc.call("create_contact", fresh).status_code == 409
    assert [r["op"] for r in svc.commit_log()] == ["contact.create"]
    # A lead whose email became a contact's cannot be converted into a second contact.
    lead = fx["leads"][0]
    clash = {**body, "email": lead["email"]}
    assert svc.call("create_contact", clash).status_code == 201
    res = svc.call("convert_lead", {"lead_id": lead["id"], "opportunity_name": "x", "amount": 5})
    assert res.status_code == 409
    assert svc.state()["partial"] == []


def test_resume_refuses_an_open_lead(svc: Service) -> None:
    lead = build_fixture(SEED)["leads"][1]["id"]
    assert svc.call("resume_lead_conversion", {"lead_id": lead}).status_code == 409
    assert svc.call("resume_lead_conversion", {"lead_id": "lead_nope"}).status_code == 404
    assert svc.commit_log() == []


# ---- the half-converted lead -------------------------------------------------------


class Crashed(Exception):
    """Stands in for the process exit of an armed crash point."""


@pytest.fixture
def crashable(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_exit(code: int) -> None:
        raise Crashed(code)

    monkeypatch.setattr(os, "_exit", fake_exit)


@pytest.mark.usefixtures("crashable")
def test_crash_after_account_then_resume(svc: Service) -> None:
    wf = workflow("crm-convert-lead")
    params = params_for(wf)
    args = step_args(wf, "convert_lead", params)
    with pytest.raises(Crashed):
        svc.call("convert_lead", args, headers={CRASH_HEADER: CRASH_AFTER_ACCOUNT})
    state = svc.state()
    assert len(state["partial"]) == 1
    assert "half-converted" in state["partial"][0] and "has no opportunity" in state["partial"][0]
    accounts = [a for a in state["tables"]["crm_accounts"] if a["source_lead_id"]]
    assert len(accounts) == 1
    assert not [o for o in state["tables"]["crm_opportunities"] if o["source_lead_id"]]
    lead = svc.call("get_lead", {"lead_id": params["lead_id"]}).json()
    assert lead["status"] == "converting" and lead["account"]["id"] == accounts[0]["id"]
    assert lead["opportunity"] is None
    again = svc.call("convert_lead", args)
    assert again.status_code == 409
    assert "resume_lead_conversion" in again.json()["detail"]["message"]
    done = svc.call("resume_lead_conversion", {"lead_id": params["lead_id"]})
    assert done.status_code == 200 and done.json()["status"] == "converted"
    assert done.json()["opportunity"]["amount"] == params["amount"]
    assert svc.call("resume_lead_conversion", {"lead_id": params["lead_id"]}).status_code == 200
    state = svc.state()
    assert state["partial"] == [] and failing(wf, params, state) == []
    log = svc.commit_log()
    for effect in wf.required_effects:
        assert effect_count(log, effect, params) == 1, effect


@pytest.mark.usefixtures("crashable")
def test_crash_points_can_be_disabled(svc: Service) -> None:
    svc.ctx.crash_points_enabled = False
    wf = workflow("crm-convert-lead")
    params = params_for(wf)
    res = svc.call(
        "convert_lead",
        step_args(wf, "convert_lead", params),
        headers={CRASH_HEADER: CRASH_AFTER_ACCOUNT},
    )
    assert res.status_code == 201 and svc.state()["partial"] == []


# ---- validation --------------------------------------------------------------------

FX = build_fixture(SEED)
LEAD = FX["leads"][0]["id"]
ACC = FX["accounts"][0]["id"]
OPP = FX["opportunities"][0]["id"]
SLA = FX["sla_contracts"][0]["id"]
SEQ = FX["sequences"][0]["id"]
BAD_BODIES: list[tuple[str, str, Any]] = [
    ("POST", f"/v1/leads/{LEAD}/convert", {"opportunity_name": "x", "amount": "100"}),
    ("POST", f"/v1/leads/{LEAD}/convert", {"opportunity_name": "x", "amount": 0}),
    ("POST", f"/v1/leads/{LEAD}/convert", {"opportunity_name": "x", "amount": 10**30}),
    ("POST", f"/v1/leads/{LEAD}/convert", {"opportunity_name": "", "amount": 5}),
    ("POST", f"/v1/leads/{LEAD}/convert", {"opportunity_name": "x" * 500, "amount": 5}),
    ("POST", f"/v1/leads/{LEAD}/convert", [1, 2]),
    ("POST", f"/v1/leads/{LEAD}/convert", None),
    ("POST", "/v1/leads/lead_nope/convert", {"opportunity_name": "x", "amount": 5}),
    ("POST", "/v1/leads/" + "a" * 100 + "/convert", {"opportunity_name": "x", "amount": 5}),
    ("POST", "/v1/leads/..%2F..%2Fetc/convert", {"opportunity_name": "x", "amount": 5}),
    ("POST", "/v1/leads/a%00b/resume-conversion", {}),
    ("PUT", f"/v1/accounts/{ACC}/tier", {"tier": "diamond"}),
    ("PUT", f"/v1/accounts/{ACC}/tier", {"tier": 3}),
    ("PUT", "/v1/accounts/acc_nope/tier", {"tier": "growth"}),
    ("PUT", f"/v1/opportunities/{OPP}/stage", {"stage": "won"}),
    ("PUT", f"/v1/opportunities/{OPP}/amount", {"amount": -5}),
    ("PUT", f"/v1/opportunities/{OPP}/amount", {"amount": 1.5}),
    ("PUT", f"/v1/opportunities/{OPP}/amount", {"amount": True}),
    ("POST", f"/v1/sla-contracts/{SLA}/renewals", {"years": 0}),
    ("POST", f"/v1/sla-contracts/{SLA}/renewals", {"years": 99}),
    ("POST", f"/v1/sla-contracts/{SLA}/renewals", {"years": "2"}),
    ("POST", f"/v1/sla-contracts/{SLA}/renewals", {}),
    ("POST", "/v1/sla-contracts/sla_nope/renewals", {"years": 1}),
    ("POST", f"/v1/sequences/{SEQ}/enrollments", {"contact_id": "con_nope"}),
    ("POST", f"/v1/sequences/{SEQ}/enrollments", {"contact_id": "../x"}),
    ("POST", f"/v1/sequences/{SEQ}/enrollments", {"contact_id": 5}),
    ("POST", "/v1/sequences/seq_nope/enrollments", {"contact_id": FX["contacts"][0]["id"]}),
    ("POST", "/v1/enrollments/enr_nope/unenroll", {}),
    ("POST", "/v1/contacts", {"account_id": ACC, "name": "A", "email": "not an email"}),
    ("POST", "/v1/contacts", {"account_id": "acc_nope", "name": "A", "email": "a@b.c"}),
    ("POST", "/v1/contacts", {"account_id": ACC, "name": "", "email": "a@b.c"}),
]


@pytest.mark.parametrize(("method", "path", "body"), BAD_BODIES)
def test_bad_bodies_are_4xx(svc: Service, method: str, path: str, body: Any) -> None:
    before = svc.state()["hash"]
    res = svc.public.request(method, path, json=body)
    assert 400 <= res.status_code < 500, res.text
    assert svc.commit_log() == []
    assert svc.state()["hash"] == before


@pytest.mark.parametrize("raw", [b"{not json", b"", b"\xff\xfe", b'{"years": 1'])
def test_malformed_json_is_4xx(svc: Service, raw: bytes) -> None:
    headers = {"content-type": "application/json"}
    for method, path in (
        ("POST", f"/v1/leads/{LEAD}/convert"),
        ("POST", f"/v1/sla-contracts/{SLA}/renewals"),
        ("POST", f"/v1/sequences/{SEQ}/enrollments"),
        ("POST", "/v1/contacts"),
        ("PUT", f"/v1/accounts/{ACC}/tier"),
    ):
        res = svc.public.request(method, path, content=raw, headers=headers)
        assert 400 <= res.status_code < 500, (path, res.status_code, res.text)
    assert svc.commit_log() == []


def test_bad_queries_are_4xx(svc: Service) -> None:
    assert svc.public.get("/v1/accounts", params={"tier": "diamond"}).status_code == 422
    assert svc.public.get("/v1/leads", params={"status": "lost"}).status_code == 422
    assert svc.public.get("/v1/contacts", params={"account_id": "../x"}).status_code == 422
    assert svc.public.get("/v1/opportunities", params={"stage": "won"}).status_code == 422
    assert svc.public.get("/v1/leads/lead_nope").status_code == 404
    assert svc.public.get("/v1/sla-contracts/x" + "y" * 80).status_code == 422
    assert svc.public.get(f"/v1/accounts/{ACC}").json()["contacts"]
