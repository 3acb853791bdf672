"""Payments tables (SQLAlchemy 2.0 declarative)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, ForeignKey, Integer, String, Table, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from undobench_gym.services.domains._service.kit import Base


class Customer(Base):
    __tablename__ = "pay_customers"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    email: Mapped[str] = mapped_column(String(255), unique=True)
    name: Mapped[str] = mapped_column(String(255))
    created: Mapped[str] = mapped_column(String(32))


class Charge(Base):
    __tablename__ = "pay_charges"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    customer_id: Mapped[str] = mapped_column(ForeignKey("pay_customers.id"))
    amount: Mapped[int] = mapped_column(Integer)
    currency: Mapped[str] = mapped_column(String(3))
    description: Mapped[str] = mapped_column(String(255))
    amount_refunded: Mapped[int] = mapped_column(Integer, default=0)
    status: Mapped[str] = mapped_column(String(16))
    created: Mapped[str] = mapped_column(String(32))


class Refund(Base):
    __tablename__ = "pay_refunds"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    charge_id: Mapped[str] = mapped_column(ForeignKey("pay_charges.id"))
    amount: Mapped[int] = mapped_column(Integer)
    reason: Mapped[str] = mapped_column(String(64))
    created: Mapped[str] = mapped_column(String(32))


class Subscription(Base):
    __tablename__ = "pay_subscriptions"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    customer_id: Mapped[str] = mapped_column(ForeignKey("pay_customers.id"))
    plan: Mapped[str] = mapped_column(String(32))
    amount: Mapped[int] = mapped_column(Integer)
    currency: Mapped[str] = mapped_column(String(3))
    status: Mapped[str] = mapped_column(String(16))
    period: Mapped[int] = mapped_column(Integer)  # number of the current billing period


class Invoice(Base):
    __tablename__ = "pay_invoices"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    subscription_id: Mapped[str] = mapped_column(ForeignKey("pay_subscriptions.id"))
    period: Mapped[int] = mapped_column(Integer)
    charge_id: Mapped[str] = mapped_column(ForeignKey("pay_charges.id"))
    amount: Mapped[int] = mapped_column(Integer)
    created: Mapped[str] = mapped_column(String(32))


class Payout(Base):
    __tablename__ = "pay_payouts"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    reference: Mapped[str] = mapped_column(String(64))
    currency: Mapped[str] = mapped_column(String(3))
    recipients: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16))  # processing | paid
    created: Mapped[str] = mapped_column(String(32))


class Transfer(Base):
    __tablename__ = "pay_transfers"
    __table_args__ = (UniqueConstraint("payout_id", "account"),)
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    payout_id: Mapped[str] = mapped_column(ForeignKey("pay_payouts.id"))
    account: Mapped[str] = mapped_column(String(64))
    amount: Mapped[int] = mapped_column(Integer)
    created: Mapped[str] = mapped_column(String(32))


class Wire(Base):
    __tablename__ = "pay_wires"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    quote_id: Mapped[str] = mapped_column(String(32))
    beneficiary_iban: Mapped[str] = mapped_column(String(34))
    amount: Mapped[int] = mapped_column(Integer)
    source_currency: Mapped[str] = mapped_column(String(3))
    target_currency: Mapped[str] = mapped_column(String(3))
    target_amount: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16))
    created: Mapped[str] = mapped_column(String(32))


class Balance(Base):
    __tablename__ = "pay_balance"
    currency: Mapped[str] = mapped_column(String(3), primary_key=True)
    available: Mapped[int] = mapped_column(Integer)


TABLES: list[Table] = [
    Base.metadata.tables[m.__tablename__]
    for m in (Customer, Charge, Refund, Subscription, Invoice, Payout, Transfer, Wire, Balance)
]
