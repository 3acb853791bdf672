"""Single-transaction cloud mutations: deployments, traffic and the discovery catalog.

Each writes its activity-log row and its commit-log row in the same transaction.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, model_validator
from sqlalchemy.orm import Session

from undobench_gym.services.domains._service.kit import (
    Id,
    KeyHeader,
    PathId,
    error,
    get_or_404,
    row,
    run_mutation,
    write_route,
)
from undobench_gym.services.domains.cloud.common import (
    COLOUR_PATTERN,
    IMAGE_PATTERN,
    MAX_REPLICAS,
    deploy_revision,
    endpoint_of,
    log_effect,
    register,
    require_no_traffic,
    set_weights,
    weights,
)
from undobench_gym.services.domains.cloud.effects import (
    DEPLOY,
    DEREGISTER,
    REGISTER,
    RESTART,
    SCALE,
    SET_TRAFFIC,
)
from undobench_gym.services.domains.cloud.models import Deployment, Service
from undobench_gym.services.domains.cloud.responses import (
    DeploymentOut,
    DeregisteredOut,
    EndpointOut,
    TrafficOut,
)

router = APIRouter(prefix="/v1")


# ---- deployments -------------------------------------------------------------------


class DeploymentIn(BaseModel):
    colour: str = Field(pattern=COLOUR_PATTERN)
    image: str = Field(max_length=200, pattern=IMAGE_PATTERN)
    replicas: int = Field(strict=True, ge=1, le=MAX_REPLICAS)


@write_route(
    router,
    "POST",
    "/services/{service_id}/deployments",
    "create_deployment",
    DEPLOY,
    DeploymentOut,
    201,
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
        request, route="create_deployment", native=DEPLOY.native, payload=payload, apply=apply
    )


def _active_or_409(s: Session, deployment_id: str) -> Deployment:
    dep = get_or_404(s, Deployment, deployment_id, "deployment")
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


@write_route(
    router, "PUT", "/deployments/{deployment_id}/replicas", "scale_deployment", SCALE, DeploymentOut
)
def scale_deployment(request: Request, deployment_id: PathId, body: ScaleIn) -> JSONResponse:
    """Set the replica count of an active deployment. Setting the same count again is
    harmless. A deployment that takes traffic cannot be scaled to 0."""
    args = {"deployment_id": deployment_id, "replicas": body.replicas}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        dep = _active_or_409(s, deployment_id)
        if body.replicas == 0 and weights(s, dep.service_id)[dep.colour] > 0:
            raise error(409, "slot_in_service", f"The {dep.colour} slot takes traffic")
        previous, dep.replicas = dep.replicas, body.replicas
        log_effect(s, SCALE, args, key, dep.service_id, dep.id, replicas=dep.replicas, was=previous)
        return 200, row(dep)

    return run_mutation(
        request, route="scale_deployment", native=SCALE.native, payload=args, apply=apply
    )


class RestartIn(BaseModel):
    reason: str = Field(min_length=1, max_length=200)


@write_route(
    router,
    "POST",
    "/deployments/{deployment_id}/restarts",
    "restart_instances",
    RESTART,
    DeploymentOut,
    201,
)
def restart_instances(request: Request, deployment_id: PathId, body: RestartIn) -> JSONResponse:
    """Rolling-restart every instance of an active deployment (e.g. to pick up rotated
    secrets). Not idempotent: every call is another restart of every instance."""
    args = {"deployment_id": deployment_id, **body.model_dump()}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        dep = _active_or_409(s, deployment_id)
        dep.restart_count += 1
        log_effect(s, RESTART, args, key, dep.service_id, dep.id, reason=body.reason)
        return 201, row(dep)

    return run_mutation(
        request, route="restart_instances", native=RESTART.native, payload=args, apply=apply
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


@write_route(
    router, "PUT", "/services/{service_id}/traffic", "set_traffic", SET_TRAFFIC, TrafficOut
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

    return run_mutation(
        request, route="set_traffic", native=SET_TRAFFIC.native, payload=payload, apply=apply
    )


class EndpointIn(BaseModel):
    deployment_id: Id


@write_route(
    router,
    "POST",
    "/services/{service_id}/endpoints",
    "register_endpoint",
    REGISTER,
    EndpointOut,
    201,
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
        request, route="register_endpoint", native=REGISTER.native, payload=payload, apply=apply
    )


@write_route(
    router,
    "DELETE",
    "/services/{service_id}/endpoints/{deployment_id}",
    "deregister_endpoint",
    DEREGISTER,
    DeregisteredOut,
)
def deregister_endpoint(
    request: Request, service_id: PathId, deployment_id: PathId
) -> JSONResponse:
    """Remove a deployment from the service's discovery catalog, so clients stop resolving
    it. A deployment that takes traffic cannot be removed. 404 if it is not registered."""
    args = {"service_id": service_id, "deployment_id": deployment_id}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        get_or_404(s, Service, service_id, "service")
        ep = endpoint_of(s, service_id, deployment_id)
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
        # Removing an entry undoes its registration (a repair, if it was not wanted).
        undoes = {"op": REGISTER.op, "identity": args}
        log_effect(
            s,
            DEREGISTER,
            args,
            key,
            service_id,
            deployment_id,
            undoes=undoes,
            address=view["address"],
        )
        return 200, {**view, "deregistered": True}

    return run_mutation(
        request, route="deregister_endpoint", native=DEREGISTER.native, payload=args, apply=apply
    )
