"""Concurrent-writer workflows of the `stress` split.

A DEV/VAL/TEST task again, under another id, with another client of the same services
acting between the agent's steps (`specs.ConcurrentWriter`): in the control episode and
the fault episode alike, at the same point. The oracles know the final state with the
writer's change in it (its commits are its own, never the agent's effects). Two families:

- `writer-lookalike`: the agent's call is dropped before the service (PRE_MUTATION), and
  right after it another client makes the same call (another billing client charges the
  same customer the same amount; another user posts the same words in the channel). A
  read-back now shows a new record carrying every value the agent sent: a
  verify-before-retry agent takes it for its own and never makes its own call (its effect
  is missing); an agent that re-sends does it right.
- `writer-overwrite`: the agent's call commits and its answer is lost
  (POST_MUTATION_PRE_ACK), and right after it another operator sets the same field to
  another value (the autoscaler scales, a colleague reassigns, a hotfix lands). A blind
  re-send, or a read-back that sees the other value and concludes the write never landed,
  overwrites the other operator's change; the final state must keep it. An idempotency
  key replays the first answer instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from undobench_gym.contract.specs import (
    Boundary,
    ConcurrentWriter,
    FaultScenario,
    GoldStep,
    StatePredicate,
    WorkflowSpec,
)

#: The families' scenario ids (the same in every domain: reports group by them).
LOOKALIKE = "writer-lookalike"
OVERWRITE = "writer-overwrite"

#: What the agent is told: others use the same system; their changes are not its own.
NOTE = (
    " Other clients and operators use the same system at the same time: what they do is "
    "not your work (it neither does your part nor may you undo it)."
)


def lookalike(tool: str, nth: int = 1) -> FaultScenario:
    """The n-th `tool` call is dropped before the service (the writer then makes it too)."""
    return FaultScenario.on(
        LOOKALIKE,
        Boundary.PRE_MUTATION,
        tool,
        nth,
        description=f"{tool} is dropped before the service; right after it another client "
        "makes the same call",
    )


def overwrite(tool: str, nth: int = 1) -> FaultScenario:
    """The n-th `tool` call commits and loses its answer (the writer then changes it)."""
    return FaultScenario.on(
        OVERWRITE,
        Boundary.POST_MUTATION_PRE_ACK,
        tool,
        nth,
        description=f"{tool}'s acknowledgement is lost; right after it another operator "
        "sets the same field to another value",
    )


def writer(
    after: str, description: str, *actions: tuple[str, dict[str, Any]], nth: int = 1
) -> ConcurrentWriter:
    """A writer acting after the agent's n-th `after` call: `actions` are (tool, args)."""
    return ConcurrentWriter(
        tool=after,
        nth=nth,
        actions=tuple(GoldStep(tool=t, arguments=a) for t, a in actions),
        description=description,
    )


def with_writer(
    workflow: WorkflowSpec,
    the_writer: ConcurrentWriter,
    scenario: FaultScenario,
    *,
    params: Callable[[int, dict[str, Any], dict[str, Any]], dict[str, Any]],
    invariants: list[StatePredicate],
) -> WorkflowSpec:
    """`workflow` in the stress split with `the_writer`, under `scenario`. `params(seed,
    fixture, task params)` adds the writer's values and the counts the writer's change
    moves; `invariants` replace the task's (the final state with the writer's change)."""
    draw = workflow.draw_params

    def draw_with_writer(seed: int, fixture: dict[str, Any]) -> dict[str, Any]:
        base = draw(seed, fixture)
        return {**base, **params(seed, fixture, base)}

    return workflow.model_copy(
        update={
            "id": f"{workflow.id}-writer",
            "split": "stress",
            "instruction": workflow.instruction + NOTE,
            "scenarios": [scenario],
            "writer": the_writer,
            "draw_params": draw_with_writer,
            "invariants": invariants,
        }
    )


def replace(
    invariants: list[StatePredicate], changes: dict[str, StatePredicate]
) -> list[StatePredicate]:
    """The task's invariants with some replaced (by description); a replacement whose
    description is new is added."""
    out = [changes.get(p.description, p) for p in invariants]
    known = {p.description for p in invariants}
    return out + [p for d, p in changes.items() if d not in known]
