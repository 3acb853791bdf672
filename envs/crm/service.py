"""CRM service: read-only routes and the domain definition.

Single-transaction mutations live in `mutations`, the lead conversion composite in
`composites`. Money is integer cents.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from sqlalchemy import select
from sqlalchemy.orm import Session

from .._service.context import DomainService
from .._service.db import insert_fixture
from .._service.mutation import READ_ONLY
from . import composites, mutations
from .common import (
    ID_PATTERN,
    STAGE_PATTERN,
    TIER_PATTERN,
    Ctx,
    PathId,
    account_view,
    contract_view,
    enrollment_view,
    get_or_404,
    lead_view,
    row,
)
from .fixture import build_fixture
from .models import (
    TABLES,
    Account,
    Contact,
    Email,
    Enrollment,
    Invoice,
    Lead,
    Opportunity,
    Sequence,
    SlaContract,
    SlaRenewal,
)

router = APIRouter(prefix="/v1")
OptId = Annotated[str | None, Query(max_length=64, pattern=ID_PATTERN)]


@router.get("/leads", operation_id="list_leads", openapi_extra=READ_ONLY)
def list_leads(
    ctx: Ctx, status: str | None = Query(None, pattern="^(open|converting|converted)$")
) -> list[dict[str, Any]]:
    """List leads, optionally by status (open, converting, converted)."""
    with Session(ctx.engine) as s:
        q = select(Lead).order_by(Lead.id)
        if status:
            q = q.where(Lead.status == status)
        return [row(x) for x in s.scalars(q)]


@router.get("/leads/{lead_id}", operation_id="get_lead", openapi_extra=READ_ONLY)
def get_lead(ctx: Ctx, lead_id: PathId) -> dict[str, Any]:
    """Retrieve one lead with the account, contact and opportunity its conversion created."""
    with Session(ctx.engine) as s:
        return lead_view(s, get_or_404(s, Lead, lead_id, "lead"))


@router.get("/accounts", operation_id="list_accounts", openapi_extra=READ_ONLY)
def list_accounts(
    ctx: Ctx, tier: str | None = Query(None, pattern=TIER_PATTERN)
) -> list[dict[str, Any]]:
    """List accounts with their tiers, optionally by tier."""
    with Session(ctx.engine) as s:
        q = select(Account).order_by(Account.id)
        if tier:
            q = q.where(Account.tier == tier)
        return [row(a) for a in s.scalars(q)]


@router.get("/accounts/{account_id}", operation_id="get_account", openapi_extra=READ_ONLY)
def get_account(ctx: Ctx, account_id: PathId) -> dict[str, Any]:
    """Retrieve one account with its contacts, opportunities and SLA contracts."""
    with Session(ctx.engine) as s:
        return account_view(s, get_or_404(s, Account, account_id, "account"))


@router.get("/contacts", operation_id="list_contacts", openapi_extra=READ_ONLY)
def list_contacts(
    ctx: Ctx, account_id: OptId = None, email: str | None = Query(None, max_length=255)
) -> list[dict[str, Any]]:
    """List contacts, optionally for one account or by email."""
    with Session(ctx.engine) as s:
        q = select(Contact).order_by(Contact.id)
        if account_id:
            q = q.where(Contact.account_id == account_id)
        if email:
            q = q.where(Contact.email == email)
        return [row(c) for c in s.scalars(q)]


@router.get("/opportunities", operation_id="list_opportunities", openapi_extra=READ_ONLY)
def list_opportunities(
    ctx: Ctx, account_id: OptId = None, stage: str | None = Query(None, pattern=STAGE_PATTERN)
) -> list[dict[str, Any]]:
    """List opportunities, optionally for one account or in one stage."""
    with Session(ctx.engine) as s:
        q = select(Opportunity).order_by(Opportunity.id)
        if account_id:
            q = q.where(Opportunity.account_id == account_id)
        if stage:
            q = q.where(Opportunity.stage == stage)
        return [row(o) for o in s.scalars(q)]


@router.get(
    "/opportunities/{opportunity_id}", operation_id="get_opportunity", openapi_extra=READ_ONLY
)
def get_opportunity(ctx: Ctx, opportunity_id: PathId) -> dict[str, Any]:
    """Retrieve one opportunity (stage, amount in cents)."""
    with Session(ctx.engine) as s:
        return row(get_or_404(s, Opportunity, opportunity_id, "opportunity"))


@router.get("/sla-contracts", operation_id="list_sla_contracts", openapi_extra=READ_ONLY)
def list_sla_contracts(ctx: Ctx, account_id: OptId = None) -> list[dict[str, Any]]:
    """List SLA contracts (level, annual fee in cents, term end year), optionally per account."""
    with Session(ctx.engine) as s:
        q = select(SlaContract).order_by(SlaContract.id)
        if account_id:
            q = q.where(SlaContract.account_id == account_id)
        return [row(c) for c in s.scalars(q)]


@router.get(
    "/sla-contracts/{contract_id}", operation_id="get_sla_contract", openapi_extra=READ_ONLY
)
def get_sla_contract(ctx: Ctx, contract_id: PathId) -> dict[str, Any]:
    """Retrieve one SLA contract with its renewals."""
    with Session(ctx.engine) as s:
        return contract_view(s, get_or_404(s, SlaContract, contract_id, "SLA contract"))


@router.get("/invoices", operation_id="list_invoices", openapi_extra=READ_ONLY)
def list_invoices(
    ctx: Ctx, account_id: OptId = None, contract_id: OptId = None
) -> list[dict[str, Any]]:
    """List invoices (amount in cents; an SLA invoice names the contract years it
    covers, first_year to last_year), oldest first, optionally for one account or one
    SLA contract."""
    with Session(ctx.engine) as s:
        q = select(Invoice).order_by(Invoice.created, Invoice.id)
        if account_id:
            q = q.where(Invoice.account_id == account_id)
        if contract_id:
            q = q.where(Invoice.contract_id == contract_id)
        return [row(i) for i in s.scalars(q)]


@router.get("/sequences", operation_id="list_sequences", openapi_extra=READ_ONLY)
def list_sequences(ctx: Ctx) -> list[dict[str, Any]]:
    """List the outbound email sequences with their purpose and steps (email subjects)."""
    with Session(ctx.engine) as s:
        return [row(q) for q in s.scalars(select(Sequence).order_by(Sequence.name))]


@router.get("/enrollments", operation_id="list_enrollments", openapi_extra=READ_ONLY)
def list_enrollments(
    ctx: Ctx,
    contact_id: OptId = None,
    sequence_id: OptId = None,
    status: str | None = Query(None, pattern="^(active|unenrolled|completed)$"),
) -> list[dict[str, Any]]:
    """List sequence enrollments with the emails each has sent, optionally filtered by
    contact, sequence or status (active; unenrolled; completed: every email sent)."""
    with Session(ctx.engine) as s:
        q = select(Enrollment).order_by(Enrollment.created, Enrollment.id)
        if contact_id:
            q = q.where(Enrollment.contact_id == contact_id)
        if sequence_id:
            q = q.where(Enrollment.sequence_id == sequence_id)
        if status:
            q = q.where(Enrollment.status == status)
        return [enrollment_view(s, e) for e in s.scalars(q)]


@router.get("/emails", operation_id="list_sent_emails", openapi_extra=READ_ONLY)
def list_sent_emails(
    ctx: Ctx, contact_id: OptId = None, sequence_id: OptId = None
) -> list[dict[str, Any]]:
    """List the emails sequences have sent, oldest first, optionally filtered."""
    with Session(ctx.engine) as s:
        q = select(Email).order_by(Email.sent, Email.id)
        if contact_id:
            q = q.where(Email.contact_id == contact_id)
        if sequence_id:
            q = q.where(Email.sequence_id == sequence_id)
        return [row(m) for m in s.scalars(q)]


# ---- domain definition -------------------------------------------------------------

_ORDER = (
    ("leads", Lead),
    ("accounts", Account),
    ("contacts", Contact),
    ("opportunities", Opportunity),
    ("sla_contracts", SlaContract),
    ("sla_renewals", SlaRenewal),
    ("invoices", Invoice),
    ("sequences", Sequence),
    ("enrollments", Enrollment),
    ("emails", Email),
)


def seed_state(s: Session, seed: int) -> None:
    insert_fixture(s, build_fixture(seed), _ORDER)


def partial_state(state: dict[str, Any]) -> list[str]:
    """A lead left `converting`: its account and contact exist, its opportunity does not."""
    tables = state["tables"]
    opps = {o["source_lead_id"] for o in tables["crm_opportunities"] if o["source_lead_id"]}
    issues = []
    for lead in tables["crm_leads"]:
        if lead["status"] == "converting":
            missing = "has an opportunity" if lead["id"] in opps else "has no opportunity"
            issues.append(
                f"lead {lead['id']} ({lead['company']}) is half-converted: account "
                f"{lead['converted_account_id']} exists but {missing} and the lead is not "
                "marked converted"
            )
    return issues


DOMAIN = DomainService(
    name="crm",
    title="UndoBench CRM",
    routers=[router, mutations.router, composites.router],
    tables=TABLES,
    seed_state=seed_state,
    partial_state=partial_state,
)

__all__ = ["DOMAIN"]
