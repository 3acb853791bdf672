"""Cloud operations workflows: a secret-rotation restart and backing out a bad release."""

from __future__ import annotations

from typing import Any

from undobench_gym.contract.seeding import rng_for
from undobench_gym.contract.specs import FaultScenario, GoldStep, VisibleError, WorkflowSpec
from undobench_gym.services.domains.cloud.fixture import active
from undobench_gym.services.domains.cloud.workflows_common import (
    GREEN,
    B,
    E,
    P,
    events_after,
    pick_service,
    revision,
    weight,
)


def _restart_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("cloud-rotate-secrets", seed)
    svc = pick_service(fx, rng)
    blue = active(fx, svc["id"], "blue")
    assert blue is not None
    ticket = f"SEC-{rng.randint(1000, 9999)}"
    return {
        "service_id": svc["id"],
        "service_name": svc["name"],
        "deployment_id": blue["id"],
        "old_replicas": blue["replicas"],
        "replicas": rng.choice([r for r in range(2, 13) if r != blue["replicas"]]),
        "ticket": ticket,
        "reason": f"pick up rotated database credentials ({ticket})",
        "restarts_after": blue["restart_count"] + 1,
        "restart_events_after": events_after(fx, svc["id"], "deployment.restart", blue["id"]),
    }


DEP = {"id": "{deployment_id}"}
RESTART = WorkflowSpec(
    id="cloud-rotate-secrets",
    domain="cloud",
    split="val",
    kind="multi_effect",
    instruction=(
        "Security rotated the database credentials of {service_name} ({service_id}) under "
        "{ticket}. Scale its blue deployment {deployment_id} from {old_replicas} to "
        '{replicas} replicas, then restart its instances once with the reason "{reason}" so '
        "they pick up the new credentials. The instances must be restarted exactly once."
    ),
    tools=[
        "get_service",
        "get_deployment",
        "list_events",
        "scale_deployment",
        "restart_instances",
    ],
    required_effects=[
        E(
            op="deployment.scale",
            identity={"deployment_id": "{deployment_id}", "replicas": "{replicas}"},
        ),
        E(op="deployment.restart", identity={"deployment_id": "{deployment_id}"}),
    ],
    invariants=[
        P.field_is(
            "blue has the new replica count", "cl_deployments", DEP, "replicas", "{replicas}"
        ),
        P.field_is(
            "the instances were restarted once",
            "cl_deployments",
            DEP,
            "restart_count",
            "{restarts_after}",
        ),
        P.count(
            "one restart more in the activity log than before the task",
            "cl_events",
            {"deployment_id": "{deployment_id}", "action": "deployment.restart"},
            "{restart_events_after}",
        ),
    ],
    gold_plan=[
        GoldStep(tool="get_deployment", arguments={"deployment_id": "{deployment_id}"}),
        GoldStep(
            tool="scale_deployment",
            arguments={"deployment_id": "{deployment_id}", "replicas": "{replicas}"},
        ),
        GoldStep(
            tool="restart_instances",
            arguments={"deployment_id": "{deployment_id}", "reason": "{reason}"},
        ),
    ],
    scenarios=[
        FaultScenario.on(
            "mid-sequence",
            B.POST_MUTATION_PRE_ACK,
            "scale_deployment",
            description="the scale commits but its response is lost before the restart",
        ),
        FaultScenario.on("restart-lost-ack", B.POST_MUTATION_PRE_ACK, "restart_instances"),
        FaultScenario.on(
            "restart-pre-timeout",
            B.PRE_MUTATION,
            "restart_instances",
            visible_error=VisibleError.TIMEOUT,
        ),
    ],
    draw_params=_restart_params,
)


def _rollback_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    svc = fx["services"][0]
    bad = active(fx, svc["id"], "green")
    blue = active(fx, svc["id"], "blue")
    assert bad is not None and blue is not None
    # The green revision the bad one replaced (older green revisions are history too).
    good = max(
        (
            d
            for d in fx["deployments"]
            if d["service_id"] == svc["id"] and d["colour"] == "green" and d["status"] != "active"
        ),
        key=lambda d: int(d["revision"]),
    )
    green_weight = next(
        t["weight"]
        for t in fx["traffic"]
        if t["service_id"] == svc["id"] and t["colour"] == "green"
    )
    return {
        "service_id": svc["id"],
        "service_name": svc["name"],
        "bad_id": bad["id"],
        "bad_image": bad["image"],
        "good_image": good["image"],
        "blue_id": blue["id"],
        "blue_image": blue["image"],
        "green_weight": green_weight,
        "revision_after": svc["latest_revision"] + 1,
    }


ROLLBACK = WorkflowSpec(
    id="cloud-rollback-bad-release",
    domain="cloud",
    split="val",
    kind="compensation",
    instruction=(
        "Incident: {service_name} ({service_id}) release {bad_image} in the green slot is "
        "failing in production while it takes {green_weight}% of the traffic. Back it out: "
        "send 100% of the traffic to blue, remove the bad green deployment {bad_id} from the "
        "discovery catalog, and roll the green slot back exactly one revision, to its "
        "previous image {good_image}. Leave blue as it is."
    ),
    tools=[
        "get_service",
        "list_deployments",
        "list_endpoints",
        "set_traffic",
        "deregister_endpoint",
        "rollback_deployment",
    ],
    required_effects=[
        E(op="traffic.set", identity={"service_id": "{service_id}", "blue": 100, "green": 0}),
        E(
            op="endpoint.deregister",
            identity={"service_id": "{service_id}", "deployment_id": "{bad_id}"},
        ),
        E(op="deployment.rollback", identity={"service_id": "{service_id}", "colour": "green"}),
    ],
    forbidden_effects=[
        E(op="deployment.rollback", identity={"service_id": "{service_id}", "colour": "blue"}),
    ],
    invariants=[
        P.field_is(
            "green runs the previous image again", "cl_deployments", GREEN, "image", "{good_image}"
        ),
        revision("{revision_after}"),
        P.count(
            "the bad deployment left the catalog", "cl_endpoints", {"deployment_id": "{bad_id}"}, 0
        ),
        P.count("blue is still in the catalog", "cl_endpoints", {"deployment_id": "{blue_id}"}),
        P.field_is("blue is untouched", "cl_deployments", {"id": "{blue_id}"}, "status", "active"),
        weight("blue", 100),
        weight("green", 0),
    ],
    gold_plan=[
        GoldStep(tool="get_service", arguments={"service_id": "{service_id}"}),
        GoldStep(
            tool="set_traffic", arguments={"service_id": "{service_id}", "blue": 100, "green": 0}
        ),
        GoldStep(
            tool="deregister_endpoint",
            arguments={"service_id": "{service_id}", "deployment_id": "{bad_id}"},
        ),
        GoldStep(
            tool="rollback_deployment", arguments={"service_id": "{service_id}", "colour": "green"}
        ),
    ],
    scenarios=[
        FaultScenario.on(
            "comp-lost-ack",
            B.DURING_COMPENSATION,
            "rollback_deployment",
            compensation_commits=True,
            description="the rollback commits, its response is lost; a second one rolls forward",
        ),
        FaultScenario.on(
            "comp-pre-503",
            B.DURING_COMPENSATION,
            "deregister_endpoint",
            visible_error=VisibleError.HTTP_503,
        ),
    ],
    draw_params=_rollback_params,
)
