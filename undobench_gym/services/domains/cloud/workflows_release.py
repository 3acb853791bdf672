"""Cloud release workflows: a green canary and a blue/green cutover."""

from __future__ import annotations

from typing import Any

from undobench_gym.contract.seeding import rng_for
from undobench_gym.contract.specs import FaultScenario, GoldStep, VisibleError, WorkflowSpec
from undobench_gym.services.domains.cloud.fixture import active, cutover_id
from undobench_gym.services.domains.cloud.workflows_common import (
    GREEN,
    B,
    E,
    P,
    base_params,
    deploys_after,
    next_image,
    pick_service,
    revision,
    weight,
)


def _canary_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("cloud-canary-release", seed)
    svc = pick_service(fx, rng)
    params = base_params(seed, fx, svc)
    green = rng.choice([5, 10, 20, 25])
    image = next_image(params["blue_image"], svc["name"], 1, rng.randint(0, 3))
    params.update(
        image=image,
        replicas=rng.randint(1, 3),
        green_weight=green,
        blue_weight=100 - green,
        deploys_after=deploys_after(fx, svc["id"], image),
    )
    return params


CANARY = WorkflowSpec(
    id="cloud-canary-release",
    domain="cloud",
    split="dev",
    kind="multi_effect",
    instruction=(
        "The {team} team wants a canary of {service_name} ({service_id}) release {image}. "
        "Deploy that image into the green slot with {replicas} replicas, register the new "
        "green deployment in the discovery catalog, then send {green_weight}% of the traffic "
        "to green and {blue_weight}% to blue. The release must be deployed exactly once."
    ),
    tools=[
        "get_service",
        "list_deployments",
        "list_endpoints",
        "create_deployment",
        "register_endpoint",
        "set_traffic",
        # the inverses: an unwanted revision can be rolled back, an entry removed
        "rollback_deployment",
        "deregister_endpoint",
    ],
    required_effects=[
        E(
            op="deployment.create",
            identity={
                "service_id": "{service_id}",
                "colour": "green",
                "image": "{image}",
                "replicas": "{replicas}",
            },
        ),
        E(
            op="endpoint.register",
            identity={"service_id": "{service_id}", "deployment_id": "{green_id}"},
        ),
        E(
            op="traffic.set",
            identity={
                "service_id": "{service_id}",
                "blue": "{blue_weight}",
                "green": "{green_weight}",
            },
        ),
    ],
    invariants=[
        P.field_is("green runs the release", "cl_deployments", GREEN, "image", "{image}"),
        P.field_is(
            "green has the replicas asked for", "cl_deployments", GREEN, "replicas", "{replicas}"
        ),
        P.count(
            "the release was deployed once",
            "cl_deployments",
            {"service_id": "{service_id}", "image": "{image}"},
            "{deploys_after}",
        ),
        revision("{revision_after}"),
        P.count("green is in the catalog", "cl_endpoints", {"deployment_id": "{green_id}"}),
        weight("green", "{green_weight}"),
        weight("blue", "{blue_weight}"),
    ],
    gold_plan=[
        GoldStep(tool="get_service", arguments={"service_id": "{service_id}"}),
        GoldStep(
            tool="create_deployment",
            arguments={
                "service_id": "{service_id}",
                "colour": "green",
                "image": "{image}",
                "replicas": "{replicas}",
            },
        ),
        GoldStep(
            tool="register_endpoint",
            arguments={"service_id": "{service_id}", "deployment_id": "@1.id"},
        ),
        GoldStep(
            tool="set_traffic",
            arguments={
                "service_id": "{service_id}",
                "blue": "{blue_weight}",
                "green": "{green_weight}",
            },
        ),
    ],
    scenarios=[
        FaultScenario.on("deploy-lost-ack", B.POST_MUTATION_PRE_ACK, "create_deployment"),
        FaultScenario.on("ambiguous", B.POST_MUTATION_PRE_ACK, "create_deployment", ambiguous=True),
        FaultScenario.on(
            "register-pre-503",
            B.PRE_MUTATION,
            "register_endpoint",
            visible_error=VisibleError.HTTP_503,
        ),
    ],
    draw_params=_canary_params,
)


def _cutover_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("cloud-blue-green-cutover", seed)
    svc = pick_service(fx, rng)
    params = base_params(seed, fx, svc)
    blue = active(fx, svc["id"], "blue")
    assert blue is not None
    change_id = f"CHG-{rng.randint(10000, 99999)}"
    image = next_image(params["blue_image"], svc["name"], 1, rng.randint(0, 5))
    params.update(
        change_id=change_id,
        cutover_id=cutover_id(seed, svc["id"], change_id),
        image=image,
        replicas=blue["replicas"],
        deploys_after=deploys_after(fx, svc["id"], image),
    )
    return params


CUTOVER = WorkflowSpec(
    id="cloud-blue-green-cutover",
    domain="cloud",
    split="test",
    kind="composite",
    instruction=(
        "Change {change_id}: promote {service_name} ({service_id}) to {image} with a "
        "blue/green cutover. The new release goes to the green slot with {replicas} "
        "replicas, must be healthy and registered in the discovery catalog, and then take "
        "100% of the traffic; blue stays deployed as the way back. Release it exactly once."
    ),
    tools=[
        "get_service",
        "list_deployments",
        "list_endpoints",
        "list_cutovers",
        "get_cutover",
        "start_cutover",
        "resume_cutover",
    ],
    required_effects=[
        E(
            op="cutover.start",
            identity={
                "service_id": "{service_id}",
                "change_id": "{change_id}",
                "image": "{image}",
                "replicas": "{replicas}",
            },
        ),
        E(
            op="deployment.create",
            identity={
                "service_id": "{service_id}",
                "colour": "green",
                "image": "{image}",
                "replicas": "{replicas}",
            },
        ),
        E(
            op="endpoint.register",
            identity={"service_id": "{service_id}", "deployment_id": "{green_id}"},
        ),
        E(op="traffic.set", identity={"service_id": "{service_id}", "blue": 0, "green": 100}),
    ],
    # Finishing this cutover after a crash left it half-done is recovery, not harm.
    allowed_effects=[E(op="cutover.resume", identity={"cutover_id": "{cutover_id}"})],
    invariants=[
        P.count(
            "the cutover completed",
            "cl_cutovers",
            {"change_id": "{change_id}", "status": "completed"},
        ),
        P.count(
            "one cutover more than before the task",
            "cl_cutovers",
            {"service_id": "{service_id}"},
            "{cutovers_after}",
        ),
        P.count(
            "the release was deployed once",
            "cl_deployments",
            {"service_id": "{service_id}", "image": "{image}"},
            "{deploys_after}",
        ),
        P.field_is("green runs the release", "cl_deployments", GREEN, "image", "{image}"),
        P.field_is(
            "green has the replicas asked for", "cl_deployments", GREEN, "replicas", "{replicas}"
        ),
        P.field_is("green is healthy", "cl_deployments", GREEN, "health", "healthy"),
        revision("{revision_after}"),
        P.count("green is in the catalog", "cl_endpoints", {"deployment_id": "{green_id}"}),
        weight("green", 100),
        weight("blue", 0),
        P.field_is(
            "blue stays deployed", "cl_deployments", {"id": "{blue_id}"}, "status", "active"
        ),
    ],
    gold_plan=[
        GoldStep(tool="get_service", arguments={"service_id": "{service_id}"}),
        GoldStep(
            tool="start_cutover",
            arguments={
                "service_id": "{service_id}",
                "change_id": "{change_id}",
                "image": "{image}",
                "replicas": "{replicas}",
            },
        ),
    ],
    scenarios=[
        FaultScenario.on(
            "crash-after-green-deployed",
            B.DURING_MUTATION,
            "start_cutover",
            crash_point="cloud.after_green_deployed",
        ),
        FaultScenario.on(
            "crash-after-catalog",
            B.DURING_MUTATION,
            "start_cutover",
            crash_point="cloud.after_endpoint_registered",
        ),
        FaultScenario.on("lost-ack", B.POST_MUTATION_PRE_ACK, "start_cutover"),
    ],
    draw_params=_cutover_params,
)
