"""Ticketing service: the read routes of incidents, responders and escalation policies,
and the domain definition.

Incident changes live in `incidents`, pages, notices and comments in `paging`, the
multi-step escalation in `escalations`.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from sqlalchemy import select

from undobench_gym.services.domains._service.kit import (
    DbSession,
    DomainService,
    PathId,
    filtered,
    get_or_404,
    read_route,
    row,
)
from undobench_gym.services.domains.ticketing import escalations, incidents, paging
from undobench_gym.services.domains.ticketing.fixture import build_fixture
from undobench_gym.services.domains.ticketing.models import (
    TABLES,
    Comment,
    Escalation,
    Incident,
    Notice,
    Page,
    Policy,
    PolicyLevel,
    Responder,
)
from undobench_gym.services.domains.ticketing.views import (
    IncidentOut,
    IncidentView,
    PolicyView,
    ResponderOut,
    incident_view,
    policy_view,
)

router = APIRouter(prefix="/v1")
STATUS_PATTERN = "^(open|acknowledged|resolved)$"


@read_route(router, "/responders", "list_responders", list[ResponderOut])
def list_responders(
    s: DbSession, team: str | None = Query(None, max_length=64)
) -> list[dict[str, Any]]:
    """List on-call responders, optionally for one team."""
    q = select(Responder).order_by(Responder.team, Responder.name)
    return [row(r) for r in s.scalars(filtered(q, (Responder.team, team)))]


@read_route(router, "/policies", "list_policies", list[PolicyView])
def list_policies(s: DbSession) -> list[dict[str, Any]]:
    """List escalation policies with their ordered levels of responders."""
    return [policy_view(s, p) for p in s.scalars(select(Policy).order_by(Policy.name))]


@read_route(router, "/policies/{policy_id}", "get_policy", PolicyView)
def get_policy(s: DbSession, policy_id: PathId) -> dict[str, Any]:
    """Retrieve one escalation policy: level 1 is paged first, then level 2, and so on."""
    return policy_view(s, get_or_404(s, Policy, policy_id, "policy"))


@read_route(router, "/incidents", "list_incidents", list[IncidentOut])
def list_incidents(
    s: DbSession,
    status: str | None = Query(None, pattern=STATUS_PATTERN),
    service: str | None = Query(None, max_length=64),
    external_ref: str | None = Query(None, max_length=64),
) -> list[dict[str, Any]]:
    """List incidents, optionally by status, affected service or alert reference."""
    q = filtered(
        select(Incident).order_by(Incident.created, Incident.id),
        (Incident.status, status),
        (Incident.service, service),
        (Incident.external_ref, external_ref),
    )
    return [row(i) for i in s.scalars(q)]


@read_route(router, "/incidents/{incident_id}", "get_incident", IncidentView)
def get_incident(s: DbSession, incident_id: PathId) -> dict[str, Any]:
    """Retrieve one incident with its pages, escalations, comments and notices."""
    return incident_view(s, get_or_404(s, Incident, incident_id, "incident"))


# ---- domain definition -------------------------------------------------------------

#: Fixture keys and their models, parents first (foreign keys).
FIXTURE_ORDER = (
    ("responders", Responder),
    ("policies", Policy),
    ("policy_levels", PolicyLevel),
    ("incidents", Incident),
    ("escalations", Escalation),
    ("pages", Page),
    ("comments", Comment),
    ("notices", Notice),
)

DOMAIN = DomainService(
    name="ticketing",
    title="UndoBench Ticketing",
    routers=[router, incidents.router, paging.router, escalations.router],
    tables=TABLES,
    fixture=build_fixture,
    fixture_order=FIXTURE_ORDER,
    partial_state=escalations.partial_state,
)

__all__ = ["DOMAIN"]
