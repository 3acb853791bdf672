"""The `stress` split: a domain's workflow again, under fault schedules.

One fault per trajectory cannot tell a lucky recovery from a right one: with two retries a
blind retry usually gets through, the saga never has to compensate, and the journal never
differs from plain keys. A stress workflow is a DEV/VAL/TEST workflow unchanged (task,
parameters, oracles, gold plan), under another id and in the `stress` split, whose
scenarios are cascades:

- `crash-then-lost-ack`: the agent's worker dies right after a mutating call is
  acknowledged (POST_ACK_PRE_CHECKPOINT), and the next mutating call after that loses its
  acknowledgement too (the re-send of a restarted agent, or the next step of a resumed one);
- `lost-ack-twice`: a mutating call commits and its answer is lost, and so is the answer to
  the next mutating call (the retry);
- `retries-dropped`: a mutating call is dropped before the service, and so are the next two
  (both retries of a bounded retry): the step fails for good.

The DEV/VAL/TEST workflows are left as they are; a stress workflow only adds scenarios.
"""

from __future__ import annotations

from undobench_gym.contract.specs import Boundary, FaultScenario, LaterFault, WorkflowSpec

B = Boundary


def stress(workflow: WorkflowSpec, *scenarios: FaultScenario) -> WorkflowSpec:
    """`workflow` in the stress split, under `scenarios` only."""
    if not scenarios:
        raise ValueError(f"a stress variant of {workflow.id} needs at least one scenario")
    return workflow.model_copy(
        update={"id": f"{workflow.id}-stress", "split": "stress", "scenarios": list(scenarios)}
    )


def crash_then_lost_ack(tool: str, nth: int = 1) -> FaultScenario:
    """The worker dies after the n-th `tool` call's acknowledgement; the next mutating call
    after it commits and loses its answer."""
    return FaultScenario.on(
        "crash-then-lost-ack",
        B.POST_ACK_PRE_CHECKPOINT,
        tool,
        nth,
        then=(LaterFault(boundary=B.POST_MUTATION_PRE_ACK, after=0),),
        description=f"worker crash after {tool} is acknowledged, then the next mutating "
        "call's acknowledgement is lost",
    )


def lost_ack_twice(tool: str, nth: int = 1) -> FaultScenario:
    """The n-th `tool` call commits and its answer is lost; so is the next mutating call's."""
    return FaultScenario.on(
        "lost-ack-twice",
        B.POST_MUTATION_PRE_ACK,
        tool,
        nth,
        then=(LaterFault(boundary=B.POST_MUTATION_PRE_ACK, after=0),),
        description=f"{tool}'s acknowledgement is lost, and so is the retry's",
    )


def retries_dropped(tool: str, nth: int = 1) -> FaultScenario:
    """The n-th `tool` call and the next two mutating calls never reach the service."""
    return FaultScenario.on(
        "retries-dropped",
        B.PRE_MUTATION,
        tool,
        nth,
        then=(
            LaterFault(boundary=B.PRE_MUTATION, after=0),
            LaterFault(boundary=B.PRE_MUTATION, after=1),
        ),
        description=f"{tool} is dropped before the service, and so are both retries",
    )
