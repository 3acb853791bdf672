"""Single-transaction CRM mutations: contacts, tiers, opportunities, SLA renewals and
sequence enrollments. Each writes its commit-log row in the same transaction."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from undobench_gym.services.domains._service.kit import (
    Effect,
    KeyHeader,
    error,
    flush_or_409,
    get_or_404,
    new_id,
    now,
    row,
    run_mutation,
    write_route,
)
from undobench_gym.services.domains.crm.common import (
    CLOSED,
    MAX_AMOUNT,
    STAGE_PATTERN,
    TIER_PATTERN,
    Id,
    PathId,
    contract_view,
    enrollment_view,
)
from undobench_gym.services.domains.crm.models import (
    Account,
    Contact,
    Email,
    Enrollment,
    Invoice,
    Opportunity,
    Sequence,
    SlaContract,
    SlaRenewal,
)
from undobench_gym.services.domains.crm.responses import (
    AccountOut,
    ContactOut,
    EnrollmentDetail,
    OpportunityOut,
    RenewalOut,
)

router = APIRouter(prefix="/v1")

#: Which account gets which email: the name is free text, and the email is unique.
CREATE_CONTACT = Effect("contact.create", "create_unique", ("account_id", "email"), "constraint")
SET_TIER = Effect("account.tier", "set", ("account_id", "tier"))
SET_STAGE = Effect("opportunity.stage", "set", ("opportunity_id", "stage"))
SET_AMOUNT = Effect("opportunity.amount", "set", ("opportunity_id", "amount"))
RENEW_SLA = Effect("sla.renew", "additive", ("contract_id", "years"), "native")
#: Who is enrolled in which sequence: every enrollment sends an email at once.
ENROLL = Effect("sequence.enroll", "irreversible_send", ("sequence_id", "contact_id"))
UNENROLL = Effect("enrollment.unenroll", "set", ("enrollment_id",), compensation=True)


class ContactIn(BaseModel):
    account_id: Id
    name: str = Field(min_length=1, max_length=255)
    email: str = Field(min_length=3, max_length=255, pattern=r"^[^@\s]+@[^@\s]+$")


@write_route(router, "POST", "/contacts", "create_contact", CREATE_CONTACT, ContactOut, 201)
def create_contact(request: Request, body: ContactIn) -> JSONResponse:
    """Add a contact to an account. Contact emails are unique: a repeat is refused (409)."""
    payload = body.model_dump()

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        found = s.scalar(select(Contact).where(Contact.email == body.email))
        if found is not None:
            raise error(
                409,
                "resource_exists",
                f"Contact {found.id} already has the email {body.email} (account "
                f"{found.account_id}); read it with list_contacts",
            )
        get_or_404(s, Account, body.account_id, "account")
        c = Contact(id=new_id(s, "con"), created=now(s), **payload)
        s.add(c)
        CREATE_CONTACT.commit(s, payload, key)
        flush_or_409(s, f"Email {body.email} is taken")  # a concurrent create won
        return 201, row(c)

    return run_mutation(
        request, route="create_contact", native=CREATE_CONTACT.native, payload=payload, apply=apply
    )


class TierIn(BaseModel):
    tier: str = Field(pattern=TIER_PATTERN)


@write_route(router, "PUT", "/accounts/{account_id}/tier", "set_account_tier", SET_TIER, AccountOut)
def set_account_tier(request: Request, account_id: PathId, body: TierIn) -> JSONResponse:
    """Set an account's tier (standard, growth, premium, enterprise). Setting the same tier
    again is harmless."""
    payload = {"account_id": account_id, "tier": body.tier}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        acct = get_or_404(s, Account, account_id, "account")
        previous, acct.tier = acct.tier, body.tier
        SET_TIER.commit(s, {**payload, "previous": previous}, key)
        return 200, row(acct)

    return run_mutation(
        request, route="set_account_tier", native=SET_TIER.native, payload=payload, apply=apply
    )


def _set_opportunity(
    request: Request, route: str, effect: Effect, opportunity_id: str, value: Any
) -> JSONResponse:
    """Set the field of an opportunity that `effect` is about (the last of its identity);
    a closed opportunity keeps its values (409 on a change)."""
    field = effect.identity[-1]
    payload = {"opportunity_id": opportunity_id, field: value}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        opp = get_or_404(s, Opportunity, opportunity_id, "opportunity")
        previous = getattr(opp, field)
        if opp.stage in CLOSED and previous != value:
            raise error(
                409,
                "opportunity_closed",
                f"Opportunity {opportunity_id} is {opp.stage}: its {field} can no longer change",
            )
        args = {**payload, "previous": previous}
        updated = now(s)
        setattr(opp, field, value)
        opp.updated = updated
        effect.commit(s, args, key)
        return 200, row(opp)

    return run_mutation(request, route=route, native=effect.native, payload=payload, apply=apply)


class StageIn(BaseModel):
    stage: str = Field(pattern=STAGE_PATTERN)


@write_route(
    router,
    "PUT",
    "/opportunities/{opportunity_id}/stage",
    "update_opportunity_stage",
    SET_STAGE,
    OpportunityOut,
)
def update_opportunity_stage(
    request: Request, opportunity_id: PathId, body: StageIn
) -> JSONResponse:
    """Move an opportunity to a stage (prospecting, qualification, proposal, negotiation,
    closed_won, closed_lost). A closed opportunity keeps its stage (409 on a change)."""
    route = "update_opportunity_stage"
    return _set_opportunity(request, route, SET_STAGE, opportunity_id, body.stage)


class AmountIn(BaseModel):
    amount: int = Field(strict=True, gt=0, le=MAX_AMOUNT)


@write_route(
    router,
    "PUT",
    "/opportunities/{opportunity_id}/amount",
    "set_opportunity_amount",
    SET_AMOUNT,
    OpportunityOut,
)
def set_opportunity_amount(
    request: Request, opportunity_id: PathId, body: AmountIn
) -> JSONResponse:
    """Set an opportunity's amount in cents. A closed opportunity keeps its amount."""
    route = "set_opportunity_amount"
    return _set_opportunity(request, route, SET_AMOUNT, opportunity_id, body.amount)


class RenewalIn(BaseModel):
    years: int = Field(strict=True, ge=1, le=5)


@write_route(
    router, "POST", "/sla-contracts/{contract_id}/renewals", "renew_sla", RENEW_SLA, RenewalOut, 201
)
def renew_sla(
    request: Request, contract_id: PathId, body: RenewalIn, idempotency_key: KeyHeader = None
) -> JSONResponse:
    """Renew an SLA contract for `years` more years: extends its term end and invoices the
    annual fee times the years. Every call is a new renewal and a new invoice. Accepts an
    Idempotency-Key: a retry with the same key replays the first response."""
    payload = {"contract_id": contract_id, "years": body.years}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        c = get_or_404(s, SlaContract, contract_id, "SLA contract")
        start, end = c.term_end_year, c.term_end_year + body.years
        invoice = Invoice(
            id=new_id(s, "inv"),
            account_id=c.account_id,
            contract_id=c.id,
            amount=c.annual_fee * body.years,
            description=f"SLA {c.level} renewal {start + 1}-{end}",
            first_year=start + 1,
            last_year=end,
            created=now(s),
        )
        renewal = SlaRenewal(
            id=new_id(s, "ren"),
            contract_id=c.id,
            years=body.years,
            from_year=start,
            to_year=end,
            invoice_id=invoice.id,
            created=now(s),
        )
        c.term_end_year = end
        s.add_all([invoice, renewal])
        RENEW_SLA.commit(s, {**payload, "invoice_id": invoice.id, "amount": invoice.amount}, key)
        s.flush()
        return 201, {"renewal": row(renewal), "invoice": row(invoice), **contract_view(s, c)}

    return run_mutation(
        request, route="renew_sla", native=RENEW_SLA.native, payload=payload, apply=apply
    )


class EnrollIn(BaseModel):
    contact_id: Id


@write_route(
    router,
    "POST",
    "/sequences/{sequence_id}/enrollments",
    "enroll_contact",
    ENROLL,
    EnrollmentDetail,
    201,
)
def enroll_contact(request: Request, sequence_id: PathId, body: EnrollIn) -> JSONResponse:
    """Enroll a contact in an outbound email sequence. The sequence's first email is sent
    to the contact immediately and cannot be unsent; every call is a new enrollment and a
    new email."""
    payload = {"sequence_id": sequence_id, "contact_id": body.contact_id}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        seq = get_or_404(s, Sequence, sequence_id, "sequence")
        contact = get_or_404(s, Contact, body.contact_id, "contact")
        created = now(s)
        enr = Enrollment(
            id=new_id(s, "enr"),
            sequence_id=seq.id,
            contact_id=contact.id,
            status="active",
            next_step=2,
            created=created,
            updated=created,
        )
        email = Email(
            id=new_id(s, "eml"),
            enrollment_id=enr.id,
            sequence_id=seq.id,
            contact_id=contact.id,
            to_email=contact.email,
            step=1,
            subject=seq.steps[0],
            sent=created,
        )
        s.add(enr)
        s.flush()
        s.add(email)
        args = {**payload, "enrollment_id": enr.id, "to_email": contact.email}
        ENROLL.commit(s, args, key, ref=enr.id)
        s.flush()
        return 201, enrollment_view(s, enr)

    return run_mutation(
        request, route="enroll_contact", native=ENROLL.native, payload=payload, apply=apply
    )


@write_route(
    router,
    "POST",
    "/enrollments/{enrollment_id}/unenroll",
    "unenroll_contact",
    UNENROLL,
    EnrollmentDetail,
)
def unenroll_contact(request: Request, enrollment_id: PathId) -> JSONResponse:
    """Take a contact out of a sequence: no further emails of that enrollment are sent
    (emails already sent stay sent). Unenrolling twice is harmless; a completed
    enrollment has nothing left to stop (409)."""
    payload = {"enrollment_id": enrollment_id}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        enr = get_or_404(s, Enrollment, enrollment_id, "enrollment")
        if enr.status == "completed":
            raise error(
                409,
                "enrollment_completed",
                f"Enrollment {enrollment_id} has sent every email of its sequence; there is "
                "nothing left to stop",
            )
        args = {**payload, "previous": enr.status}
        # Stopping an active enrollment undoes it as far as the world allows (its sent
        # email stays sent): a repair, if the enrollment was not wanted.
        undoes = {"op": ENROLL.op, "ref": enr.id} if enr.status == "active" else None
        enr.status, enr.updated = "unenrolled", now(s)
        UNENROLL.commit(s, args, key, undoes=undoes)
        return 200, enrollment_view(s, enr)

    return run_mutation(
        request, route="unenroll_contact", native=UNENROLL.native, payload=payload, apply=apply
    )
