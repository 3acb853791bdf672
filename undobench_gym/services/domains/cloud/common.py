"""Helpers the cloud routes share: rules, views, and the steps a deploy is made of.

Each step helper writes its event row and its commit-log row inside the caller's
transaction, so a composite can run each step in a transaction of its own.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from undobench_gym.services.domains._service.kit import (
    Effect,
    error,
    flush_or_409,
    new_id,
    now,
    row,
    seed_of,
)
from undobench_gym.services.domains.cloud.effects import DEPLOY, REGISTER, SET_TRAFFIC
from undobench_gym.services.domains.cloud.fixture import COLOURS, address_for, deployment_id
from undobench_gym.services.domains.cloud.models import (
    Cutover,
    Deployment,
    Endpoint,
    Event,
    Service,
    Traffic,
)

COLOUR_PATTERN = "^(blue|green)$"
IMAGE_PATTERN = r"^[a-z0-9][a-z0-9./-]{0,127}:[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
MAX_REPLICAS = 50


def event(
    s: Session,
    action: str,
    service_id: str,
    deployment_id: str | None = None,
    **detail: Any,
) -> None:
    s.add(
        Event(
            at=now(s),
            service_id=service_id,
            deployment_id=deployment_id,
            action=action,
            detail=detail,
        )
    )


def log_effect(
    s: Session,
    effect: Effect,
    args: dict[str, Any],
    key: str | None,
    service_id: str,
    deployment_id: str | None = None,
    *,
    ref: str | None = None,
    undoes: dict[str, Any] | None = None,
    **detail: Any,
) -> None:
    """An effect's activity-log row (named after its op) and its commit-log row, in that
    order: both read the virtual clock. `ref` and `undoes` go to the commit-log row."""
    event(s, effect.op, service_id, deployment_id, **detail)
    effect.commit(s, args, key, ref=ref, undoes=undoes)


def active_deployment(s: Session, service_id: str, colour: str) -> Deployment | None:
    q = select(Deployment).where(
        Deployment.service_id == service_id,
        Deployment.colour == colour,
        Deployment.status == "active",
    )
    return s.scalar(q)


def weights(s: Session, service_id: str) -> dict[str, int]:
    rows = s.scalars(select(Traffic).where(Traffic.service_id == service_id))
    out = {c: 0 for c in COLOURS}
    out.update({t.colour: t.weight for t in rows})
    return out


def endpoint_of(s: Session, service_id: str, deployment_id: str) -> Endpoint | None:
    """The deployment's entry in the service's discovery catalog, if it has one."""
    q = select(Endpoint).where(
        Endpoint.service_id == service_id, Endpoint.deployment_id == deployment_id
    )
    return s.scalar(q)


def require_no_traffic(s: Session, service_id: str, colour: str, doing: str) -> None:
    weight = weights(s, service_id)[colour]
    if weight > 0:
        raise error(
            409,
            "slot_in_service",
            f"The {colour} slot takes {weight}% of the traffic; shift its traffic to the "
            f"other colour with set_traffic before you {doing}",
        )


def require_no_cutover(s: Session, service_id: str) -> None:
    found = s.scalar(
        select(Cutover).where(Cutover.service_id == service_id, Cutover.status == "in_progress")
    )
    if found is not None:
        raise error(
            409,
            "cutover_in_progress",
            f"Cutover {found.id} ({found.change_id}) of this service is in progress after step "
            f"'{found.step}'; finish it with resume_cutover first",
        )


def deploy_revision(
    s: Session,
    svc: Service,
    colour: str,
    image: str,
    replicas: int,
    *,
    health: str = "healthy",
    key: str | None = None,
    effect: Effect = DEPLOY,
    undoes: dict[str, Any] | None = None,
) -> Deployment:
    """A new revision in one slot: it becomes active, the slot's previous one superseded.
    `effect` names what the revision is (a deployment, or a rollback's redeploy, which
    `undoes` the revision it supersedes)."""
    previous = active_deployment(s, svc.id, colour)
    if previous is not None:
        previous.status = "superseded"
    svc.latest_revision += 1
    dep = Deployment(
        id=deployment_id(seed_of(s), svc.id, svc.latest_revision),
        service_id=svc.id,
        colour=colour,
        revision=svc.latest_revision,
        image=image,
        replicas=replicas,
        status="active",
        health=health,
        restart_count=0,
        created=now(s),
    )
    s.add(dep)
    args = {"service_id": svc.id, "colour": colour, "image": image, "replicas": replicas}
    detail = {"colour": colour, "image": image, "replicas": replicas, "revision": dep.revision}
    replaced = previous.id if previous else None
    log_effect(
        s, effect, args, key, svc.id, dep.id, ref=dep.id, undoes=undoes, **detail, replaced=replaced
    )
    s.flush()
    return dep


def register(s: Session, svc: Service, dep: Deployment, key: str | None = None) -> Endpoint:
    """Add a deployment to the discovery catalog (unique per service and deployment)."""
    found = endpoint_of(s, svc.id, dep.id)
    if found is not None:
        raise error(
            409,
            "resource_exists",
            f"Deployment {dep.id} is already registered for {svc.name} as {found.address} "
            f"({found.id}); list_endpoints shows the catalog",
        )
    ep = Endpoint(
        id=new_id(s, "ep"),
        service_id=svc.id,
        deployment_id=dep.id,
        colour=dep.colour,
        address=address_for(svc.name, dep.revision),
        registered=now(s),
    )
    s.add(ep)
    args = {"service_id": svc.id, "deployment_id": dep.id}
    log_effect(s, REGISTER, args, key, svc.id, dep.id, address=ep.address)
    # A concurrent registration may have won the unique constraint.
    flush_or_409(s, f"Deployment {dep.id} is already registered")
    return ep


def check_servable(s: Session, svc: Service, new: dict[str, int]) -> None:
    """A colour may only take traffic if its active deployment is healthy and registered."""
    for colour, weight in new.items():
        if weight == 0:
            continue
        dep = active_deployment(s, svc.id, colour)
        if dep is None:
            raise error(409, "no_deployment", f"{svc.name} has no active {colour} deployment")
        if dep.health != "healthy":
            raise error(409, "not_healthy", f"The {colour} deployment {dep.id} is {dep.health}")
        if endpoint_of(s, svc.id, dep.id) is None:
            raise error(
                409,
                "not_registered",
                f"The {colour} deployment {dep.id} is not in the discovery catalog; "
                "register_endpoint it before sending it traffic",
            )


def set_weights(s: Session, svc: Service, new: dict[str, int], key: str | None = None) -> None:
    check_servable(s, svc, new)
    for colour in COLOURS:
        t = s.get(Traffic, (svc.id, colour))
        if t is None:
            s.add(Traffic(service_id=svc.id, colour=colour, weight=new[colour]))
        else:
            t.weight = new[colour]
    detail: dict[str, Any] = dict(new)  # the weights, in the caller's order
    log_effect(s, SET_TRAFFIC, {"service_id": svc.id, **new}, key, svc.id, None, **detail)


def service_view(s: Session, svc: Service) -> dict[str, Any]:
    deps = s.scalars(
        select(Deployment)
        .where(Deployment.service_id == svc.id, Deployment.status == "active")
        .order_by(Deployment.colour)
    )
    eps = s.scalars(
        select(Endpoint).where(Endpoint.service_id == svc.id).order_by(Endpoint.registered)
    )
    return {
        **row(svc),
        "active_deployments": {d.colour: row(d) for d in deps},
        "traffic": weights(s, svc.id),
        "endpoints": [row(e) for e in eps],
    }
