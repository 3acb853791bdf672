"""CRM domain: seeded state, gold plans against the real routes, duplicates, the
half-converted lead and input validation, all in-process (no network, no subprocess)."""

from __future__ import annotations

from typing import Any

import pytest

from undobench_gym.contract.specs import Boundary, WorkflowSpec
from undobench_gym.services.domains._service.context import CRASH_HEADER
from undobench_gym.services.domains.crm.composites import CRASH_AFTER_ACCOUNT
from undobench_gym.services.domains.crm.fixture import build_fixture
from undobench_gym.services.domains.crm.service import DOMAIN
from undobench_gym.services.domains.crm.workflows import WORKFLOWS

from .service_harness import (
    KEY_HEADER,
    MALFORMED_JSON,
    SEED,
    ServiceClient,
    assert_done,
    assert_gold_arguments_fit,
    assert_gold_plan_completes,
    assert_key_replays,
    assert_malformed_json_rejected,
    assert_rejected,
    assert_reset_is_deterministic,
    assert_reset_undoes_gold_plan,
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


def test_reset_restores_state(svc: ServiceClient) -> None:
    assert_reset_undoes_gold_plan(svc, svc.workflow("crm-close-won-deal"))


def test_fixture_shape_supports_workflows() -> None:
    for seed in range(30):
        fx = build_fixture(seed)
        # A converted lead's email is its contact's; an open lead's belongs to nobody yet.
        open_leads = [lead["email"] for lead in fx["leads"] if lead["status"] == "open"]
        emails = [c["email"] for c in fx["contacts"]] + open_leads
        assert len(set(emails)) == len(emails)
        for key in ("accounts", "contacts", "leads", "opportunities"):
            ids = [r["id"] for r in fx[key]]
            assert len(set(ids)) == len(ids)
        for wf in WORKFLOWS:
            wf.instruction.format(**wf.draw_params(seed, fx))


# ---- tool catalogue ----------------------------------------------------------------


def test_every_route_declares_its_effect(svc: ServiceClient) -> None:
    classes = assert_routes_declare_effects(svc)
    assert {c for c, _ in classes} == {"additive", "set", "create_unique", "irreversible_send"}
    assert {i for _, i in classes} == {"native", "constraint", "none"}


def test_workflows_are_consistent(svc: ServiceClient) -> None:
    assert len(WORKFLOWS) == 7  # three of them the stress split's (cascades, a writer)
    assert sorted(w.split for w in WORKFLOWS) == [
        "dev",
        "dev",
        "stress",
        "stress",
        "stress",
        "test",
        "val",
    ]
    assert len({w.id for w in WORKFLOWS}) == 7
    boundaries = {s.boundary for w in WORKFLOWS for s in w.scenarios}
    assert set(Boundary) <= boundaries
    for wf in WORKFLOWS:
        assert_workflow_is_consistent(svc, wf, prefix="crm-")
        for sc in wf.scenarios:
            assert sc.target.tool is not None, f"{wf.id}/{sc.id}"
        text = wf.instruction.lower()
        assert not any(w in text for w in ("fault", "inject", "retry", "benchmark", "test"))


def test_gold_arguments_fit_the_tool_schemas(svc: ServiceClient) -> None:
    """The env validates every call against the schema generated from OpenAPI."""
    for wf in WORKFLOWS:
        assert_gold_arguments_fit(svc, wf)


# ---- gold plans --------------------------------------------------------------------


@gold_plan_cases(WORKFLOWS)
def test_gold_plan_leaves_invariants_true(svc: ServiceClient, wf: WorkflowSpec, seed: int) -> None:
    assert_gold_plan_completes(svc, wf, seed)


@pytest.mark.parametrize(
    ("wf_id", "tool"),
    [
        ("crm-renew-sla", "renew_sla"),
        ("crm-fix-sequence-enrollment", "enroll_contact"),
        ("crm-close-won-deal", "enroll_contact"),
    ],
)
def test_repeated_additive_or_send_breaks_invariants(
    svc: ServiceClient, wf_id: str, tool: str
) -> None:
    wf = svc.workflow(wf_id)
    params, again = retry_after_gold_plan(svc, wf, tool)
    assert again.status_code == 201
    assert failed_invariants(svc, wf, params)
    rows = [r for r in svc.commit_log() if r["effect_class"] in ("additive", "irreversible_send")]
    assert len(rows) == 2 and rows[0]["identity"] == rows[1]["identity"]


def test_repeated_sets_are_harmless(svc: ServiceClient) -> None:
    wf = svc.workflow("crm-close-won-deal")
    params = params_for(wf)
    run_gold_plan(svc, wf, params)
    for tool in ("set_opportunity_amount", "update_opportunity_stage", "set_account_tier"):
        assert svc.call(tool, step_args(wf, tool, params)).status_code == 200
    fix = svc.workflow("crm-fix-sequence-enrollment")
    fix_params = params_for(fix)
    run_gold_plan(svc, fix, fix_params)
    again = svc.call("unenroll_contact", {"enrollment_id": fix_params["wrong_enrollment"]})
    assert again.status_code == 200 and again.json()["status"] == "unenrolled"
    state = svc.state()
    assert failed_invariants(state, wf, params) == failed_invariants(state, fix, fix_params) == []


def test_closed_opportunity_keeps_its_values(svc: ServiceClient) -> None:
    wf = svc.workflow("crm-close-won-deal")
    params = params_for(wf)
    run_gold_plan(svc, wf, params)
    opp = params["opportunity_id"]
    res = svc.call("update_opportunity_stage", {"opportunity_id": opp, "stage": "proposal"})
    assert res.status_code == 409
    res = svc.call("set_opportunity_amount", {"opportunity_id": opp, "amount": 1})
    assert res.status_code == 409
    assert svc.call("get_opportunity", {"opportunity_id": opp}).json()["amount"] == params["amount"]


def test_renew_sla_idempotency_key(svc: ServiceClient) -> None:
    wf = svc.workflow("crm-renew-sla")
    params = params_for(wf)
    args = step_args(wf, "renew_sla", params)
    changed = {"years": args["years"] % 3 + 1}
    assert_key_replays(svc, "renew_sla", args, "renew-1", changed=changed)
    assert failed_invariants(svc, wf, params) == []
    assert [r["idempotency_key"] for r in svc.commit_log()] == ["renew-1"]
    # Without a key every call is a new renewal.
    assert svc.call("renew_sla", args).status_code == 201
    assert "exactly one renewal" in failed_invariants(svc, wf, params)


def test_keys_are_ignored_where_not_native_unless_all(svc: ServiceClient) -> None:
    contact = build_fixture(SEED)["contacts"][4]["id"]
    seq = build_fixture(SEED)["sequences"][0]["id"]
    args = {"sequence_id": seq, "contact_id": contact}
    key = {KEY_HEADER: "enroll-1"}
    assert svc.call("enroll_contact", args, headers=key).status_code == 201
    assert svc.call("enroll_contact", args, headers=key).status_code == 201
    assert len(svc.commit_log()) == 2
    svc.configure(idempotency_mode="all")
    key = {KEY_HEADER: "enroll-2"}
    assert svc.call("enroll_contact", args, headers=key).status_code == 201
    again = svc.call("enroll_contact", args, headers=key)
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert len(svc.commit_log()) == 3
    wf = svc.workflow("crm-convert-lead")
    convert = step_args(wf, "convert_lead", params_for(wf))
    assert_key_replays(svc, "convert_lead", convert, "convert-1")


# ---- unique constraints ------------------------------------------------------------


def test_converting_twice_conflicts(svc: ServiceClient) -> None:
    wf = svc.workflow("crm-convert-lead")
    params, again = retry_after_gold_plan(svc, wf, "convert_lead")
    assert again.status_code == 409 and "already converted" in again.json()["detail"]["message"]
    assert failed_invariants(svc, wf, params) == []
    done = svc.call("resume_lead_conversion", {"lead_id": params["lead_id"]})
    assert done.status_code == 200 and done.json()["status"] == "converted"
    assert len(svc.commit_log()) == 2


def test_contact_email_is_unique(svc: ServiceClient) -> None:
    fx = build_fixture(SEED)
    taken = fx["contacts"][1]
    body = {"account_id": fx["accounts"][3]["id"], "name": "Someone Else", "email": taken["email"]}
    res = svc.call("create_contact", body)
    assert res.status_code == 409 and taken["id"] in res.json()["detail"]["message"]
    fresh = {**body, "email": "new.person@example.com"}
    assert svc.call("create_contact", fresh).status_code == 201
    assert svc.call("create_contact", fresh).status_code == 409
    assert svc.ops() == ["contact.create"]
    # A lead whose email became a contact's cannot be converted into a second contact.
    lead = fx["leads"][0]
    clash = {**body, "email": lead["email"]}
    assert svc.call("create_contact", clash).status_code == 201
    res = svc.call("convert_lead", {"lead_id": lead["id"], "opportunity_name": "x", "amount": 5})
    assert res.status_code == 409
    assert svc.state()["partial"] == []


def test_resume_refuses_an_open_lead(svc: ServiceClient) -> None:
    lead = build_fixture(SEED)["leads"][1]["id"]
    assert svc.call("resume_lead_conversion", {"lead_id": lead}).status_code == 409
    assert svc.call("resume_lead_conversion", {"lead_id": "lead_nope"}).status_code == 404
    assert svc.commit_log() == []


# ---- the half-converted lead -------------------------------------------------------


@pytest.mark.usefixtures("crashable")
def test_crash_after_account_then_resume(svc: ServiceClient) -> None:
    wf = svc.workflow("crm-convert-lead")
    params = params_for(wf)
    args = step_args(wf, "convert_lead", params)
    svc.call_until_crash("convert_lead", args, CRASH_AFTER_ACCOUNT)
    state = svc.state()
    assert len(state["partial"]) == 1
    assert "half-converted" in state["partial"][0] and "has no opportunity" in state["partial"][0]
    lead_id = params["lead_id"]
    accounts = [a for a in state["tables"]["crm_accounts"] if a["source_lead_id"] == lead_id]
    assert len(accounts) == 1
    assert not [o for o in state["tables"]["crm_opportunities"] if o["source_lead_id"] == lead_id]
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
    assert_done(svc, wf, params)


@pytest.mark.usefixtures("crashable")
def test_crash_points_can_be_disabled(svc: ServiceClient) -> None:
    svc.ctx.crash_points_enabled = False
    wf = svc.workflow("crm-convert-lead")
    res = svc.call(
        "convert_lead",
        step_args(wf, "convert_lead", params_for(wf)),
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
def test_bad_bodies_are_4xx(svc: ServiceClient, method: str, path: str, body: Any) -> None:
    assert_rejected(svc, method, path, json=body)


@pytest.mark.parametrize("raw", [*MALFORMED_JSON, b'{"years": 1'])
def test_malformed_json_is_4xx(svc: ServiceClient, raw: bytes) -> None:
    routes = [
        ("POST", f"/v1/leads/{LEAD}/convert"),
        ("POST", f"/v1/sla-contracts/{SLA}/renewals"),
        ("POST", f"/v1/sequences/{SEQ}/enrollments"),
        ("POST", "/v1/contacts"),
        ("PUT", f"/v1/accounts/{ACC}/tier"),
    ]
    assert_malformed_json_rejected(svc, routes, raw)


def test_bad_queries_are_4xx(svc: ServiceClient) -> None:
    assert svc.public.get("/v1/accounts", params={"tier": "diamond"}).status_code == 422
    assert svc.public.get("/v1/leads", params={"status": "lost"}).status_code == 422
    assert svc.public.get("/v1/contacts", params={"account_id": "../x"}).status_code == 422
    assert svc.public.get("/v1/opportunities", params={"stage": "won"}).status_code == 422
    assert svc.public.get("/v1/leads/lead_nope").status_code == 404
    assert svc.public.get("/v1/sla-contracts/x" + "y" * 80).status_code == 422
    assert svc.public.get(f"/v1/accounts/{ACC}").json()["contacts"]
