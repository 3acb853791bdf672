"""CRM customer workflows: renew an SLA contract (a native key) and fix a mistaken
sequence enrollment (a compensation after a send)."""

from __future__ import annotations

from typing import Any

from undobench_gym.contract.seeding import rng_for
from undobench_gym.contract.specs import FaultScenario, GoldStep, VisibleError, WorkflowSpec
from undobench_gym.services.domains.crm.fixture import by_id, count_rows, seq_id
from undobench_gym.services.domains.crm.workflows_common import (
    B,
    E,
    P,
    active_enrollment,
    sends_after,
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
        P.field_is(
            "the term ends in the new year",
            "crm_sla_contracts",
            {"id": "{contract_id}"},
            "term_end_year",
            "{new_end}",
        ),
        P.count("exactly one renewal", "crm_sla_renewals", CONTRACT, "{renewals_after}"),
        P.field_is(
            "the renewal extends the current term to the new year",
            "crm_sla_renewals",
            THIS_RENEWAL,
            "to_year",
            "{new_end}",
        ),
        P.count("exactly one renewal invoice", "crm_invoices", CONTRACT, "{invoices_after}"),
        P.field_is(
            "the invoice is the fee times the years",
            "crm_invoices",
            THIS_INVOICE,
            "amount",
            "{invoice_amount}",
        ),
        P.field_is(
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
        FaultScenario.on("ambiguous", B.POST_MUTATION_PRE_ACK, "renew_sla", ambiguous=True),
        FaultScenario.on(
            "worker-crash",
            B.POST_ACK_PRE_CHECKPOINT,
            "renew_sla",
            description="the renewal is acknowledged, then the worker restarts from the task",
        ),
        FaultScenario.on(
            "lost-ack-timeout",
            B.POST_MUTATION_PRE_ACK,
            "renew_sla",
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
    keep = active_enrollment(fx, contact["id"], "webinar-invite")
    right = seq_id(fx, "renewal-reminder")
    sent = sends_after(fx, contact["id"], right)
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
        P.field_is(
            "the mistaken enrollment is stopped",
            "crm_enrollments",
            {"id": "{wrong_enrollment}"},
            "status",
            "unenrolled",
        ),
        P.field_is(
            "the webinar enrollment stays active",
            "crm_enrollments",
            {"id": "{keep_enrollment}"},
            "status",
            "active",
        ),
        P.count(
            "one active renewal-reminder enrollment",
            "crm_enrollments",
            {**RIGHT, "status": "active"},
        ),
        P.count(
            "one renewal-reminder enrollment more than before",
            "crm_enrollments",
            RIGHT,
            "{right_enrollments_after}",
        ),
        P.count(
            "one renewal-reminder email more than before",
            "crm_emails",
            RIGHT,
            "{right_emails_after}",
        ),
        P.count(
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
        FaultScenario.on(
            "comp-lost-ack",
            B.DURING_COMPENSATION,
            "unenroll_contact",
            compensation_commits=True,
            description="the unenroll commits after the new enrollment, its response is lost",
        ),
        FaultScenario.on(
            "comp-pre-503",
            B.DURING_COMPENSATION,
            "unenroll_contact",
            visible_error=VisibleError.HTTP_503,
            description="the unenroll after the new enrollment is refused before it commits",
        ),
        FaultScenario.on(
            "enroll-lost-ack",
            B.POST_MUTATION_PRE_ACK,
            "enroll_contact",
            description="a blind retry sends the first email twice",
        ),
    ],
    draw_params=_fix_params,
)
