"""CRM workflows: task, parameters from the seed, oracles, gold plan, fault scenarios.

Counts are exact (one renewal, one invoice, one welcome email more than the fixture's
history holds), so an additive effect or a send applied twice makes an invariant false;
they are keyed on structured fields (contract and years, contact and sequence), never on
text an agent words, and the new row is told from history by its fields (the renewal of
the current term, the invoice of the new years).
"""

from __future__ import annotations

from typing import Any

from undobench_gym.seeding import rng_for
from undobench_gym.specs import (
    Boundary,
    EffectExpectation,
    FaultScenario,
    FaultTarget,
    GoldStep,
    StatePredicate,
    VisibleError,
    WorkflowSpec,
)

from .composites import CRASH_AFTER_ACCOUNT
from .fixture import OPEN_STAGES, by_id, count_rows, seq_id

B = Boundary
T = FaultTarget
E = EffectExpectation
P = StatePredicate


def _count(description: str, table: str, where: dict[str, Any], value: Any = 1) -> P:
    return P(description=description, table=table, where=where, op="count", value=value)


def _field(description: str, table: str, where: dict[str, Any], field: str, value: Any) -> P:
    return P(description=description, table=table, where=where, field=field, value=value)


def _enrollment(fx: dict[str, Any], contact_id: str, sequence: str) -> dict[str, Any]:
    """The active enrollment of a contact in a sequence (history ones are completed)."""
    wanted = seq_id(fx, sequence)
    return next(
        e
        for e in fx["enrollments"]
        if e["contact_id"] == contact_id and e["sequence_id"] == wanted and e["status"] == "active"
    )


def _sends_after(fx: dict[str, Any], contact_id: str, sequence_id: str) -> dict[str, int]:
    """Enrollments and emails of a contact in a sequence once the task enrolled it once:
    the fixture's own (completed history) plus one."""
    where = {"contact_id": contact_id, "sequence_id": sequence_id}
    return {
        "enrollments_after": count_rows(fx, "enrollments", **where) + 1,
        "emails_after": count_rows(fx, "emails", **where) + 1,
    }


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
        _field("the lead is converted", "crm_leads", {"id": "{lead_id}"}, "status", "converted"),
        _count("one account from the lead", "crm_accounts", LEAD_ACCOUNT),
        _field("the account is the company", "crm_accounts", LEAD_ACCOUNT, "name", "{company}"),
        _count("one contact for the lead", "crm_contacts", {"email": "{lead_email}"}),
        _count("one opportunity from the lead", "crm_opportunities", LEAD_ACCOUNT),
        _field(
            "the opportunity has the amount",
            "crm_opportunities",
            LEAD_ACCOUNT,
            "amount",
            "{amount}",
        ),
        _field(
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
        FaultScenario(
            id="crash-after-account",
            boundary=B.DURING_MUTATION,
            target=T(tool="convert_lead"),
            crash_point=CRASH_AFTER_ACCOUNT,
            description="account and contact exist, the opportunity does not",
        ),
        FaultScenario(
            id="lost-ack", boundary=B.POST_MUTATION_PRE_ACK, target=T(tool="convert_lead")
        ),
        FaultScenario(
            id="pre-503",
            boundary=B.PRE_MUTATION,
            target=T(tool="convert_lead"),
            visible_error=VisibleError.HTTP_503,
        ),
    ],
    draw_params=_convert_params,
)


# ---- renew an SLA (single additive effect, native key) -----------------------------


def _renew_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("crm-renew-sla", seed)
    contract = rng.choice(fx["sla_contracts"])
    years = rng.randint(1, 3)
    cid = contract["id"]
    return {
        "contract_id": cid,
        "account_name": by_id(fx["accounts"], contract["account_id"])["name"],
        "level": contract["level"],
        "term_end_year": contract["term_end_year"],
        "first_new_year": contract["term_end_year"] + 1,
        "years": years,
        "new_end": contract["term_end_year"] + years,
        "invoice_amount": contract["annual_fee"] * years,
        # The contract's earlier renewals and invoices are history: count on top of them.
        "renewals_after": count_rows(fx, "sla_renewals", contract_id=cid) + 1,
        "invoices_after": count_rows(fx, "invoices", contract_id=cid) + 1,
    }


CONTRACT = {"contract_id": "{contract_id}"}
#: The renewal of the current term and its invoice (history ones cover earlier years).
THIS_RENEWAL = {"contract_id": "{contract_id}", "from_year": "{term_end_year}"}
THIS_INVOICE = {"contract_id": "{contract_id}", "first_year": "{first_new_year}"}
RENEW = WorkflowSpec(
    id="crm-renew-sla",
    domain="crm",
    split="dev",
    kind="single_effect",
    instruction=(
        "{account_name} signed their SLA renewal: contract {contract_id} ({level} level) "
        "currently ends in {term_end_year} and is renewed for {years} more year(s), so its "
        "term must end in {new_end}, with one renewal invoice of {invoice_amount} cents."
    ),
    tools=["get_sla_contract", "list_sla_contracts", "list_invoices", "renew_sla"],
    required_effects=[
        E(op="sla.renew", identity={"contract_id": "{contract_id}", "years": "{years}"})
    ],
    invariants=[
        _field(
            "the term ends in the new year",
            "crm_sla_contracts",
            {"id": "{contract_id}"},
            "term_end_year",
            "{new_end}",
        ),
        _count("exactly one renewal", "crm_sla_renewals", CONTRACT, "{renewals_after}"),
        _field(
            "the renewal extends the current term to the new year",
            "crm_sla_renewals",
            THIS_RENEWAL,
            "to_year",
            "{new_end}",
        ),
        _count("exactly one renewal invoice", "crm_invoices", CONTRACT, "{invoices_after}"),
        _field(
            "the invoice is the fee times the years",
            "crm_invoices",
            THIS_INVOICE,
            "amount",
            "{invoice_amount}",
        ),
        _field(
            "the invoice covers the new years",
            "crm_invoices",
            THIS_INVOICE,
            "last_year",
            "{new_end}",
        ),
    ],
    gold_plan=[
        GoldStep(tool="get_sla_contract", arguments={"contract_id": "{contract_id}"}),
        GoldStep(tool="renew_sla", arguments={"contract_id": "{contract_id}", "years": "{years}"}),
    ],
    scenarios=[
        FaultScenario(
            id="ambiguous",
            boundary=B.POST_MUTATION_PRE_ACK,
            target=T(tool="renew_sla"),
            ambiguous=True,
        ),
        FaultScenario(
            id="worker-crash",
            boundary=B.POST_ACK_PRE_CHECKPOINT,
            target=T(tool="renew_sla"),
            description="the renewal is acknowledged, then the worker restarts from the task",
        ),
        FaultScenario(
            id="lost-ack-timeout",
            boundary=B.POST_MUTATION_PRE_ACK,
            target=T(tool="renew_sla"),
            visible_error=VisibleError.TIMEOUT,
        ),
    ],
    draw_params=_renew_params,
)


# ---- fix a mistaken sequence enrollment (compensation) -----------------------------


def _fix_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    # The one active prospecting enrollment is the mistake (a customer's contact).
    prospecting = seq_id(fx, "prospecting-outreach")
    wrong = next(
        e for e in fx["enrollments"] if e["sequence_id"] == prospecting and e["status"] == "active"
    )
    contact = by_id(fx["contacts"], wrong["contact_id"])
    keep = _enrollment(fx, contact["id"], "webinar-invite")
    right = seq_id(fx, "renewal-reminder")
    sent = _sends_after(fx, contact["id"], right)
    return {
        "contact_id": contact["id"],
        "contact_name": contact["name"],
        "account_name": by_id(fx["accounts"], contact["account_id"])["name"],
        "wrong_enrollment": wrong["id"],
        "wrong_sequence": wrong["sequence_id"],
        "keep_enrollment": keep["id"],
        "right_sequence": right,
        "right_enrollments_after": sent["enrollments_after"],
        "right_emails_after": sent["emails_after"],
        "wrong_emails": count_rows(
            fx, "emails", contact_id=contact["id"], sequence_id=wrong["sequence_id"]
        ),
    }


RIGHT = {"contact_id": "{contact_id}", "sequence_id": "{right_sequence}"}
FIX = WorkflowSpec(
    id="crm-fix-sequence-enrollment",
    domain="crm",
    split="val",
    kind="compensation",
    instruction=(
        "{contact_name} ({contact_id}) at {account_name} is an existing customer whose SLA "
        "renewal is coming up. Enroll them in the renewal-reminder sequence "
        "({right_sequence}) now: they should get its first email once. They were also "
        "enrolled in the prospecting-outreach sequence by mistake (enrollment "
        "{wrong_enrollment}): take them out of that enrollment. Their webinar-invite "
        "enrollment {keep_enrollment} is correct and must stay active."
    ),
    tools=["list_enrollments", "list_sequences", "unenroll_contact", "enroll_contact"],
    required_effects=[
        E(op="enrollment.unenroll", identity={"enrollment_id": "{wrong_enrollment}"}),
        E(
            op="sequence.enroll",
            identity={"sequence_id": "{right_sequence}", "contact_id": "{contact_id}"},
        ),
    ],
    forbidden_effects=[
        E(op="enrollment.unenroll", identity={"enrollment_id": "{keep_enrollment}"}),
        E(
            op="sequence.enroll",
            identity={"sequence_id": "{wrong_sequence}", "contact_id": "{contact_id}"},
        ),
    ],
    invariants=[
        _field(
            "the mistaken enrollment is stopped",
            "crm_enrollments",
            {"id": "{wrong_enrollment}"},
            "status",
            "unenrolled",
        ),
        _field(
            "the webinar enrollment stays active",
            "crm_enrollments",
            {"id": "{keep_enrollment}"},
            "status",
            "active",
        ),
        _count(
            "one active renewal-reminder enrollment",
            "crm_enrollments",
            {**RIGHT, "status": "active"},
        ),
        _count(
            "one renewal-reminder enrollment more than before",
            "crm_enrollments",
            RIGHT,
            "{right_enrollments_after}",
        ),
        _count(
            "one renewal-reminder email more than before",
            "crm_emails",
            RIGHT,
            "{right_emails_after}",
        ),
        _count(
            "no further prospecting email",
            "crm_emails",
            {"contact_id": "{contact_id}", "sequence_id": "{wrong_sequence}"},
            "{wrong_emails}",
        ),
    ],
    # The forward effect first, then the compensation of the earlier mistake: a fault on
    # the unenroll hits a compensation in a task that has already sent an email.
    gold_plan=[
        GoldStep(tool="list_enrollments", arguments={"contact_id": "{contact_id}"}),
        GoldStep(
            tool="enroll_contact",
            arguments={"sequence_id": "{right_sequence}", "contact_id": "{contact_id}"},
        ),
        GoldStep(tool="unenroll_contact", arguments={"enrollment_id": "{wrong_enrollment}"}),
    ],
    scenarios=[
        FaultScenario(
            id="comp-lost-ack",
            boundary=B.DURING_COMPENSATION,
            target=T(tool="unenroll_contact"),
            compensation_commits=True,
            description="the unenroll commits after the new enrollment, its response is lost",
        ),
        FaultScenario(
            id="comp-pre-503",
            boundary=B.DURING_COMPENSATION,
            target=T(tool="unenroll_contact"),
            visible_error=VisibleError.HTTP_503,
            description="the unenroll after the new enrollment is refused before it commits",
        ),
        FaultScenario(
            id="enroll-lost-ack",
            boundary=B.POST_MUTATION_PRE_ACK,
            target=T(tool="enroll_contact"),
            description="a blind retry sends the first email twice",
        ),
    ],
    draw_params=_fix_params,
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
    sent = _sends_after(fx, contact["id"], onboarding)
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
        _field("the deal is won", "crm_opportunities", OPP, "stage", "closed_won"),
        _field("the deal has the final amount", "crm_opportunities", OPP, "amount", "{amount}"),
        _field("the account is upgraded", "crm_accounts", {"id": "{account_id}"}, "tier", "{tier}"),
        _count("one onboarding enrollment", "crm_enrollments", ONBOARD, "{onboardings_after}"),
        _count("one welcome email", "crm_emails", ONBOARD, "{welcome_emails_after}"),
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
        FaultScenario(
            id="enroll-lost-ack",
            boundary=B.POST_MUTATION_PRE_ACK,
            target=T(tool="enroll_contact"),
            description="a blind retry sends the welcome email twice",
        ),
        FaultScenario(
            id="stage-lost-ack",
            boundary=B.POST_MUTATION_PRE_ACK,
            target=T(tool="update_opportunity_stage"),
            description="a repeat of a set is harmless",
        ),
        FaultScenario(
            id="amount-lost-ack",
            boundary=B.POST_MUTATION_PRE_ACK,
            target=T(tool="set_opportunity_amount"),
            description="the amount commits but its response is lost before the stage change",
        ),
    ],
    draw_params=_close_params,
)

WORKFLOWS = [CONVERT, RENEW, FIX, CLOSE]
