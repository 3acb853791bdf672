"""Database domain: seeded state, gold plans against the real routes, duplicates, partial
composites and input validation, all in-process (no network, no service subprocess)."""

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
from sqlalchemy import text
from undobench_gym.envs._service.app import create_apps
from undobench_gym.envs._service.context import ServiceContext
from undobench_gym.envs.database.fixture import build_fixture
from undobench_gym.envs.database.service import DOMAIN
from undobench_gym.envs.database.workflows import WORKFLOWS

from undobench_gym.specs import EffectExpectation, StatePredicate, WorkflowSpec, fill

SEED = 3


class Service:
    """The public and admin apps of one database service, plus a tool-name router."""

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


def params_for(wf: WorkflowSpec, seed: int) -> dict[str, Any]:
    return wf.draw_params(seed, build_fixture(seed))


def workflow(wf_id: str) -> WorkflowSpec:
    return next(w for w in WORKFLOWS if w.id == wf_id)


# ---- seeded state ------------------------------------------------------------------


def test_seeded_state_is_deterministic(svc: Service) -> None:
    first = svc.reset(SEED)
    assert svc.reset(SEED) == first
    assert svc.state()["hash"] == first
    assert svc.reset(SEED + 1) != first
    assert build_fixture(SEED) == build_fixture(SEED)
    assert build_fixture(SEED) != build_fixture(SEED + 1)


def test_reset_restores_state_and_drops_ext_tables(svc: Service) -> None:
    fresh = svc.reset(SEED)
    body = {"name": "gift_cards", "columns": [{"name": "code", "type": "text"}]}
    assert svc.call("apply_migration", body).status_code == 201
    acct = build_fixture(SEED)["accounts"][0]["id"]
    assert svc.call("adjust_balance", {"account_id": acct, "delta": 5, "memo": "m"}).is_success
    assert svc.state()["extra"]["ext_tables"] == {"ext_gift_cards": body["columns"]}
    assert svc.reset(SEED) == fresh
    assert svc.state()["extra"] == {"ext_tables": {}}
    assert svc.commit_log() == []


def test_fixture_shape_supports_workflows() -> None:
    for seed in range(20):
        fx = build_fixture(seed)
        ids = [a["id"] for a in fx["accounts"]]
        assert len(set(ids)) == len(ids)
        classes = {h["share_class"] for h in fx["shareholdings"]}
        for share_class in classes:
            holders = [h for h in fx["shareholdings"] if h["share_class"] == share_class]
            assert len(holders) == 3


# ---- tool catalogue ----------------------------------------------------------------


def test_every_route_declares_its_effect(svc: Service) -> None:
    for path, ops in svc.app.openapi()["paths"].items():
        for method, op in ops.items():
            meta = op["x-undobench"]
            assert op["operationId"], path
            if method == "get":
                assert meta == {"read_only": True}, path
            else:
                assert meta["effect_class"] in {"additive", "set", "create_unique"}, path
                assert meta["op"] and meta["identity"], path


def test_workflows_are_consistent(svc: Service) -> None:
    assert len(WORKFLOWS) >= 5
    assert {w.split for w in WORKFLOWS} == {"dev", "val", "test"}
    assert len({w.id for w in WORKFLOWS}) == len(WORKFLOWS)
    for wf in WORKFLOWS:
        assert wf.domain == "database"
        for tool in [*wf.tools, *(s.tool for s in wf.gold_plan)]:
            assert tool in svc.routes, f"{wf.id}: unknown tool {tool}"
        for sc in wf.scenarios:
            if sc.target.tool is not None:
                assert sc.target.tool in wf.tools, f"{wf.id}/{sc.id}"
        params = params_for(wf, SEED)
        fill(wf.instruction, params)  # every {param} of the instruction is drawn


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


@pytest.mark.parametrize("wf_id", ["db-transfer-funds", "db-upgrade-tier"])
def test_repeated_additive_step_breaks_invariants(svc: Service, wf_id: str) -> None:
    wf = workflow(wf_id)
    params = params_for(wf, SEED)
    run_gold(svc, wf, params)
    last = wf.gold_plan[-1]
    assert last.tool == "adjust_balance"
    assert svc.call(last.tool, fill(last.arguments, params)).status_code == 201
    assert failing(wf, params, svc.state())


def test_repeated_set_is_harmless(svc: Service) -> None:
    wf = workflow("db-upgrade-tier")
    params = params_for(wf, SEED)
    run_gold(svc, wf, params)
    args = {"account_id": params["account_id"], "tier": "gold"}
    assert svc.call("set_account_tier", args).status_code == 200
    assert failing(wf, params, svc.state()) == []


def test_repeated_adjust_balance_adds_two_commit_rows(svc: Service) -> None:
    acct = build_fixture(SEED)["accounts"][2]
    args = {"account_id": acct["id"], "delta": 1234, "memo": "retry me"}
    first, second = svc.call("adjust_balance", args), svc.call("adjust_balance", args)
    assert first.status_code == second.status_code == 201
    assert second.json()["account"]["balance"] == acct["balance"] + 2 * 1234
    rows = [r for r in svc.commit_log() if r["op"] == "account.adjust"]
    assert len(rows) == 2
    assert rows[0]["identity"] == rows[1]["identity"]
    assert json.loads(rows[0]["identity"]) == args
    audit = svc.call("list_audit", {"account_id": acct["id"]}).json()
    assert [a["ref"] for a in audit] == ["retry me", "retry me"]


def test_overdraft_is_refused(svc: Service) -> None:
    acct = build_fixture(SEED)["accounts"][0]
    res = svc.call(
        "adjust_balance",
        {"account_id": acct["id"], "delta": -acct["balance"] - 1, "memo": "too much"},
    )
    assert res.status_code == 402
    assert svc.call("get_account", {"account_id": acct["id"]}).json()["balance"] == acct["balance"]
    assert svc.commit_log() == []
    res = svc.call("adjust_balance", {"account_id": "acct_nope", "delta": 1, "memo": "x"})
    assert res.status_code == 404


def test_repeated_create_order_conflicts(svc: Service) -> None:
    acct = build_fixture(SEED)["accounts"][1]["id"]
    body = {"order_number": "ORD-TEST-1", "account_id": acct, "total": 4200}
    assert svc.call("create_order", body).status_code == 201
    again = svc.call("create_order", {**body, "total": 999})
    assert again.status_code == 409
    assert "already exists" in again.json()["detail"]["message"]
    rows = [o for o in svc.state()["tables"]["db_orders"] if o["order_number"] == "ORD-TEST-1"]
    assert len(rows) == 1 and rows[0]["total"] == 4200
    assert [r["op"] for r in svc.commit_log()] == ["order.create"]
    assert svc.call("get_order", {"order_number": "ORD-TEST-1"}).json()["total"] == 4200


def test_repeated_pay_dividend_conflicts(svc: Service) -> None:
    wf = workflow("db-pay-dividend")
    params = params_for(wf, SEED)
    run_gold(svc, wf, params)
    res = svc.call("pay_dividend", fill(wf.gold_plan[-1].arguments, params))
    assert res.status_code == 409
    assert failing(wf, params, svc.state()) == []


def test_idempotency_key_replays_composites_in_all_mode(svc: Service) -> None:
    """With keys honoured on every route, a keyed retry of a composite replays its response."""
    assert svc.admin.post("/admin/config", json={"idempotency_mode": "all"}).status_code == 200
    key = {"Idempotency-Key": "k-1"}
    migration = {"name": "gift_cards", "columns": [{"name": "code", "type": "text"}]}
    dividend = {"share_class": "common", "amount_per_share": 3, "reference": "DIV-K"}
    adjust = {"account_id": ACCT, "delta": 10, "memo": "keyed"}
    for tool, args in (
        ("apply_migration", migration),
        ("pay_dividend", dividend),
        ("adjust_balance", adjust),
    ):
        first, again = svc.call(tool, args, headers=key), svc.call(tool, args, headers=key)
        assert first.status_code == again.status_code == 201, (tool, again.text)
        assert again.json() == first.json()
        assert again.headers.get("Idempotent-Replayed") == "true"
    ops = [r["op"] for r in svc.commit_log()]
    assert ops.count("migration.apply") == ops.count("dividend.declare") == 1
    assert ops.count("account.adjust") == 1
    other = svc.call("adjust_balance", {**adjust, "delta": 11}, headers=key)
    assert other.status_code == 422  # same key, different payload


# ---- half-applied composites -------------------------------------------------------


def test_partial_migration_is_reported_and_repaired(svc: Service) -> None:
    with svc.ctx.engine.begin() as conn:
        conn.execute(text('CREATE TABLE "ext_tax_rates" ("region" TEXT, "rate" REAL)'))
    partial = svc.state()["partial"]
    assert len(partial) == 1 and "ext_tax_rates" in partial[0]
    schema = svc.call("get_schema").json()["tables"]
    assert schema == [
        {
            "name": "ext_tax_rates",
            "migration": "tax_rates",
            "cataloged": False,
            "columns": [{"name": "region", "type": "text"}, {"name": "rate", "type": "real"}],
        }
    ]

    body = {"name": "tax_rates", "columns": [{"name": "region", "type": "text"}]}
    res = svc.call("apply_migration", body)
    assert res.status_code == 409
    message = res.json()["detail"]["message"]
    assert "without a catalog row" in message and "repair_migration" in message
    assert svc.commit_log() == []

    fixed = svc.call("repair_migration", {"name": "tax_rates"})
    assert fixed.status_code == 200
    assert fixed.json()["columns"] == [
        {"name": "region", "type": "text"},
        {"name": "rate", "type": "real"},
    ]
    assert svc.state()["partial"] == []
    assert svc.call("repair_migration", {"name": "tax_rates"}).status_code == 200
    log = svc.commit_log()
    assert [(r["op"], json.loads(r["identity"])) for r in log] == [
        ("migration.apply", {"name": "tax_rates"})
    ]
    assert svc.call("apply_migration", body).status_code == 409
    assert svc.call("repair_migration", {"name": "no_such"}).status_code == 404


class Crashed(Exception):
    """Stands in for the process exit of an armed crash point."""


@pytest.fixture
def crashable(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_exit(code: int) -> None:
        raise Crashed(code)

    monkeypatch.setattr(os, "_exit", fake_exit)


@pytest.mark.usefixtures("crashable")
def test_crash_mid_dividend_then_resume(svc: Service) -> None:
    wf = workflow("db-pay-dividend")
    params = params_for(wf, SEED)
    args = fill(wf.gold_plan[-1].arguments, params)
    with pytest.raises(Crashed):
        svc.call(
            "pay_dividend", args, headers={"x-undobench-crash-point": "dividend.after_first_credit"}
        )
    state = svc.state()
    assert len(state["partial"]) == 1 and "1/3 credits paid" in state["partial"][0]
    again = svc.call("pay_dividend", args)
    assert again.status_code == 409 and "resume_dividend" in again.json()["detail"]["message"]
    dividend = svc.call("list_dividends", {"reference": params["reference"]}).json()[0]
    assert dividend["status"] == "processing"
    done = svc.call("resume_dividend", {"dividend_id": dividend["id"]})
    assert done.status_code == 200 and done.json()["status"] == "paid"
    assert svc.call("resume_dividend", {"dividend_id": dividend["id"]}).status_code == 200
    state = svc.state()
    assert state["partial"] == [] and failing(wf, params, state) == []
    log = svc.commit_log()
    for effect in wf.required_effects:
        assert effect_count(log, effect, params) == 1, effect


@pytest.mark.usefixtures("crashable")
def test_crash_after_ddl_then_repair(svc: Service) -> None:
    wf = workflow("db-apply-migration")
    params = params_for(wf, SEED)
    args = fill(wf.gold_plan[-1].arguments, params)
    with pytest.raises(Crashed):
        svc.call(
            "apply_migration", args, headers={"x-undobench-crash-point": "migration.after_ddl"}
        )
    assert svc.state()["partial"] == [
        f"table {params['table']} exists without a db_migrations row (half-applied)"
    ]
    assert svc.call("apply_migration", args).status_code == 409
    assert svc.call("repair_migration", {"name": params["name"]}).status_code == 200
    state = svc.state()
    assert state["partial"] == [] and failing(wf, params, state) == []
    assert effect_count(svc.commit_log(), wf.required_effects[0], params) == 1


# ---- validation --------------------------------------------------------------------

ACCT = build_fixture(SEED)["accounts"][0]["id"]
ADJUST = f"/v1/accounts/{ACCT}/adjustments"
BAD_BODIES: list[tuple[str, str, Any]] = [
    ("POST", ADJUST, {"delta": "abc", "memo": "m"}),
    ("POST", ADJUST, {"delta": "100", "memo": "m"}),
    ("POST", ADJUST, {"delta": True, "memo": "m"}),
    ("POST", ADJUST, {"delta": 1.5, "memo": "m"}),
    ("POST", ADJUST, {"delta": 0, "memo": "m"}),
    ("POST", ADJUST, {"delta": 10**30, "memo": "m"}),
    ("POST", ADJUST, {"delta": 5, "memo": ""}),
    ("POST", ADJUST, {"delta": 5, "memo": "x" * 1000}),
    ("POST", ADJUST, {"delta": 5}),
    ("POST", ADJUST, [1, 2]),
    ("POST", ADJUST, None),
    ("POST", "/v1/accounts/" + "a" * 100 + "/adjustments", {"delta": 5, "memo": "m"}),
    ("PUT", f"/v1/accounts/{ACCT}/tier", {"tier": "diamond"}),
    ("PUT", f"/v1/accounts/{ACCT}/tier", {"tier": 3}),
    ("POST", "/v1/orders", {"order_number": "has space", "account_id": ACCT, "total": 5}),
    ("POST", "/v1/orders", {"order_number": "ORD-9", "account_id": ACCT, "total": -1}),
    ("POST", "/v1/orders", {"order_number": "ORD-9", "account_id": ACCT, "total": {"a": 1}}),
    ("POST", "/v1/orders", {"order_number": "ORD-9", "account_id": "nope", "total": 5}),
    (
        "POST",
        "/v1/dividends",
        {"share_class": "common", "amount_per_share": "5", "reference": "R1"},
    ),
    (
        "POST",
        "/v1/dividends",
        {"share_class": "DROP TABLE", "amount_per_share": 5, "reference": "R1"},
    ),
    ("POST", "/v1/dividends", {"share_class": "nobody", "amount_per_share": 5, "reference": "R1"}),
    ("POST", "/v1/dividends/div_nope/resume", {}),
    (
        "POST",
        "/v1/migrations",
        {"name": "x; DROP TABLE db_accounts", "columns": [{"name": "a", "type": "text"}]},
    ),
    ("POST", "/v1/migrations", {"name": "Upper", "columns": [{"name": "a", "type": "text"}]}),
    ("POST", "/v1/migrations", {"name": "ok", "columns": []}),
    ("POST", "/v1/migrations", {"name": "ok", "columns": [{"name": "a", "type": "blob"}]}),
    ("POST", "/v1/migrations", {"name": "ok", "columns": [{"name": 'a"', "type": "text"}]}),
    (
        "POST",
        "/v1/migrations",
        {"name": "ok", "columns": [{"name": "a", "type": "text"}, {"name": "a", "type": "real"}]},
    ),
    ("POST", "/v1/migrations", {"name": "ok", "columns": "a text"}),
    ("POST", "/v1/migrations/Bad-Name/repair", {}),
]


@pytest.mark.parametrize(("method", "path", "body"), BAD_BODIES)
def test_bad_bodies_are_4xx(svc: Service, method: str, path: str, body: Any) -> None:
    res = svc.public.request(method, path, json=body)
    assert 400 <= res.status_code < 500, res.text
    assert svc.commit_log() == []
    assert svc.state()["extra"] == {"ext_tables": {}}


@pytest.mark.parametrize("raw", [b"{not json", b"", b"\xff\xfe", b'{"delta": 5, "memo": "m"'])
def test_malformed_json_is_4xx(svc: Service, raw: bytes) -> None:
    headers = {"content-type": "application/json"}
    for path in (ADJUST, "/v1/orders", "/v1/dividends", "/v1/migrations"):
        res = svc.public.post(path, content=raw, headers=headers)
        assert 400 <= res.status_code < 500, (path, res.status_code, res.text)
    assert svc.commit_log() == []


def test_bad_queries_are_4xx(svc: Service) -> None:
    assert svc.public.get("/v1/accounts", params={"tier": "diamond"}).status_code == 422
    assert svc.public.get("/v1/audit", params={"limit": 0}).status_code == 422
    assert svc.public.get("/v1/audit", params={"limit": "many"}).status_code == 422
    assert svc.public.get("/v1/orders/ORD-0").status_code == 404
    assert svc.public.get("/v1/accounts/acct_nope").status_code == 404
