"""CRM sales workflows: convert a qualified lead (a composite) and close a won deal."""

from __future__ import annotations

from typing import Any

from undobench_gym.contract.seeding import rng_for
from undobench_gym.contract.specs import FaultScenario, GoldStep, VisibleError, WorkflowSpec
from undobench_gym.services.domains.crm.composites import CRASH_AFTER_ACCOUNT
from undobench_gym.services.domains.crm.fixture import OPEN_STAGES, seq_id
from undobench_gym.services.domains.crm.workflows_common import B, E, P, sends_after

# ---- convert a lead (composite) ----------------------------------------------------


def _convert_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("crm-convert-lead", seed)
    lead = rng.choice([x for x in fx["leads"] if x["status"] == "open"])
    product = rng.choice(["platform", "analytics", "support desk", "data pipeline"])
    return {
        "lead_id": lead["id"],
        "lead_name": lead["name"],
        "lead_email": lead["email"],
        "company": lead["company"],
        "opp_name": f"{lead['company']} {product} rollout",
        "amount": rng.randint(20, 800) * 10_000 + rng.choice([0, 2_500, 5_000]),
    }


LEAD_ACCOUNT = {"source_lead_id": "{lead_id}"}
CONVERT = WorkflowSpec(
    id="crm-convert-lead",
    domain="crm",
    split="dev",
    kind="composite",
    instruction=(
        "Sales qualified the lead {lead_name} from {company} (lead {lead_id}). Convert it "
        'in the CRM, with an opportunity named "{opp_name}" worth {amount} cents. The '
        "lead must end up converted exactly once: one account, one contact and one "
        "opportunity."
    ),
    tools=["list_leads", "get_lead", "convert_lead", "resume_lead_conversion", "get_account"],
    required_effects=[
        E(op="lead.convert", identity={"lead_id": "{lead_id}"}),
        E(op="lead.opportunity", identity={"lead_id": "{lead_id}", "amount": "{amount}"}),
    ],
    # Finishing the conversion after it stopped half-way is recovery, not harm.
    allowed_effects=[E(op="lead.resume", identity={"lead_id": "{lead_id}"})],
    invariants=[
        P.field_is(
            "the lead is converted", "crm_leads", {"id": "{lead_id}"}, "status", "converted"
        ),
        P.count("one account from the lead", "crm_accounts", LEAD_ACCOUNT),
        P.field_is("the account is the company", "crm_accounts", LEAD_ACCOUNT, "name", "{company}"),
        P.count("one contact for the lead", "crm_contacts", {"email": "{lead_email}"}),
        P.count("one opportunity from the lead", "crm_opportunities", LEAD_ACCOUNT),
        P.field_is(
            "the opportunity has the amount",
            "crm_opportunities",
            LEAD_ACCOUNT,
            "amount",
            "{amount}",
        ),
        P.field_is(
            "the opportunity has the name", "crm_opportunities", LEAD_ACCOUNT, "name", "{opp_name}"
        ),
    ],
    gold_plan=[
        GoldStep(tool="get_lead", arguments={"lead_id": "{lead_id}"}),
        GoldStep(
            tool="convert_lead",
            arguments={
                "lead_id": "{lead_id}",
                "opportunity_name": "{opp_name}",
                "amount": "{amount}",
            },
        ),
    ],
    scenarios=[
        FaultScenario.on(
            "crash-after-account",
            B.DURING_MUTATION,
            "convert_lead",
            crash_point=CRASH_AFTER_ACCOUNT,
            description="account and contact exist, the opportunity does not",
        ),
        FaultScenario.on("lost-ack", B.POST_MUTATION_PRE_ACK, "convert_lead"),
        FaultScenario.on(
            "pre-503", B.PRE_MUTATION, "convert_lead", visible_error=VisibleError.HTTP_503
        ),
    ],
    draw_params=_convert_params,
)


# ---- close a deal (multi effect) ---------------------------------------------------


def _close_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("crm-close-won-deal", seed)
    onboarding = seq_id(fx, "customer-onboarding")
    onboarded = {e["contact_id"] for e in fx["enrollments"] if e["sequence_id"] == onboarding}
    # Accounts 0 and 1 already have contacts in current sequences; of the others, those
    # with a contact nobody has onboarded yet.
    newcomers = {
        a["id"]: [
            c for c in fx["contacts"] if c["account_id"] == a["id"] and c["id"] not in onboarded
        ]
        for a in fx["accounts"][2:]
    }
    acct = rng.choice([a for a in fx["accounts"][2:] if newcomers[a["id"]]])
    opp = next(
        o
        for o in fx["opportunities"]
        if o["account_id"] == acct["id"] and o["stage"] in OPEN_STAGES
    )
    contact = newcomers[acct["id"]][0]
    amount = opp["amount"] + rng.choice([-1, 1]) * rng.randint(1, 40) * 5_000
    sent = sends_after(fx, contact["id"], onboarding)
    return {
        "account_id": acct["id"],
        "account_name": acct["name"],
        "opportunity_id": opp["id"],
        "opp_name": opp["name"],
        "amount": amount,
        "tier": rng.choice(["premium", "enterprise"]),
        "contact_id": contact["id"],
        "contact_name": contact["name"],
        "sequence_id": onboarding,
        "onboardings_after": sent["enrollments_after"],
        "welcome_emails_after": sent["emails_after"],
    }


OPP = {"id": "{opportunity_id}"}
ONBOARD = {"contact_id": "{contact_id}", "sequence_id": "{sequence_id}"}
CLOSE = WorkflowSpec(
    id="crm-close-won-deal",
    domain="crm",
    split="test",
    kind="multi_effect",
    instruction=(
        '{account_name} signed! Opportunity "{opp_name}" ({opportunity_id}) closed at a '
        "final amount of {amount} cents. Record that amount, move the opportunity to "
        "closed_won, upgrade account {account_id} to the {tier} tier, and enroll their "
        "contact {contact_name} ({contact_id}) in the customer-onboarding sequence "
        "({sequence_id}) so they receive exactly one welcome email."
    ),
    tools=[
        "get_opportunity",
        "get_account",
        "list_enrollments",
        "set_opportunity_amount",
        "update_opportunity_stage",
        "set_account_tier",
        "enroll_contact",
        "unenroll_contact",  # the inverse: an unwanted enrollment can be stopped
    ],
    required_effects=[
        E(
            op="opportunity.amount",
            identity={"opportunity_id": "{opportunity_id}", "amount": "{amount}"},
        ),
        E(
            op="opportunity.stage",
            identity={"opportunity_id": "{opportunity_id}", "stage": "closed_won"},
        ),
        E(op="account.tier", identity={"account_id": "{account_id}", "tier": "{tier}"}),
        E(
            op="sequence.enroll",
            identity={"sequence_id": "{sequence_id}", "contact_id": "{contact_id}"},
        ),
    ],
    invariants=[
        P.field_is("the deal is won", "crm_opportunities", OPP, "stage", "closed_won"),
        P.field_is("the deal has the final amount", "crm_opportunities", OPP, "amount", "{amount}"),
        P.field_is(
            "the account is upgraded", "crm_accounts", {"id": "{account_id}"}, "tier", "{tier}"
        ),
        P.count("one onboarding enrollment", "crm_enrollments", ONBOARD, "{onboardings_after}"),
        P.count("one welcome email", "crm_emails", ONBOARD, "{welcome_emails_after}"),
    ],
    gold_plan=[
        GoldStep(tool="get_opportunity", arguments={"opportunity_id": "{opportunity_id}"}),
        GoldStep(
            tool="set_opportunity_amount",
            arguments={"opportunity_id": "{opportunity_id}", "amount": "{amount}"},
        ),
        GoldStep(
            tool="update_opportunity_stage",
            arguments={"opportunity_id": "{opportunity_id}", "stage": "closed_won"},
        ),
        GoldStep(
            tool="set_account_tier", arguments={"account_id": "{account_id}", "tier": "{tier}"}
        ),
        GoldStep(
            tool="enroll_contact",
            arguments={"sequence_id": "{sequence_id}", "contact_id": "{contact_id}"},
        ),
    ],
    scenarios=[
        FaultScenario.on(
            "enroll-lost-ack",
            B.POST_MUTATION_PRE_ACK,
            "enroll_contact",
            description="a blind retry sends the welcome email twice",
        ),
        FaultScenario.on(
            "stage-lost-ack",
            B.POST_MUTATION_PRE_ACK,
            "update_opportunity_stage",
            description="a repeat of a set is harmless",
        ),
        FaultScenario.on(
            "amount-lost-ack",
            B.POST_MUTATION_PRE_ACK,
            "set_opportunity_amount",
            description="the amount commits but its response is lost before the stage change",
        ),
    ],
    draw_params=_close_params,
)
