"""Helpers the CRM routes share: typed parameters and row views."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from undobench_gym.services.domains._service.kit import id_types, row
from undobench_gym.services.domains.crm.models import (
    Account,
    Contact,
    Email,
    Enrollment,
    Lead,
    Opportunity,
    SlaContract,
    SlaRenewal,
)

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]*$"
TIER_PATTERN = "^(standard|growth|premium|enterprise)$"
STAGE_PATTERN = "^(prospecting|qualification|proposal|negotiation|closed_won|closed_lost)$"
CLOSED = ("closed_won", "closed_lost")
MAX_AMOUNT = 1_000_000_000

#: CRM ids (body field, path parameter): letters, digits, `_` and `-`.
Id, PathId = id_types(ID_PATTERN)


def account_view(s: Session, acct: Account) -> dict[str, Any]:
    """An account with its contacts, opportunities and SLA contracts."""
    contacts = s.scalars(select(Contact).where(Contact.account_id == acct.id).order_by(Contact.id))
    opps = s.scalars(
        select(Opportunity).where(Opportunity.account_id == acct.id).order_by(Opportunity.id)
    )
    slas = s.scalars(
        select(SlaContract).where(SlaContract.account_id == acct.id).order_by(SlaContract.id)
    )
    return {
        **row(acct),
        "contacts": [row(c) for c in contacts],
        "opportunities": [row(o) for o in opps],
        "sla_contracts": [row(c) for c in slas],
    }


def contract_view(s: Session, c: SlaContract) -> dict[str, Any]:
    q = select(SlaRenewal).where(SlaRenewal.contract_id == c.id)
    return {**row(c), "renewals": [row(r) for r in s.scalars(q.order_by(SlaRenewal.created))]}


def enrollment_view(s: Session, e: Enrollment) -> dict[str, Any]:
    q = select(Email).where(Email.enrollment_id == e.id).order_by(Email.step, Email.id)
    return {**row(e), "emails_sent": [row(m) for m in s.scalars(q)]}


def lead_view(s: Session, lead: Lead) -> dict[str, Any]:
    """A lead, with what its conversion created so far."""
    out: dict[str, Any] = {**row(lead)}
    for field, model in (
        ("converted_account_id", Account),
        ("converted_contact_id", Contact),
        ("converted_opportunity_id", Opportunity),
    ):
        ident = getattr(lead, field)
        obj = s.get(model, ident) if ident else None
        out[field.replace("converted_", "").replace("_id", "")] = row(obj) if obj else None
    return out
