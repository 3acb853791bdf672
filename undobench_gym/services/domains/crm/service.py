"""CRM service: read-only routes and the domain definition.

Single-transaction mutations live in `mutations`, the lead conversion composite in
`composites`. Money is integer cents.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from sqlalchemy import select

from undobench_gym.services.domains._service.kit import (
    DbSession,
    DomainService,
    filtered,
    get_or_404,
    read_route,
    row,
)
from undobench_gym.services.domains.crm import composites, mutations
from undobench_gym.services.domains.crm.common import (
    ID_PATTERN,
    STAGE_PATTERN,
    TIER_PATTERN,
    PathId,
    account_view,
    contract_view,
    enrollment_view,
    lead_view,
)
from undobench_gym.services.domains.crm.fixture import build_fixture
from undobench_gym.services.domains.crm.models import (
    FIXTURE_ORDER,
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
)
from undobench_gym.services.domains.crm.responses import (
    AccountDetail,
    AccountOut,
    ContactOut,
    EmailOut,
    EnrollmentDetail,
    InvoiceOut,
    LeadDetail,
    LeadOut,
    OpportunityOut,
    SequenceOut,
    SlaContractDetail,
    SlaContractOut,
)

router = APIRouter(prefix="/v1")
OptId = Annotated[str | None, Query(max_length=64, pattern=ID_PATTERN)]


@read_route(router, "/leads", "list_leads", list[LeadOut])
def list_leads(
    s: DbSession, status: str | None = Query(None, pattern="^(open|converting|converted)$")
) -> list[dict[str, Any]]:
    """List leads, optionally by status (open, converting, converted)."""
    q = filtered(select(Lead).order_by(Lead.id), (Lead.status, status))
    return [row(x) for x in s.scalars(q)]


@read_route(router, "/leads/{lead_id}", "get_lead", LeadDetail)
def get_lead(s: DbSession, lead_id: PathId) -> dict[str, Any]:
    """Retrieve one lead with the account, contact and opportunity its conversion created."""
    return lead_view(s, get_or_404(s, Lead, lead_id, "lead"))


@read_route(router, "/accounts", "list_accounts", list[AccountOut])
def list_accounts(
    s: DbSession, tier: str | None = Query(None, pattern=TIER_PATTERN)
) -> list[dict[str, Any]]:
    """List accounts with their tiers, optionally by tier."""
    q = filtered(select(Account).order_by(Account.id), (Account.tier, tier))
    return [row(a) for a in s.scalars(q)]


@read_route(router, "/accounts/{account_id}", "get_account", AccountDetail)
def get_account(s: DbSession, account_id: PathId) -> dict[str, Any]:
    """Retrieve one account with its contacts, opportunities and SLA contracts."""
    return account_view(s, get_or_404(s, Account, account_id, "account"))


@read_route(router, "/contacts", "list_contacts", list[ContactOut])
def list_contacts(
    s: DbSession, account_id: OptId = None, email: str | None = Query(None, max_length=255)
) -> list[dict[str, Any]]:
    """List contacts, optionally for one account or by email."""
    q = select(Contact).order_by(Contact.id)
    q = filtered(q, (Contact.account_id, account_id), (Contact.email, email))
    return [row(c) for c in s.scalars(q)]


@read_route(router, "/opportunities", "list_opportunities", list[OpportunityOut])
def list_opportunities(
    s: DbSession, account_id: OptId = None, stage: str | None = Query(None, pattern=STAGE_PATTERN)
) -> list[dict[str, Any]]:
    """List opportunities, optionally for one account or in one stage."""
    q = select(Opportunity).order_by(Opportunity.id)
    q = filtered(q, (Opportunity.account_id, account_id), (Opportunity.stage, stage))
    return [row(o) for o in s.scalars(q)]


@read_route(router, "/opportunities/{opportunity_id}", "get_opportunity", OpportunityOut)
def get_opportunity(s: DbSession, opportunity_id: PathId) -> dict[str, Any]:
    """Retrieve one opportunity (stage, amount in cents)."""
    return row(get_or_404(s, Opportunity, opportunity_id, "opportunity"))


@read_route(router, "/sla-contracts", "list_sla_contracts", list[SlaContractOut])
def list_sla_contracts(s: DbSession, account_id: OptId = None) -> list[dict[str, Any]]:
    """List SLA contracts (level, annual fee in cents, term end year), optionally per account."""
    q = filtered(select(SlaContract).order_by(SlaContract.id), (SlaContract.account_id, account_id))
    return [row(c) for c in s.scalars(q)]


@read_route(router, "/sla-contracts/{contract_id}", "get_sla_contract", SlaContractDetail)
def get_sla_contract(s: DbSession, contract_id: PathId) -> dict[str, Any]:
    """Retrieve one SLA contract with its renewals."""
    return contract_view(s, get_or_404(s, SlaContract, contract_id, "SLA contract"))


@read_route(router, "/invoices", "list_invoices", list[InvoiceOut])
def list_invoices(
    s: DbSession, account_id: OptId = None, contract_id: OptId = None
) -> list[dict[str, Any]]:
    """List invoices (amount in cents; an SLA invoice names the contract years it
    covers, first_year to last_year), oldest first, optionally for one account or one
    SLA contract."""
    q = select(Invoice).order_by(Invoice.created, Invoice.id)
    q = filtered(q, (Invoice.account_id, account_id), (Invoice.contract_id, contract_id))
    return [row(i) for i in s.scalars(q)]


@read_route(router, "/sequences", "list_sequences", list[SequenceOut])
def list_sequences(s: DbSession) -> list[dict[str, Any]]:
    """List the outbound email sequences with their purpose and steps (email subjects)."""
    return [row(q) for q in s.scalars(select(Sequence).order_by(Sequence.name))]


@read_route(router, "/enrollments", "list_enrollments", list[EnrollmentDetail])
def list_enrollments(
    s: DbSession,
    contact_id: OptId = None,
    sequence_id: OptId = None,
    status: str | None = Query(None, pattern="^(active|unenrolled|completed)$"),
) -> list[dict[str, Any]]:
    """List sequence enrollments with the emails each has sent, optionally filtered by
    contact, sequence or status (active; unenrolled; completed: every email sent)."""
    q = select(Enrollment).order_by(Enrollment.created, Enrollment.id)
    q = filtered(
        q,
        (Enrollment.contact_id, contact_id),
        (Enrollment.sequence_id, sequence_id),
        (Enrollment.status, status),
    )
    return [enrollment_view(s, e) for e in s.scalars(q)]


@read_route(router, "/emails", "list_sent_emails", list[EmailOut])
def list_sent_emails(
    s: DbSession, contact_id: OptId = None, sequence_id: OptId = None
) -> list[dict[str, Any]]:
    """List the emails sequences have sent, oldest first, optionally filtered."""
    q = select(Email).order_by(Email.sent, Email.id)
    q = filtered(q, (Email.contact_id, contact_id), (Email.sequence_id, sequence_id))
    return [row(m) for m in s.scalars(q)]


# ---- domain definition -------------------------------------------------------------


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
    # This order is the order of the OpenAPI document and so of the tool catalogue.
    routers=[router, mutations.router, composites.router],
    tables=TABLES,
    fixture=build_fixture,
    fixture_order=FIXTURE_ORDER,
    partial_state=partial_state,
)

__all__ = ["DOMAIN"]
