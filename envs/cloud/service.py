"""Cloud service routes: services, blue/green deployments, traffic and the discovery catalog.

Read-only routes and single-transaction mutations live here; the multi-step cutover and
the rollback live in `rollouts`.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, model_validator
from sqlalchemy import select
from sqlalchemy.orm import Session

from .._service.context import DomainService
from .._service.db import insert_fixture
from .._service.mutation import READ_ONLY, effect_meta, error, record_commit, run_mutation
from . import rollouts
from .common import (
    COLOUR_PATTERN,
    IMAGE_PATTERN,
    MAX_REPLICAS,
    Ctx,
    Id,
    PathId,
    active_deployment,
    deploy_revision,
    event,
    get_or_404,
    register,
    require_no_traffic,
    row,
    service_view,
    set_weights,
    weights,
)
from .fixture import build_fixture
from .models import TABLES, Cutover, Deployment, Endpoint, Event, Service, Traffic

router = APIRouter(prefix="/v1")
KeyHeader = Annotated[str | None, Header(alias="Idempotency-Key", max_length=255)]


# ---- read-only routes --------------------------------------------------------------


@router.get("/services", operation_id="list_services", openapi_extra=READ_ONLY)
def list_services(
    ctx: Ctx,
    name: str | None = Query(None, max_length=64),
    team: str | None = Query(None, max_length=64),
) -> list[dict[str, Any]]:
    """List services, optionally by name or owning team."""
    with Session(ctx.engine) as s:
        q = select(Service).order_by(Service.name)
        if name:
            q = q.where(Service.name == name)
        if team:
            q = q.where(Service.team == team)
        return [row(v) for v in s.scalars(q)]


@router.get("/services/{service_id}", operation_id="get_service", openapi_extra=READ_ONLY)
def get_service(ctx: Ctx, service_id: PathId) -> dict[str, Any]:
    """Retrieve one service with its active blue and green deployments, its traffic weights
    per colour and its endpoints in the discovery catalog."""
    with Session(ctx.engine) as s:
        return service_view(s, get_or_404(s, Service, service_id, "service"))


@router.get("/deployments", operation_id="list_deployments", openapi_extra=READ_ONLY)
def list_deployments(
    ctx: Ctx,
    service_id: str | None = Query(None, max_length=64),
    colour: str | None = Query(None, pattern=COLOUR_PATTERN),
) -> list[dict[str, Any]]:
    """List deployment revisions, newest first, optionally for one service and colour.
    Superseded revisions are kept as the rollout history."""
    with Session(ctx.engine) as s:
        q = select(Deployment).order_by(Deployment.service_id, Deployment.revision.desc())
        if service_id:
            q = q.where(Deployment.service_id == service_id)
        if colour:
            q = q.where(Deployment.colour == colour)
        return [row(d) for d in s.scalars(q)]


@router.get("/deployments/{deployment_id}", operation_id="get_deployment", openapi_extra=READ_ONLY)
def get_deployment(ctx: Ctx, deployment_id: PathId) -> dict[str, Any]:
    """Retrieve one deployment revision (image, replicas, health, restart count)."""
    with Session(ctx.engine) as s:
        return row(get_or_404(s, Deployment, deployment_id, "deployment"))


@router.get(
    "/services/{service_id}/endpoints", operation_id="list_endpoints", openapi_extra=READ_ONLY
)
def list_endpoints(ctx: Ctx, service_id: PathId) -> list[dict[str, Any]]:
    """The discovery catalog entries of one service: which deployments clients resolve."""
    with Session(ctx.engine) as s:
        get_or_404(s, Service, service_id, "service")
        q = select(Endpoint).where(Endpoint.service_id == service_id)
        return [row(e) for e in s.scalars(q.order_by(Endpoint.registered, Endpoint.id))]


@router.get("/events", operation_id="list_events", openapi_extra=READ_ONLY)
def list_events(
    ctx: Ctx,
    service_id: str | None = Query(None, max_length=64),
    action: str | None = Query(None, max_length=64),
    limit: int = Query(200, ge=1, le=1000),
) -> list[dict[str, Any]]:
    """The platform activity log (deploys, restarts, scaling, traffic, catalog changes),
    oldest first, optionally for one service or action."""
    with Session(ctx.engine) as s:
        q = select(Event).order_by(Event.seq)
        if service_id:
            q = q.where(Event.service_id == service_id)
        if action:
            q = q.where(Event.action == action)
        return [row(e) for e in s.scalars(q.limit(limit))]


# ---- deployments -------------------------------------------------------------------


class DeploymentIn(BaseModel):
    colour: str = Field(pattern=COLOUR_PATTERN)
    image: str = Field(max_length=200, pattern=IMAGE_PATTERN)
    replicas: int = Field(strict=True, ge=1, le=MAX_REPLICAS)


@router.post(
    "/services/{service_id}/deployments",
    operation_id="create_deployment",
    status_code=201,
    openapi_extra=effect_meta(
        "deployment.create", "additive", ["service_id", "colour", "image", "replicas"], "native"
    ),
)
def create_deployment(
    request: Request, service_id: PathId, body: DeploymentIn, idempotency_key: KeyHeader = None
) -> JSONResponse:
    """Deploy an image into the blue or green slot of a service as a new revision; it
    replaces the slot's previous revision and starts healthy with no traffic. The slot must
    take no traffic. Every call is a new revision. Accepts an Idempotency-Key header."""
    payload = {"service_id": service_id, **body.model_dump()}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        svc = get_or_404(s, Service, service_id, "service")
        require_no_traffic(s, service_id, body.colour, "deploy into it")
        dep = deploy_revision(s, svc, body.colour, body.image, body.replicas, key=key)
        return 201, row(dep)

    return run_mutation(
        request, route="create_deployment", native=True, payload=payload, apply=apply
    )


def _active_or_409(s: Session, deployment_id: str) -> Deployment:
    dep: Deployment = get_or_404(s, Deployment, deployment_id, "deployment")
    if dep.status != "active":
        raise error(
            409,
            "deployment_superseded",
            f"Deployment {dep.id} (revision {dep.revision}) is superseded; act on the active "
            f"{dep.colour} deployment instead",
        )
    return dep


class ScaleIn(BaseModel):
    replicas: int = Field(strict=True, ge=0, le=MAX_REPLICAS)


@router.put(
    "/deployments/{deployment_id}/replicas",
    operation_id="scale_deployment",
    openapi_extra=effect_meta("deployment.scale", "set", ["deployment_id", "replicas"]),
)
def scale_deployment(request: Request, deployment_id: PathId, body: ScaleIn) -> JSONResponse:
    """Set the replica count of an active deployment. Setting the same count again is
    harmless. A deployment that takes traffic cannot be scaled to 0."""
    identity = {"deployment_id": deployment_id, "replicas": body.replicas}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        dep = _active_or_409(s, deployment_id)
        if body.replicas == 0 and weights(s, dep.service_id)[dep.colour] > 0:
            raise error(409, "slot_in_service", f"The {dep.colour} slot takes traffic")
        previous, dep.replicas = dep.replicas, body.replicas
        event(s, "deployment.scale", dep.service_id, dep.id, replicas=body.replicas, was=previous)
        record_commit(
            s, op="deployment.scale", effect_class="set", identity=identity, args=identity, key=key
        )
        return 200, row(dep)

    return run_mutation(
        request, route="scale_deployment", native=False, payload=identity, apply=apply
    )


class RestartIn(BaseModel):
    reason: str = Field(min_length=1, max_length=200)


@router.post(
    "/deployments/{deployment_id}/restarts",
    operation_id="restart_instances",
    status_code=201,
    openapi_extra=effect_meta("deployment.restart", "additive", ["deployment_id"]),
)
def restart_instances(request: Request, deployment_id: PathId, body: RestartIn) -> JSONResponse:
    """Rolling-restart every instance of an active deployment (e.g. to pick up rotated
    secrets). Not idempotent: every call is another restart of every instance."""

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        dep = _active_or_409(s, deployment_id)
        dep.restart_count += 1
        event(s, "deployment.restart", dep.service_id, dep.id, reason=body.reason)
        record_commit(
            s,
            op="deployment.restart",
            effect_class="additive",
            identity={"deployment_id": deployment_id},
            args={"deployment_id": deployment_id, **body.model_dump()},
            key=key,
        )
        return 201, row(dep)

    return run_mutation(
        request,
        route="restart_instances",
        native=False,
        payload={"deployment_id": deployment_id, **body.model_dump()},
        apply=apply,
    )


# ---- traffic and the discovery catalog ---------------------------------------------


class TrafficIn(BaseModel):
    blue: int = Field(strict=True, ge=0, le=100)
    green: int = Field(strict=True, ge=0, le=100)

    @model_validator(mode="after")
    def _sums_to_100(self) -> TrafficIn:
        if self.blue + self.green != 100:
            raise ValueError("the blue and green weights must sum to 100")
        return self


@router.put(
    "/services/{service_id}/traffic",
    operation_id="set_traffic",
    openapi_extra=effect_meta("traffic.set", "set", ["service_id", "blue", "green"]),
)
def set_traffic(request: Request, service_id: PathId, body: TrafficIn) -> JSONResponse:
    """Set the percentage of a service's traffic each colour receives (blue + green = 100).
    A colour can only take traffic if its active deployment is healthy and registered in
    the discovery catalog. Setting the same weights again is harmless."""
    payload = {"service_id": service_id, **body.model_dump()}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        svc = get_or_404(s, Service, service_id, "service")
        set_weights(s, svc, body.model_dump(), key=key)
        return 200, {"service_id": service_id, "traffic": weights(s, service_id)}

    return run_mutation(request, route="set_traffic", native=False, payload=payload, apply=apply)


class EndpointIn(BaseModel):
    deployment_id: Id


@router.post(
    "/services/{service_id}/endpoints",
    operation_id="register_endpoint",
    status_code=201,
    openapi_extra=effect_meta(
        "endpoint.register", "create_unique", ["service_id", "deployment_id"], "constraint"
    ),
)
def register_endpoint(request: Request, service_id: PathId, body: EndpointIn) -> JSONResponse:
    """Register a healthy active deployment of the service in the discovery catalog. A
    deployment is registered at most once: a repeat is refused with 409."""
    payload = {"service_id": service_id, **body.model_dump()}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        svc = get_or_404(s, Service, service_id, "service")
        dep = _active_or_409(s, body.deployment_id)
        if dep.service_id != service_id:
            raise error(404, "resource_missing", f"{svc.name} has no deployment {dep.id}")
        if dep.health != "healthy":
            raise error(409, "not_healthy", f"Deployment {dep.id} is {dep.health}")
        return 201, row(register(s, svc, dep, key=key))

    return run_mutation(
        request, route="register_endpoint", native=False, payload=payload, apply=apply
    )


@router.delete(
    "/services/{service_id}/endpoints/{deployment_id}",
    operation_id="deregister_endpoint",
    openapi_extra=effect_meta(
        "endpoint.deregister", "set", ["service_id", "deployment_id"], compensation=True
    ),
)
def deregister_endpoint(
    request: Request, service_id: PathId, deployment_id: PathId
) -> JSONResponse:
    """Remove a deployment from the service's discovery catalog, so clients stop resolving
    it. A deployment that takes traffic cannot be removed. 404 if it is not registered."""
    identity = {"service_id": service_id, "deployment_id": deployment_id}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        get_or_404(s, Service, service_id, "service")
        ep = s.scalar(
            select(Endpoint).where(
                Endpoint.service_id == service_id, Endpoint.deployment_id == deployment_id
            )
        )
        if ep is None:
            raise error(
                404, "resource_missing", f"Deployment {deployment_id} is not in the catalog"
            )
        dep = s.get(Deployment, deployment_id)
        live = weights(s, service_id)[ep.colour] > 0
        if dep is not None and dep.status == "active" and live:
            raise error(
                409,
                "slot_in_service",
                f"Deployment {deployment_id} takes {ep.colour} traffic; shift it away first",
            )
        view = row(ep)
        s.delete(ep)
        event(s, "endpoint.deregister", service_id, deployment_id, address=view["address"])
        record_commit(
            s,
            op="endpoint.deregister",
            effect_class="set",
            identity=identity,
            args=identity,
            key=key,
            compensation=True,
        )
        return 200, {**view, "deregistered": True}

    return run_mutation(
        request, route="deregister_endpoint", native=False, payload=identity, apply=apply
    )


# ---- domain definition -------------------------------------------------------------


_ORDER = (
    ("services", Service),
    ("deployments", Deployment),
    ("endpoints", Endpoint),
    ("traffic", Traffic),
    ("cutovers", Cutover),
    ("events", Event),
)


def seed_state(s: Session, seed: int) -> None:
    insert_fixture(s, build_fixture(seed), _ORDER)


DOMAIN = DomainService(
    name="cloud",
    title="UndoBench Cloud",
    routers=[router, rollouts.router],
    tables=TABLES,
    seed_state=seed_state,
    partial_state=rollouts.partial_state,
)

__all__ = ["DOMAIN", "active_deployment"]
