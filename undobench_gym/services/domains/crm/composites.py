"""Lead conversion: account + contact, then opportunity, in two transactions.

A named crash point (`crm.after_account_created`) sits between them, so a DURING_MUTATION
fault leaves a real half-converted lead behind: an account and a contact exist, the
opportunity does not and the lead is still `converting`. resume_lead_conversion finishes it.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from undobench_gym.services.domains._service.kit import (
    Effect,
    error,
    flush_or_409,
    get_ctx,
    get_or_404,
    maybe_crash,
    new_id,
    now,
    run_composite,
    run_mutation,
    write_route,
)
from undobench_gym.services.domains.crm.common import MAX_AMOUNT, PathId, lead_view
from undobench_gym.services.domains.crm.models import Account, Contact, Lead, Opportunity
from undobench_gym.services.domains.crm.responses import LeadDetail

router = APIRouter(prefix="/v1")
CRASH_AFTER_ACCOUNT = "crm.after_account_created"

CONVERT_LEAD = Effect("lead.convert", "create_unique", ("lead_id",), "constraint")
#: The conversion's second step, so it has no route of its own. The opportunity's name is
#: free text: the lead and the amount make it the same one.
LEAD_OPPORTUNITY = Effect("lead.opportunity", "create_unique", ("lead_id", "amount"))
RESUME_LEAD = Effect("lead.resume", "set", ("lead_id",), resumption=True)


#: Why a lead in a status cannot take a step: the error type and its message.
LEAD_REFUSALS = {
    "converting": (
        "conversion_in_progress",
        "Lead {lead.id} is already being converted (account {lead.converted_account_id} "
        "exists, the opportunity does not yet): finish it with resume_lead_conversion "
        "instead of converting it again",
    ),
    "converted": (
        "resource_exists",
        "Lead {lead.id} is already converted (account {lead.converted_account_id}, "
        "opportunity {lead.converted_opportunity_id}); read it with get_lead",
    ),
    "open": ("not_converting", "Lead {lead.id} is open: convert it with convert_lead"),
}


def _lead_unless(s: Session, lead_id: str, *refused: str) -> Lead:
    """The lead, or a 409 if its status is one of `refused`."""
    lead = get_or_404(s, Lead, lead_id, "lead")
    if lead.status in refused:
        kind, message = LEAD_REFUSALS[lead.status]
        raise error(409, kind, message.format(lead=lead))
    return lead


class ConvertIn(BaseModel):
    opportunity_name: str = Field(min_length=1, max_length=120)
    amount: int = Field(strict=True, gt=0, le=MAX_AMOUNT)


def _start(s: Session, lead_id: str, body: ConvertIn, key: str | None) -> str:
    """Transaction 1: the account and the contact; the lead becomes `converting`."""
    lead = _lead_unless(s, lead_id, "converting", "converted")
    if s.scalar(select(Contact).where(Contact.email == lead.email)) is not None:
        raise error(409, "resource_exists", f"A contact with email {lead.email} already exists")
    created = now(s)
    acct = Account(
        id=new_id(s, "acc"),
        name=lead.company,
        tier="standard",
        source_lead_id=lead_id,
        created=created,
    )
    contact = Contact(
        id=new_id(s, "con"), account_id=acct.id, name=lead.name, email=lead.email, created=created
    )
    s.add(acct)
    s.flush()
    s.add(contact)
    lead.status = "converting"
    lead.converted_account_id = acct.id
    lead.converted_contact_id = contact.id
    lead.pending = body.model_dump()
    args = {"lead_id": lead_id, **body.model_dump()}
    CONVERT_LEAD.commit(s, {**args, "account_id": acct.id, "contact_id": contact.id}, key)
    # A concurrent conversion may have won the unique constraints.
    flush_or_409(s, f"Lead {lead_id} is already converted")
    return lead_id


def finish_conversion(s: Session, lead_id: str, key: str | None = None) -> bool:
    """Transaction 2: the opportunity, and the lead marked converted. False if nothing to do."""
    lead = get_or_404(s, Lead, lead_id, "lead")
    if lead.status != "converting":
        return False
    pending: dict[str, Any] = dict(lead.pending or {})
    opp = Opportunity(
        id=new_id(s, "opp"),
        account_id=lead.converted_account_id,
        name=pending["opportunity_name"],
        stage="qualification",
        amount=pending["amount"],
        source_lead_id=lead_id,
        created=now(s),
        updated=now(s),
    )
    s.add(opp)
    lead.status = "converted"
    lead.converted_opportunity_id = opp.id
    lead.pending = None
    args = {
        "lead_id": lead_id,
        "amount": pending["amount"],
        "name": pending["opportunity_name"],
        "opportunity_id": opp.id,
        "account_id": opp.account_id,
    }
    LEAD_OPPORTUNITY.commit(s, args, key)
    s.flush()
    return True


def _advance(request: Request, lead_id: str) -> None:
    """Transaction 2, after the crash point that leaves a half-converted lead behind."""
    maybe_crash(request, CRASH_AFTER_ACCOUNT)
    try:
        with Session(get_ctx(request).engine) as s, s.begin():
            finish_conversion(s, lead_id)
    except IntegrityError:
        pass  # a concurrent resume created the opportunity first


def _lead(s: Session, lead_id: str) -> dict[str, Any]:
    return lead_view(s, get_or_404(s, Lead, lead_id, "lead"))


@write_route(
    router, "POST", "/leads/{lead_id}/convert", "convert_lead", CONVERT_LEAD, LeadDetail, 201
)
def convert_lead(request: Request, lead_id: PathId, body: ConvertIn) -> JSONResponse:
    """Convert an open lead: create an account (tier standard) named after the lead's
    company, a contact for the lead, and an opportunity (stage qualification) with the
    given name and amount in cents. A lead converts once: a repeat is refused with 409. A
    lead left `converting` is finished with resume_lead_conversion."""
    return run_composite(
        request,
        route="convert_lead",
        payload={"lead_id": lead_id, **body.model_dump()},
        start=lambda s, key: _start(s, lead_id, body, key),
        advance=lambda lead_id: _advance(request, lead_id),
        view=_lead,
        native=CONVERT_LEAD.native,
    )


@write_route(
    router,
    "POST",
    "/leads/{lead_id}/resume-conversion",
    "resume_lead_conversion",
    RESUME_LEAD,
    LeadDetail,
)
def resume_lead_conversion(request: Request, lead_id: PathId) -> JSONResponse:
    """Finish a lead conversion that stopped half-way (lead status `converting`): create
    the missing opportunity and mark the lead converted. A converted lead is returned as it
    is; an open lead is refused (409): convert it with convert_lead."""
    payload = {"lead_id": lead_id}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        lead = _lead_unless(s, lead_id, "open")
        try:
            finished = finish_conversion(s, lead_id, key)
        except IntegrityError as exc:
            raise error(409, "resource_exists", f"Lead {lead_id} was finished meanwhile") from exc
        if finished:
            # The resume itself, beside the opportunity it created; a resume of a lead
            # that is already converted commits nothing.
            RESUME_LEAD.commit(s, payload, key)
        return 200, lead_view(s, lead)

    return run_mutation(
        request,
        route="resume_lead_conversion",
        native=RESUME_LEAD.native,
        payload=payload,
        apply=apply,
    )
