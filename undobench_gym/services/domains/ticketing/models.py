"""Ticketing-domain tables (SQLAlchemy 2.0 declarative).

An incident follows an escalation policy: ordered levels, each a list of on-call
responders. Pages and notices are messages sent to people: once sent, they cannot be
taken back, only followed by another message.
"""

from __future__ import annotations

from sqlalchemy import JSON, ForeignKey, Integer, String, Table, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from undobench_gym.services.domains._service.kit import Base


class Responder(Base):
    __tablename__ = "tk_responders"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(128))
    email: Mapped[str] = mapped_column(String(255), unique=True)
    team: Mapped[str] = mapped_column(String(64))


class Policy(Base):
    __tablename__ = "tk_policies"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    team: Mapped[str] = mapped_column(String(64))


class PolicyLevel(Base):
    """One level of an escalation policy: the responders paged when it is reached, in order."""

    __tablename__ = "tk_policy_levels"
    __table_args__ = (UniqueConstraint("policy_id", "level"),)
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    policy_id: Mapped[str] = mapped_column(ForeignKey("tk_policies.id"))
    level: Mapped[int] = mapped_column(Integer)
    responder_ids: Mapped[list[str]] = mapped_column(JSON)


class Incident(Base):
    __tablename__ = "tk_incidents"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    #: The alerting system's reference; one incident per alert.
    external_ref: Mapped[str] = mapped_column(String(64), unique=True)
    title: Mapped[str] = mapped_column(String(200))
    service: Mapped[str] = mapped_column(String(64))
    severity: Mapped[str] = mapped_column(String(8))  # sev1 (worst) .. sev4
    status: Mapped[str] = mapped_column(String(16))  # open | acknowledged | resolved
    policy_id: Mapped[str] = mapped_column(ForeignKey("tk_policies.id"))
    #: The highest escalation level reached (1 = the first level was engaged).
    escalation_level: Mapped[int] = mapped_column(Integer)
    assignee_id: Mapped[str | None] = mapped_column(ForeignKey("tk_responders.id"), nullable=True)
    resolution: Mapped[str | None] = mapped_column(String(500), nullable=True)
    created: Mapped[str] = mapped_column(String(32))
    resolved: Mapped[str | None] = mapped_column(String(32), nullable=True)


class Escalation(Base):
    __tablename__ = "tk_escalations"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    incident_id: Mapped[str] = mapped_column(ForeignKey("tk_incidents.id"))
    level: Mapped[int] = mapped_column(Integer)
    #: The level's responders, snapshotted when the escalation starts.
    responder_ids: Mapped[list[str]] = mapped_column(JSON)
    severity_from: Mapped[str] = mapped_column(String(8))
    severity_to: Mapped[str] = mapped_column(String(8))
    reason: Mapped[str] = mapped_column(String(500))
    status: Mapped[str] = mapped_column(String(16))  # in_progress | completed
    created: Mapped[str] = mapped_column(String(32))
    completed: Mapped[str | None] = mapped_column(String(32), nullable=True)


class Page(Base):
    __tablename__ = "tk_pages"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    incident_id: Mapped[str] = mapped_column(ForeignKey("tk_incidents.id"))
    responder_id: Mapped[str] = mapped_column(ForeignKey("tk_responders.id"))
    message: Mapped[str] = mapped_column(String(500))
    escalation_id: Mapped[str | None] = mapped_column(
        ForeignKey("tk_escalations.id"), nullable=True
    )
    retracted: Mapped[bool] = mapped_column(default=False)
    created: Mapped[str] = mapped_column(String(32))


class Comment(Base):
    __tablename__ = "tk_comments"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    incident_id: Mapped[str] = mapped_column(ForeignKey("tk_incidents.id"))
    author: Mapped[str] = mapped_column(String(128))
    #: What the comment is for (note | status | handover | postmortem): the structured part
    #: of a comment, which its effect identity is made of (the body is free text).
    kind: Mapped[str] = mapped_column(String(16))
    body: Mapped[str] = mapped_column(String(2000))
    created: Mapped[str] = mapped_column(String(32))


class Notice(Base):
    """A message to people outside the paging flow: a resolution notice to stakeholders,
    or a "disregard" notice that follows a mistaken page."""

    __tablename__ = "tk_notices"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    incident_id: Mapped[str] = mapped_column(ForeignKey("tk_incidents.id"))
    kind: Mapped[str] = mapped_column(String(16))  # resolution | disregard
    recipient: Mapped[str] = mapped_column(String(64))  # an audience or a responder id
    message: Mapped[str] = mapped_column(String(1000))
    page_id: Mapped[str | None] = mapped_column(ForeignKey("tk_pages.id"), nullable=True)
    created: Mapped[str] = mapped_column(String(32))


# Parents first: reset deletes in reverse order.
TABLES: list[Table] = [
    Base.metadata.tables[m.__tablename__]
    for m in (Responder, Policy, PolicyLevel, Incident, Escalation, Page, Comment, Notice)
]
