"""Cloud-domain tables (SQLAlchemy 2.0 declarative).

A service has two deployment slots, blue and green. Every deploy into a slot is a new
revision (numbered per service); the newest one of a slot is `active`, older ones are
`superseded`. Traffic is split between the two colours by weights that sum to 100, and
the discovery catalog lists the endpoints clients may resolve.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, ForeignKey, Integer, String, Table, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from undobench_gym.services.domains._service.kit import Base


class Service(Base):
    __tablename__ = "cl_services"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    team: Mapped[str] = mapped_column(String(64))
    #: The highest revision number deployed so far (either colour).
    latest_revision: Mapped[int] = mapped_column(Integer)
    created: Mapped[str] = mapped_column(String(32))


class Deployment(Base):
    __tablename__ = "cl_deployments"
    __table_args__ = (UniqueConstraint("service_id", "revision"),)
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    service_id: Mapped[str] = mapped_column(ForeignKey("cl_services.id"))
    colour: Mapped[str] = mapped_column(String(8))  # blue | green
    revision: Mapped[int] = mapped_column(Integer)
    image: Mapped[str] = mapped_column(String(200))
    replicas: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16))  # active | superseded
    health: Mapped[str] = mapped_column(String(16))  # starting | healthy
    restart_count: Mapped[int] = mapped_column(Integer, default=0)
    created: Mapped[str] = mapped_column(String(32))


class Endpoint(Base):
    """One row of the discovery catalog: a deployment clients can resolve."""

    __tablename__ = "cl_endpoints"
    __table_args__ = (UniqueConstraint("service_id", "deployment_id"),)
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    service_id: Mapped[str] = mapped_column(ForeignKey("cl_services.id"))
    deployment_id: Mapped[str] = mapped_column(ForeignKey("cl_deployments.id"))
    colour: Mapped[str] = mapped_column(String(8))
    address: Mapped[str] = mapped_column(String(200))
    registered: Mapped[str] = mapped_column(String(32))


class Traffic(Base):
    __tablename__ = "cl_traffic"
    service_id: Mapped[str] = mapped_column(ForeignKey("cl_services.id"), primary_key=True)
    colour: Mapped[str] = mapped_column(String(8), primary_key=True)
    weight: Mapped[int] = mapped_column(Integer)


class Cutover(Base):
    """A blue/green cutover: deploy green, wait healthy, register it, switch traffic."""

    __tablename__ = "cl_cutovers"
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    service_id: Mapped[str] = mapped_column(ForeignKey("cl_services.id"))
    change_id: Mapped[str] = mapped_column(String(64), unique=True)
    #: The idle colour the new release goes to (the one that took no traffic).
    colour: Mapped[str] = mapped_column(String(8))
    image: Mapped[str] = mapped_column(String(200))
    replicas: Mapped[int] = mapped_column(Integer)
    deployment_id: Mapped[str] = mapped_column(ForeignKey("cl_deployments.id"))
    status: Mapped[str] = mapped_column(String(16))  # in_progress | completed
    #: The last step done: deployed | healthy | registered | switched.
    step: Mapped[str] = mapped_column(String(16))
    created: Mapped[str] = mapped_column(String(32))
    completed: Mapped[str | None] = mapped_column(String(32), nullable=True)


class Event(Base):
    """The platform's activity log, appended in the same transaction as each change."""

    __tablename__ = "cl_events"
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[str] = mapped_column(String(32))
    service_id: Mapped[str] = mapped_column(String(32))
    deployment_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    action: Mapped[str] = mapped_column(String(64))
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


#: Fixture keys and their models, parents first (foreign keys): the order the fixture is
#: inserted in, and the order of TABLES (reset deletes in reverse order).
FIXTURE_ORDER: tuple[tuple[str, type[Base]], ...] = (
    ("services", Service),
    ("deployments", Deployment),
    ("endpoints", Endpoint),
    ("traffic", Traffic),
    ("cutovers", Cutover),
    ("events", Event),
)
TABLES: list[Table] = [Base.metadata.tables[m.__tablename__] for _, m in FIXTURE_ORDER]
