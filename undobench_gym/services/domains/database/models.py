"""Database-domain tables (SQLAlchemy 2.0 declarative). Money is integer cents."""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, ForeignKey, Integer, String, Table, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from undobench_gym.services.domains._service.kit import Base


class Account(Base):
    __tablename__ = "db_accounts"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    email: Mapped[str] = mapped_column(String(255), unique=True)
    balance: Mapped[int] = mapped_column(Integer)
    tier: Mapped[str] = mapped_column(String(16))  # bronze | silver | gold | platinum
    created: Mapped[str] = mapped_column(String(32))


class Shareholding(Base):
    __tablename__ = "db_shareholdings"
    __table_args__ = (UniqueConstraint("account_id", "share_class"),)
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("db_accounts.id"))
    share_class: Mapped[str] = mapped_column(String(32))
    shares: Mapped[int] = mapped_column(Integer)


class Order(Base):
    __tablename__ = "db_orders"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    order_number: Mapped[str] = mapped_column(String(32), unique=True)
    account_id: Mapped[str] = mapped_column(ForeignKey("db_accounts.id"))
    total: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16))
    created: Mapped[str] = mapped_column(String(32))


class Dividend(Base):
    __tablename__ = "db_dividends"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    reference: Mapped[str] = mapped_column(String(64), unique=True)
    share_class: Mapped[str] = mapped_column(String(32))
    amount_per_share: Mapped[int] = mapped_column(Integer)
    #: Holders snapshotted at declaration, so a resume pays exactly what was declared.
    holders: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16))  # processing | paid
    created: Mapped[str] = mapped_column(String(32))


class DividendCredit(Base):
    __tablename__ = "db_dividend_credits"
    __table_args__ = (UniqueConstraint("dividend_id", "account_id"),)
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    dividend_id: Mapped[str] = mapped_column(ForeignKey("db_dividends.id"))
    account_id: Mapped[str] = mapped_column(ForeignKey("db_accounts.id"))
    shares: Mapped[int] = mapped_column(Integer)
    amount: Mapped[int] = mapped_column(Integer)
    created: Mapped[str] = mapped_column(String(32))


class Migration(Base):
    """The catalog of applied schema migrations; each names one `ext_<name>` table."""

    __tablename__ = "db_migrations"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    columns: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    repaired: Mapped[bool] = mapped_column(default=False)
    applied: Mapped[str] = mapped_column(String(32))


class Audit(Base):
    """Business audit trail, appended in the same transaction as each mutation."""

    __tablename__ = "db_audit"
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[str] = mapped_column(String(32))
    action: Mapped[str] = mapped_column(String(64))
    account_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    #: The business key the action is about: a memo, order number, reference or migration.
    ref: Mapped[str | None] = mapped_column(String(255), nullable=True)
    amount: Mapped[int | None] = mapped_column(Integer, nullable=True)
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


# Parents first: reset deletes in reverse order.
TABLES: list[Table] = [
    Base.metadata.tables[m.__tablename__]
    for m in (Account, Shareholding, Order, Dividend, DividendCredit, Migration, Audit)
]
