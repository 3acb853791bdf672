"""Cloud under a concurrent writer: right after the agent scales the blue
deployment, another operator (the autoscaler, for a load spike) scales it again, to two
replicas more. If the agent's scale lost its answer, a blind re-send, or a read-back that
sees the other count and concludes the scale never landed, scales it back and undoes the
other operator's change; the deployment must keep it."""

from __future__ import annotations

from typing import Any

from undobench_gym.contract.specs import StatePredicate as P
from undobench_gym.services.domains.cloud.workflows_ops import RESTART
from undobench_gym.services.domains.workflows_writer import overwrite, replace, with_writer, writer


def _params(seed: int, fx: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
    return {"writer_replicas": p["replicas"] + 2}


RESTART_WRITER = with_writer(
    RESTART,
    writer(
        "scale_deployment",
        "the autoscaler scales the same deployment to two replicas more",
        (
            "scale_deployment",
            {"deployment_id": "{deployment_id}", "replicas": "{writer_replicas}"},
        ),
    ),
    overwrite("scale_deployment"),
    params=_params,
    invariants=replace(
        RESTART.invariants,
        {
            "blue has the new replica count": P.field_is(
                "blue keeps the autoscaler's replica count, set after the agent's",
                "cl_deployments",
                {"id": "{deployment_id}"},
                "replicas",
                "{writer_replicas}",
            )
        },
    ),
)
