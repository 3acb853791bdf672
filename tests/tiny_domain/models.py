"""Checklist step 1: the domain's tables, prefixed with the domain's short name."""

from __future__ import annotations

from sqlalchemy import String, Table
from sqlalchemy.orm import Mapped, mapped_column

from undobench_gym.services.domains._service.kit import Base


class Note(Base):
    __tablename__ = "nt_notes"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    author: Mapped[str] = mapped_column(String(64))
    title: Mapped[str] = mapped_column(String(128))
    body: Mapped[str] = mapped_column(String(1000))
    created: Mapped[str] = mapped_column(String(32))


TABLES: list[Table] = [Note.__table__]  # type: ignore[list-item]
