"""Composite rollouts: the blue/green cutover (four transactions) and the rollback.

A cutover deploys the new release into the idle colour, waits for it to be healthy,
registers it in the discovery catalog and switches all traffic to it, each step in its own
transaction. Named crash points sit between the steps, so a DURING_MUTATION fault leaves a
real half-done cutover behind (a new deployment that never got the traffic switch);
`resume_cutover` finishes it from the step it reached.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from undobench_gym.services.domains._service.kit import (
    DbSession,
    PathId,
    error,
    filtered,
    flush_or_409,
    get_ctx,
    get_or_404,
    maybe_crash,
    now,
    read_route,
    row,
    run_composite,
    run_mutation,
    seed_of,
    write_route,
)
from undobench_gym.services.domains.cloud.common import (
    COLOUR_PATTERN,
    IMAGE_PATTERN,
    MAX_REPLICAS,
    active_deployment,
    deploy_revision,
    endpoint_of,
    event,
    log_effect,
    register,
    require_no_cutover,
    require_no_traffic,
    set_weights,
    weights,
)
from undobench_gym.services.domains.cloud.effects import (
    DEPLOY,
    RESUME_CUTOVER,
    ROLLBACK,
    START_CUTOVER,
)
from undobench_gym.services.domains.cloud.fixture import cutover_id as new_cutover_id
from undobench_gym.services.domains.cloud.models import Cutover, Deployment, Service
from undobench_gym.services.domains.cloud.responses import CutoverDetail, RollbackOut

router = APIRouter(prefix="/v1")
CHANGE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
#: What a cutover still lacks after each step, for partial_state.
LACKING = {
    "deployed": "is deployed but not yet healthy, not in the discovery catalog, and takes no "
    "traffic",
    "healthy": "is healthy but not in the discovery catalog and takes no traffic",
    "registered": "is registered in the discovery catalog but takes no traffic (the traffic "
    "switch is missing)",
}


def cutover_view(s: Session, c: Cutover) -> dict[str, Any]:
    dep = s.get(Deployment, c.deployment_id)
    return {
        **row(c),
        "deployment": row(dep) if dep else None,
        "traffic": weights(s, c.service_id),
    }


def _cutover(s: Session, cutover_id: str) -> dict[str, Any]:
    return cutover_view(s, get_or_404(s, Cutover, cutover_id, "cutover"))


# ---- read-only routes --------------------------------------------------------------


@read_route(router, "/cutovers", "list_cutovers", list[CutoverDetail])
def list_cutovers(
    s: DbSession,
    service_id: str | None = Query(None, max_length=64),
    change_id: str | None = Query(None, max_length=64),
) -> list[dict[str, Any]]:
    """List blue/green cutovers with their status and last completed step, optionally for
    one service or change id."""
    q = select(Cutover).order_by(Cutover.created, Cutover.id)
    q = filtered(q, (Cutover.service_id, service_id), (Cutover.change_id, change_id))
    return [cutover_view(s, c) for c in s.scalars(q)]


@read_route(router, "/cutovers/{cutover_id}", "get_cutover", CutoverDetail)
def get_cutover(s: DbSession, cutover_id: PathId) -> dict[str, Any]:
    """Retrieve one cutover with its deployment and the service's traffic weights."""
    return _cutover(s, cutover_id)


# ---- the cutover -------------------------------------------------------------------


class CutoverIn(BaseModel):
    change_id: str = Field(max_length=64, pattern=CHANGE_PATTERN)
    image: str = Field(max_length=200, pattern=IMAGE_PATTERN)
    replicas: int = Field(strict=True, ge=1, le=MAX_REPLICAS)


def _idle_colour(s: Session, svc: Service) -> str:
    w = weights(s, svc.id)
    idle = [c for c, weight in w.items() if weight == 0]
    if len(idle) != 1:
        raise error(
            409,
            "traffic_split",
            f"{svc.name} splits its traffic {w}; a cutover needs one colour taking all of "
            "it and the other idle",
        )
    return idle[0]


def _start(s: Session, service_id: str, body: CutoverIn, key: str | None) -> str:
    svc = get_or_404(s, Service, service_id, "service")
    found = s.scalar(select(Cutover).where(Cutover.change_id == body.change_id))
    if found is not None:
        raise error(
            409,
            "resource_exists",
            f"Cutover {body.change_id} already exists ({found.id}, {found.status} after step "
            f"'{found.step}'); if it is in_progress, finish it with resume_cutover instead of "
            "starting it again",
        )
    require_no_cutover(s, service_id)
    colour = _idle_colour(s, svc)
    dep = deploy_revision(s, svc, colour, body.image, body.replicas, health="starting")
    c = Cutover(
        id=new_cutover_id(seed_of(s), service_id, body.change_id),
        service_id=service_id,
        change_id=body.change_id,
        colour=colour,
        image=body.image,
        replicas=body.replicas,
        deployment_id=dep.id,
        status="in_progress",
        step="deployed",
        created=now(s),
    )
    s.add(c)
    args = {"service_id": service_id, **body.model_dump()}
    log_effect(
        s, START_CUTOVER, args, key, service_id, dep.id, change_id=c.change_id, colour=colour
    )
    flush_or_409(s, f"Cutover {body.change_id} already exists")  # a concurrent start won
    return c.id


def _step(engine: Engine, cutover_id: str, expected: str, resuming: bool = False) -> bool:
    """Run the step that follows `expected`, in its own transaction, if it is still due.

    `resuming`: this is the first step a resume_cutover call runs, so the resume's own
    commit-log row goes into the same transaction (a resume that finds nothing to do
    commits nothing)."""
    with Session(engine) as s, s.begin():
        c = get_or_404(s, Cutover, cutover_id, "cutover")
        if c.step != expected:
            return False
        if resuming:
            args = {"cutover_id": cutover_id, "from_step": expected}
            log_effect(
                s, RESUME_CUTOVER, args, None, c.service_id, c.deployment_id, change_id=c.change_id
            )
        svc = get_or_404(s, Service, c.service_id, "service")
        dep = get_or_404(s, Deployment, c.deployment_id, "deployment")
        if dep.status != "active":
            raise error(409, "deployment_superseded", f"Deployment {dep.id} was superseded")
        if expected == "deployed":
            dep.health = "healthy"
            event(s, "deployment.healthy", svc.id, dep.id, checks="passed")
            c.step = "healthy"
        elif expected == "healthy":
            if endpoint_of(s, svc.id, dep.id) is None:
                register(s, svc, dep)
            c.step = "registered"
        else:
            other = "blue" if c.colour == "green" else "green"
            set_weights(s, svc, {c.colour: 100, other: 0})
            c.step, c.status, c.completed = "switched", "completed", now(s)
            event(s, "cutover.complete", svc.id, dep.id, change_id=c.change_id)
    return True


def _advance(request: Request, cutover_id: str, resuming: bool = False) -> None:
    """The steps after the start, each in its own transaction, with the crash points
    between them (a crash there leaves a half-done cutover for resume_cutover)."""
    engine = get_ctx(request).engine
    maybe_crash(request, "cloud.after_green_deployed")
    ran = _step(engine, cutover_id, "deployed", resuming)
    ran = _step(engine, cutover_id, "healthy", resuming and not ran) or ran
    maybe_crash(request, "cloud.after_endpoint_registered")
    _step(engine, cutover_id, "registered", resuming and not ran)


@write_route(
    router,
    "POST",
    "/services/{service_id}/cutovers",
    "start_cutover",
    START_CUTOVER,
    CutoverDetail,
    201,
)
def start_cutover(request: Request, service_id: PathId, body: CutoverIn) -> JSONResponse:
    """Blue/green cutover of a service to a new image: deploy it into the idle colour (the
    one taking no traffic), wait until it is healthy, register it in the discovery catalog,
    then switch all traffic to it. The steps run one after another; a cutover left
    in_progress is finished with resume_cutover. The change id is unique: a repeat is
    refused with 409."""
    return run_composite(
        request,
        route="start_cutover",
        payload={"service_id": service_id, **body.model_dump()},
        start=lambda s, key: _start(s, service_id, body, key),
        advance=lambda cutover_id: _advance(request, cutover_id),
        view=_cutover,
        native=START_CUTOVER.native,
    )


@write_route(
    router, "POST", "/cutovers/{cutover_id}/resume", "resume_cutover", RESUME_CUTOVER, CutoverDetail
)
def resume_cutover(request: Request, cutover_id: PathId) -> dict[str, Any]:
    """Finish the steps an in_progress cutover still lacks (health check, catalog
    registration, traffic switch); a completed cutover is returned as it is."""
    # Outside run_composite: this route has never taken an Idempotency-Key (a resume of
    # a finished cutover commits nothing), and run_composite would honour one in "all"
    # mode. Each read has a session of its own: the one after the steps must see them.
    engine = get_ctx(request).engine
    with Session(engine) as s:
        get_or_404(s, Cutover, cutover_id, "cutover")
    _advance(request, cutover_id, resuming=True)
    with Session(engine) as s:
        return _cutover(s, cutover_id)


# ---- rollback ----------------------------------------------------------------------


class RollbackIn(BaseModel):
    colour: str = Field(pattern=COLOUR_PATTERN)


@write_route(
    router,
    "POST",
    "/services/{service_id}/rollbacks",
    "rollback_deployment",
    ROLLBACK,
    RollbackOut,
    201,
)
def rollback_deployment(request: Request, service_id: PathId, body: RollbackIn) -> JSONResponse:
    """Roll one colour of a service back: redeploy the image of the slot's previous
    revision as a new revision, superseding the current one. Like `rollout undo`, each
    call goes back one revision from whatever is active now, so a second call rolls
    forward again. The slot must take no traffic."""
    payload = {"service_id": service_id, "colour": body.colour}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        svc = get_or_404(s, Service, service_id, "service")
        require_no_cutover(s, service_id)
        current = active_deployment(s, service_id, body.colour)
        if current is None:
            raise error(404, "resource_missing", f"{svc.name} has no active {body.colour} slot")
        previous = s.scalar(
            select(Deployment)
            .where(
                Deployment.service_id == service_id,
                Deployment.colour == body.colour,
                Deployment.revision < current.revision,
            )
            .order_by(Deployment.revision.desc())
        )
        if previous is None:
            raise error(409, "no_history", f"{body.colour} has no earlier revision to go back to")
        require_no_traffic(s, service_id, body.colour, "roll it back")
        image, replicas = previous.image, current.replicas
        # Going back undoes the revision it supersedes, if a deployment made it: a repair,
        # if that deployment was not wanted.
        undoes = {"op": DEPLOY.op, "ref": current.id}
        dep = deploy_revision(
            s, svc, body.colour, image, replicas, key=key, effect=ROLLBACK, undoes=undoes
        )
        return 201, {"rolled_back": current.id, "restored_revision": previous.revision, **row(dep)}

    return run_mutation(
        request, route="rollback_deployment", native=ROLLBACK.native, payload=payload, apply=apply
    )


def partial_state(state: dict[str, Any]) -> list[str]:
    """A cutover still in_progress is a half-applied composite."""
    tables = state["tables"]
    names = {v["id"]: v["name"] for v in tables["cl_services"]}
    issues = []
    for c in tables["cl_cutovers"]:
        if c["status"] != "completed":
            lacking = LACKING.get(c["step"], "is incomplete")
            issues.append(
                f"cutover {c['id']} ({c['change_id']}) of {names.get(c['service_id'])} is "
                f"{c['status']} after step '{c['step']}': {c['colour']} deployment "
                f"{c['deployment_id']} ({c['image']}) {lacking}"
            )
    return issues
