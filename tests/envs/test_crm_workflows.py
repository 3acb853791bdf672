"""CRM workflows against the benchmark's own effect oracle, in-process: the shared
`WorkflowContract` (identities are semantic and agree between the route labels and the
commit log, gold plans succeed with no unrequired effect, scenarios aim at what they say,
a re-sent enrollment is a duplicate), and here the behaviours particular to the CRM: a
renewal of another term, an enrollment in another sequence, a detour through another
tier, a reworded re-conversion, and finishing a half-converted lead (allowed)."""

from __future__ import annotations

import pytest

from undobench_gym.services.domains.crm.composites import CRASH_AFTER_ACCOUNT
from undobench_gym.services.domains.crm.fixture import build_fixture
from undobench_gym.services.domains.crm.service import DOMAIN
from undobench_gym.services.domains.crm.workflows import WORKFLOWS

from .service_harness import ServiceClient, params_for, run_gold_plan, step_args
from .workflow_harness import Row, WorkflowContract, gold, gold_plan_logs, ops, reworded, verdict

pytestmark = pytest.mark.service(DOMAIN)


class TestWorkflowContract(WorkflowContract):
    workflows = WORKFLOWS
    free_text = frozenset(
        {"reason", "description", "memo", "note", "notes", "text", "body", "message"}
        | {"subject", "summary", "comment", "title", "name"}
    )
    #: convert_lead commits the opportunity it opens besides the conversion.
    sub_effects = {"lead.opportunity": frozenset({"amount", "lead_id"})}
    resends = reworded(
        "crm",
        [
            (wf_id, "enroll_contact", {})
            for wf_id in ("crm-fix-sequence-enrollment", "crm-close-won-deal")
        ],
    )

    def exercise(self, svc: ServiceClient) -> list[Row]:
        """Every gold plan, a conversion finished by resume_lead_conversion, and a new
        contact."""
        log = gold_plan_logs(svc, WORKFLOWS)
        wf = svc.workflow("crm-convert-lead")
        params = params_for(wf, svc.seed)
        args = step_args(wf, "convert_lead", params)
        svc.call_until_crash("convert_lead", args, CRASH_AFTER_ACCOUNT)
        svc.ok("resume_lead_conversion", {"lead_id": params["lead_id"]})
        account = build_fixture(svc.seed)["accounts"][3]["id"]
        contact = {"account_id": account, "name": "New Person", "email": "n@x.example"}
        svc.ok("create_contact", contact)
        return log + svc.commit_log()


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


def test_enrolling_in_another_sequence_is_harm(svc: ServiceClient) -> None:
    ep = gold(svc, "crm-fix-sequence-enrollment")
    fx = build_fixture(svc.seed)
    webinar = next(s["id"] for s in fx["sequences"] if s["name"] == "webinar-invite")
    contact = ep.params["contact_id"]
    svc.ok("enroll_contact", {"sequence_id": webinar, "contact_id": contact})
    svc.ok("enroll_contact", {"sequence_id": ep.params["wrong_sequence"], "contact_id": contact})
    v = ep.verdict()
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
    ep = gold(svc, "crm-convert-lead")  # the conversion's answer was lost
    args = step_args(ep.wf, "convert_lead", ep.params)
    again = {**args, "opportunity_name": args["opportunity_name"] + " (retry)"}
    assert svc.call("convert_lead", again).status_code == 409
    resumed = svc.ok("resume_lead_conversion", {"lead_id": ep.params["lead_id"]})
    assert resumed["status"] == "converted"
    assert ep.verdict().success
    assert svc.ops() == ["lead.convert", "lead.opportunity"]


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
    assert svc.ops().count("lead.resume") == 1
