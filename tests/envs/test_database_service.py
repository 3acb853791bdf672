"""Database domain: seeded state, gold plans against the real routes, duplicates, partial
composites and input validation, all in-process (no network, no service subprocess)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.orm import Session

from undobench_gym.contract.specs import WorkflowSpec, fill
from undobench_gym.services.domains.database.fixture import build_fixture
from undobench_gym.services.domains.database.service import DOMAIN
from undobench_gym.services.domains.database.workflows import WORKFLOWS

from .service_harness import (
    MALFORMED_JSON,
    SEED,
    ServiceClient,
    assert_done,
    assert_gold_plan_completes,
    assert_key_replays,
    assert_malformed_json_rejected,
    assert_rejected,
    assert_reset_is_deterministic,
    assert_routes_declare_effects,
    assert_workflow_is_consistent,
    failed_invariants,
    gold_plan_cases,
    params_for,
    retry_after_gold_plan,
    run_gold_plan,
    step_args,
)

pytestmark = pytest.mark.service(DOMAIN)

# ---- seeded state ------------------------------------------------------------------


def test_seeded_state_is_deterministic(svc: ServiceClient) -> None:
    assert_reset_is_deterministic(svc)


def _history_tables(seed: int = SEED) -> dict[str, list[dict[str, str]]]:
    """The ext_ tables the fixture's earlier migrations created."""
    return {f"ext_{m['name']}": m["columns"] for m in build_fixture(seed)["migrations"]}


def test_reset_restores_state_and_drops_ext_tables(svc: ServiceClient) -> None:
    fresh = svc.reset(SEED)
    history = _history_tables()
    assert len(history) == 2 and svc.state()["extra"] == {"ext_tables": history}
    body = {"name": "gift_cards", "columns": [{"name": "code", "type": "text"}]}
    assert svc.call("apply_migration", body).status_code == 201
    acct = build_fixture(SEED)["accounts"][0]["id"]
    assert svc.call("adjust_balance", {"account_id": acct, "delta": 5, "memo": "m"}).is_success
    assert svc.state()["extra"]["ext_tables"] == {**history, "ext_gift_cards": body["columns"]}
    assert svc.reset(SEED) == fresh
    assert svc.state()["extra"] == {"ext_tables": history}
    assert svc.commit_log() == []
    # Another seed's history replaces this one's, tables included.
    svc.reset(SEED + 1)
    assert svc.state()["extra"] == {"ext_tables": _history_tables(SEED + 1)}


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


def test_every_route_declares_its_effect(svc: ServiceClient) -> None:
    classes = assert_routes_declare_effects(svc)
    assert {c for c, _ in classes} <= {"additive", "set", "create_unique"}


def test_workflows_are_consistent(svc: ServiceClient) -> None:
    assert len(WORKFLOWS) >= 5
    assert {w.split for w in WORKFLOWS} == {"dev", "val", "test", "stress"}
    assert len({w.id for w in WORKFLOWS}) == len(WORKFLOWS)
    for wf in WORKFLOWS:
        assert_workflow_is_consistent(svc, wf, prefix="db-")
        fill(wf.instruction, params_for(wf))  # every {param} of the instruction is drawn


# ---- gold plans --------------------------------------------------------------------


@gold_plan_cases(WORKFLOWS)
def test_gold_plan_leaves_invariants_true(svc: ServiceClient, wf: WorkflowSpec, seed: int) -> None:
    assert_gold_plan_completes(svc, wf, seed)


@pytest.mark.parametrize("wf_id", ["db-transfer-funds", "db-upgrade-tier"])
def test_repeated_additive_step_breaks_invariants(svc: ServiceClient, wf_id: str) -> None:
    wf = svc.workflow(wf_id)
    assert wf.gold_plan[-1].tool == "adjust_balance"
    params, again = retry_after_gold_plan(svc, wf, -1)
    assert again.status_code == 201
    assert failed_invariants(svc, wf, params)


def test_repeated_set_is_harmless(svc: ServiceClient) -> None:
    wf = svc.workflow("db-upgrade-tier")
    params = params_for(wf)
    run_gold_plan(svc, wf, params)
    args = {"account_id": params["account_id"], "tier": "gold"}
    assert svc.call("set_account_tier", args).status_code == 200
    assert failed_invariants(svc, wf, params) == []


def test_repeated_adjust_balance_adds_two_commit_rows(svc: ServiceClient) -> None:
    acct = build_fixture(SEED)["accounts"][2]
    args = {"account_id": acct["id"], "delta": 1234, "memo": "retry me"}
    reworded = {**args, "memo": "retry me (second attempt)"}
    first, second = svc.call("adjust_balance", args), svc.call("adjust_balance", reworded)
    assert first.status_code == second.status_code == 201
    assert second.json()["account"]["balance"] == acct["balance"] + 2 * 1234
    rows = [r for r in svc.commit_log() if r["op"] == "account.adjust"]
    assert len(rows) == 2
    # The memo is free text: both adjustments are the same effect.
    assert rows[0]["identity"] == rows[1]["identity"]
    assert json.loads(rows[0]["identity"]) == {"account_id": acct["id"], "delta": 1234}
    assert [r["args"]["memo"] for r in rows] == [args["memo"], reworded["memo"]]
    audit = svc.call("list_audit", {"account_id": acct["id"]}).json()
    new = [a for a in audit if a["at"] >= "2026"]  # the fixture's history is from 2025
    assert [a["ref"] for a in new] == [args["memo"], reworded["memo"]]


def test_overdraft_is_refused(svc: ServiceClient) -> None:
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


def test_repeated_create_order_conflicts(svc: ServiceClient) -> None:
    acct = build_fixture(SEED)["accounts"][1]["id"]
    body = {"order_number": "ORD-TEST-1", "account_id": acct, "total": 4200}
    assert svc.call("create_order", body).status_code == 201
    again = svc.call("create_order", {**body, "total": 999})
    assert again.status_code == 409
    assert "already exists" in again.json()["detail"]["message"]
    rows = [o for o in svc.tables()["db_orders"] if o["order_number"] == "ORD-TEST-1"]
    assert len(rows) == 1 and rows[0]["total"] == 4200
    assert svc.ops() == ["order.create"]
    assert svc.call("get_order", {"order_number": "ORD-TEST-1"}).json()["total"] == 4200


RACES = [
    ("create_order", {"order_number": "ORD-RACE-1", "total": 4200}, "db_orders"),
    (
        "pay_dividend",
        {"share_class": "common", "amount_per_share": 3, "reference": "DIV-R"},
        "db_dividends",
    ),
]


@pytest.mark.parametrize(("tool", "body", "table"), RACES, ids=[r[0] for r in RACES])
def test_a_unique_row_created_concurrently_since_the_check_is_a_409(
    svc: ServiceClient, monkeypatch: pytest.MonkeyPatch, tool: str, body: dict[str, Any], table: str
) -> None:
    """Two requests with one order number (dividend reference): the loser passed the
    existence check before the winner committed, so its insert hits the unique constraint.
    That is a 409, not a 500: the audit row's clock read must not flush the new row before
    the guarded flush."""
    if tool == "create_order":
        body = {**body, "account_id": build_fixture(SEED)["accounts"][1]["id"]}
    assert svc.call(tool, body).status_code == 201
    ops = svc.ops()
    real_scalar = Session.scalar
    missed = []

    def scalar_before_the_winner_committed(self: Session, statement: Any, *a: Any, **k: Any) -> Any:
        if not missed and f"{table}." in str(statement):
            missed.append(statement)
            return None
        return real_scalar(self, statement, *a, **k)

    monkeypatch.setattr(Session, "scalar", scalar_before_the_winner_committed)
    loser = svc.call(tool, body)
    assert missed and loser.status_code == 409, loser.text
    assert "exists" in loser.json()["detail"]["message"]
    assert svc.ops() == ops


def test_repeated_pay_dividend_conflicts(svc: ServiceClient) -> None:
    wf = svc.workflow("db-pay-dividend")
    params, again = retry_after_gold_plan(svc, wf, "pay_dividend")
    assert again.status_code == 409
    assert failed_invariants(svc, wf, params) == []


def test_idempotency_key_replays_composites_in_all_mode(svc: ServiceClient) -> None:
    """With keys honoured on every route, a keyed retry of a composite replays its response."""
    svc.configure(idempotency_mode="all")
    migration = {"name": "gift_cards", "columns": [{"name": "code", "type": "text"}]}
    dividend = {"share_class": "common", "amount_per_share": 3, "reference": "DIV-K"}
    adjust = {"account_id": ACCT, "delta": 10, "memo": "keyed"}
    assert_key_replays(svc, "apply_migration", migration, "k-1")
    assert_key_replays(svc, "pay_dividend", dividend, "k-1")
    # same key, different payload: refused
    assert_key_replays(svc, "adjust_balance", adjust, "k-1", changed={"delta": 11})
    ops = svc.ops()
    assert ops.count("migration.apply") == ops.count("dividend.declare") == 1
    assert ops.count("account.adjust") == 1


# ---- half-applied composites -------------------------------------------------------


def test_partial_migration_is_reported_and_repaired(svc: ServiceClient) -> None:
    with svc.ctx.engine.begin() as conn:
        conn.execute(text('CREATE TABLE "ext_tax_rates" ("region" TEXT, "rate" REAL)'))
    partial = svc.state()["partial"]
    assert len(partial) == 1 and "ext_tax_rates" in partial[0]
    schema = svc.call("get_schema").json()["tables"]
    assert [t for t in schema if not t["cataloged"]] == [
        {
            "name": "ext_tax_rates",
            "migration": "tax_rates",
            "cataloged": False,
            "columns": [{"name": "region", "type": "text"}, {"name": "rate", "type": "real"}],
        }
    ]
    assert {t["name"] for t in schema if t["cataloged"]} == set(_history_tables())

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
    # The repair is its own effect (the catalog row); a second repair changed nothing.
    assert [(r["op"], json.loads(r["identity"])) for r in log] == [
        ("migration.repair", {"name": "tax_rates"})
    ]
    assert svc.call("apply_migration", body).status_code == 409
    assert svc.call("repair_migration", {"name": "no_such"}).status_code == 404


@pytest.mark.usefixtures("crashable")
def test_crash_mid_dividend_then_resume(svc: ServiceClient) -> None:
    wf = svc.workflow("db-pay-dividend")
    params = params_for(wf)
    args = step_args(wf, -1, params)
    svc.call_until_crash("pay_dividend", args, "dividend.after_first_credit")
    state = svc.state()
    assert len(state["partial"]) == 1 and "1/3 credits paid" in state["partial"][0]
    again = svc.call("pay_dividend", args)
    assert again.status_code == 409 and "resume_dividend" in again.json()["detail"]["message"]
    dividend = svc.call("list_dividends", {"reference": params["reference"]}).json()[0]
    assert dividend["status"] == "processing"
    done = svc.call("resume_dividend", {"dividend_id": dividend["id"]})
    assert done.status_code == 200 and done.json()["status"] == "paid"
    assert svc.call("resume_dividend", {"dividend_id": dividend["id"]}).status_code == 200
    assert_done(svc, wf, params)


@pytest.mark.usefixtures("crashable")
def test_crash_after_ddl_then_repair(svc: ServiceClient) -> None:
    wf = svc.workflow("db-apply-migration")
    params = params_for(wf)
    args = step_args(wf, -1, params)
    svc.call_until_crash("apply_migration", args, "migration.after_ddl")
    assert svc.state()["partial"] == [
        f"table {params['table']} exists without a db_migrations row (half-applied)"
    ]
    assert svc.call("apply_migration", args).status_code == 409
    assert svc.call("repair_migration", {"name": params["name"]}).status_code == 200
    assert_done(svc, wf, params)


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
def test_bad_bodies_are_4xx(svc: ServiceClient, method: str, path: str, body: Any) -> None:
    assert_rejected(svc, method, path, json=body)
    assert svc.state()["extra"] == {"ext_tables": _history_tables()}


@pytest.mark.parametrize("raw", [*MALFORMED_JSON, b'{"delta": 5, "memo": "m"'])
def test_malformed_json_is_4xx(svc: ServiceClient, raw: bytes) -> None:
    paths = (ADJUST, "/v1/orders", "/v1/dividends", "/v1/migrations")
    assert_malformed_json_rejected(svc, [("POST", p) for p in paths], raw)


def test_bad_queries_are_4xx(svc: ServiceClient) -> None:
    assert svc.public.get("/v1/accounts", params={"tier": "diamond"}).status_code == 422
    assert svc.public.get("/v1/audit", params={"limit": 0}).status_code == 422
    assert svc.public.get("/v1/audit", params={"limit": "many"}).status_code == 422
    assert svc.public.get("/v1/orders/ORD-0").status_code == 404
    assert svc.public.get("/v1/accounts/acct_nope").status_code == 404
