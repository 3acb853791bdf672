"""Cloud service: read-only routes and the domain definition.

Single-transaction mutations live in `mutations`, the multi-step cutover and the rollback
in `rollouts`.
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
from undobench_gym.services.domains.cloud import mutations, rollouts
from undobench_gym.services.domains.cloud.common import COLOUR_PATTERN, service_view
from undobench_gym.services.domains.cloud.fixture import build_fixture
from undobench_gym.services.domains.cloud.models import (
    FIXTURE_ORDER,
    TABLES,
    Deployment,
    Endpoint,
    Event,
    Service,
)
from undobench_gym.services.domains.cloud.responses import (
    DeploymentOut,
    EndpointOut,
    EventOut,
    ServiceDetail,
    ServiceOut,
)

router = APIRouter(prefix="/v1")


@read_route(router, "/services", "list_services", list[ServiceOut])
def list_services(
    s: DbSession,
    name: str | None = Query(None, max_length=64),
    team: str | None = Query(None, max_length=64),
) -> list[dict[str, Any]]:
    """List services, optionally by name or owning team."""
    q = select(Service).order_by(Service.name)
    q = filtered(q, (Service.name, name), (Service.team, team))
    return [row(v) for v in s.scalars(q)]


@read_route(router, "/services/{service_id}", "get_service", ServiceDetail)
def get_service(s: DbSession, service_id: PathId) -> dict[str, Any]:
    """Retrieve one service with its active blue and green deployments, its traffic weights
    per colour and its endpoints in the discovery catalog."""
    return service_view(s, get_or_404(s, Service, service_id, "service"))


@read_route(router, "/deployments", "list_deployments", list[DeploymentOut])
def list_deployments(
    s: DbSession,
    service_id: str | None = Query(None, max_length=64),
    colour: str | None = Query(None, pattern=COLOUR_PATTERN),
) -> list[dict[str, Any]]:
    """List deployment revisions, newest first, optionally for one service and colour.
    Superseded revisions are kept as the rollout history."""
    q = select(Deployment).order_by(Deployment.service_id, Deployment.revision.desc())
    q = filtered(q, (Deployment.service_id, service_id), (Deployment.colour, colour))
    return [row(d) for d in s.scalars(q)]


@read_route(router, "/deployments/{deployment_id}", "get_deployment", DeploymentOut)
def get_deployment(s: DbSession, deployment_id: PathId) -> dict[str, Any]:
    """Retrieve one deployment revision (image, replicas, health, restart count)."""
    return row(get_or_404(s, Deployment, deployment_id, "deployment"))


@read_route(router, "/services/{service_id}/endpoints", "list_endpoints", list[EndpointOut])
def list_endpoints(s: DbSession, service_id: PathId) -> list[dict[str, Any]]:
    """The discovery catalog entries of one service: which deployments clients resolve."""
    get_or_404(s, Service, service_id, "service")
    q = select(Endpoint).where(Endpoint.service_id == service_id)
    return [row(e) for e in s.scalars(q.order_by(Endpoint.registered, Endpoint.id))]


@read_route(router, "/events", "list_events", list[EventOut])
def list_events(
    s: DbSession,
    service_id: str | None = Query(None, max_length=64),
    action: str | None = Query(None, max_length=64),
    limit: int = Query(200, ge=1, le=1000),
) -> list[dict[str, Any]]:
    """The platform activity log (deploys, restarts, scaling, traffic, catalog changes),
    oldest first, optionally for one service or action."""
    q = select(Event).order_by(Event.seq)
    q = filtered(q, (Event.service_id, service_id), (Event.action, action))
    return [row(e) for e in s.scalars(q.limit(limit))]


# ---- domain definition -------------------------------------------------------------


DOMAIN = DomainService(
    name="cloud",
    title="UndoBench Cloud",
    # This order is the order of the OpenAPI document and so of the tool catalogue.
    routers=[router, mutations.router, rollouts.router],
    tables=TABLES,
    fixture=build_fixture,
    fixture_order=FIXTURE_ORDER,
    partial_state=rollouts.partial_state,
)

__all__ = ["DOMAIN"]
