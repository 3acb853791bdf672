"""CRM tables (SQLAlchemy 2.0 declarative). Money is integer cents."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, ForeignKey, Integer, String, Table
from sqlalchemy.orm import Mapped, mapped_column

from undobench_gym.services.domains._service.kit import Base


class Lead(Base):
    __tablename__ = "crm_leads"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    email: Mapped[str] = mapped_column(String(255))
    company: Mapped[str] = mapped_column(String(255))
    status: Mapped[str] = mapped_column(String(16))  # open | converting | converted
    #: What a conversion in progress still has to create (set when the account is created).
    pending: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    converted_account_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    converted_contact_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    converted_opportunity_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    created: Mapped[str] = mapped_column(String(32))


class Account(Base):
    __tablename__ = "crm_accounts"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    tier: Mapped[str] = mapped_column(String(16))  # standard | growth | premium | enterprise
    #: The lead this account was converted from: unique, so a lead converts at most once.
    source_lead_id: Mapped[str | None] = mapped_column(String(32), unique=True, nullable=True)
    created: Mapped[str] = mapped_column(String(32))


class Contact(Base):
    __tablename__ = "crm_contacts"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("crm_accounts.id"))
    name: Mapped[str] = mapped_column(String(255))
    email: Mapped[str] = mapped_column(String(255), unique=True)
    created: Mapped[str] = mapped_column(String(32))


class Opportunity(Base):
    __tablename__ = "crm_opportunities"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("crm_accounts.id"))
    name: Mapped[str] = mapped_column(String(255))
    stage: Mapped[str] = mapped_column(String(16))
    amount: Mapped[int] = mapped_column(Integer)
    #: Set when the opportunity came from a lead conversion: one per lead.
    source_lead_id: Mapped[str | None] = mapped_column(String(32), unique=True, nullable=True)
    created: Mapped[str] = mapped_column(String(32))
    updated: Mapped[str] = mapped_column(String(32))


class SlaContract(Base):
    __tablename__ = "crm_sla_contracts"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("crm_accounts.id"))
    level: Mapped[str] = mapped_column(String(16))  # business | premium | 24x7
    annual_fee: Mapped[int] = mapped_column(Integer)
    term_end_year: Mapped[int] = mapped_column(Integer)
    created: Mapped[str] = mapped_column(String(32))


class SlaRenewal(Base):
    __tablename__ = "crm_sla_renewals"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    contract_id: Mapped[str] = mapped_column(ForeignKey("crm_sla_contracts.id"))
    years: Mapped[int] = mapped_column(Integer)
    from_year: Mapped[int] = mapped_column(Integer)
    to_year: Mapped[int] = mapped_column(Integer)
    invoice_id: Mapped[str] = mapped_column(String(32))
    created: Mapped[str] = mapped_column(String(32))


class Invoice(Base):
    __tablename__ = "crm_invoices"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("crm_accounts.id"))
    contract_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    amount: Mapped[int] = mapped_column(Integer)
    description: Mapped[str] = mapped_column(String(255))
    #: The contract years an SLA invoice covers (first and last, inclusive).
    first_year: Mapped[int | None] = mapped_column(Integer, nullable=True)
    last_year: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created: Mapped[str] = mapped_column(String(32))


class Sequence(Base):
    """An outbound email sequence; enrolling a contact sends its first step at once."""

    __tablename__ = "crm_sequences"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    purpose: Mapped[str] = mapped_column(String(255))
    steps: Mapped[list[str]] = mapped_column(JSON)  # email subjects, in order


class Enrollment(Base):
    __tablename__ = "crm_enrollments"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    sequence_id: Mapped[str] = mapped_column(ForeignKey("crm_sequences.id"))
    contact_id: Mapped[str] = mapped_column(ForeignKey("crm_contacts.id"))
    #: active | unenrolled | completed (every step's email sent).
    status: Mapped[str] = mapped_column(String(16))
    next_step: Mapped[int] = mapped_column(Integer)
    created: Mapped[str] = mapped_column(String(32))
    updated: Mapped[str] = mapped_column(String(32))


class Email(Base):
    """The outbox: emails that left the building (they cannot be unsent)."""

    __tablename__ = "crm_emails"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    enrollment_id: Mapped[str] = mapped_column(ForeignKey("crm_enrollments.id"))
    sequence_id: Mapped[str] = mapped_column(ForeignKey("crm_sequences.id"))
    contact_id: Mapped[str] = mapped_column(ForeignKey("crm_contacts.id"))
    to_email: Mapped[str] = mapped_column(String(255))
    step: Mapped[int] = mapped_column(Integer)
    subject: Mapped[str] = mapped_column(String(255))
    sent: Mapped[str] = mapped_column(String(32))


#: Fixture keys and their models, parents first (foreign keys): the order the fixture is
#: inserted in, and the order of TABLES (reset deletes in reverse order).
FIXTURE_ORDER: tuple[tuple[str, type[Base]], ...] = (
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
TABLES: list[Table] = [Base.metadata.tables[m.__tablename__] for _, m in FIXTURE_ORDER]
