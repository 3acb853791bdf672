"""Which fault each rollout of a GRPO group gets.

A GRPO group is `num_generations` rollouts of one dataset row, so they share the seed and
with it the task instance (same ids, same amounts). The fault is drawn per rollout: the
k-th rollout of a task instance takes slot k of a cycle that holds the control episode (no
fault) and every chosen scenario, in an order seeded by the task instance. A group of the
cycle's length therefore sees the control and each fault once, so the advantage compares
recoveries with the healthy run; shorter groups see consecutive slots. Same dataset order,
same draws.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from undobench_gym.contract.seeding import rng_for
from undobench_gym.contract.specs import Boundary, WorkflowSpec
from undobench_gym.core import catalog

#: A TRL rollout is one conversation: it cannot roll the model's memory back to a
#: checkpoint, which POST_ACK_PRE_CHECKPOINT needs (the harness of `undobench run` does).
UNSUPPORTED = (Boundary.POST_ACK_PRE_CHECKPOINT,)


def scenarios_for(
    workflow: WorkflowSpec, boundaries: Iterable[str] | None = None, *, ambiguous: bool = True
) -> list[str]:
    """The workflow's scenario ids at the given boundaries (all supported ones if None)."""
    wanted = None if boundaries is None else {Boundary(b) for b in boundaries}
    bad = (wanted or set()) & set(UNSUPPORTED)
    if bad:
        raise ValueError(
            f"{', '.join(sorted(b.value for b in bad))}: a TRL rollout cannot restore the "
            "model's memory from a checkpoint; evaluate that boundary with `undobench run`"
        )
    return [
        s.id
        for s in workflow.scenarios
        if s.boundary not in UNSUPPORTED
        and (wanted is None or s.boundary in wanted)
        and (ambiguous or not s.ambiguous)
        and not s.then
    ]


class FaultMix:
    """The per-rollout fault draw. `controls` control slots per cycle (at least 0)."""

    def __init__(self, scenarios: dict[str, list[str]], *, controls: int = 1) -> None:
        if controls < 0:
            raise ValueError("controls must be at least 0")
        for wf, ids in scenarios.items():
            spec = catalog.find_workflow(wf)
            for sid in ids:
                spec.scenario(sid)  # KeyError names the known ones
            if not ids and not controls:
                raise ValueError(f"workflow {wf!r}: no scenario and no control slot to draw")
        self.scenarios = {wf: list(ids) for wf, ids in scenarios.items()}
        self.controls = controls
        self._seen: defaultdict[tuple[int, str], int] = defaultdict(int)

    def cycle(self, seed: int, workflow: str) -> list[str | None]:
        slots: list[str | None] = [None] * self.controls + list(self.scenarios.get(workflow, []))
        rng_for("rl-fault-mix", seed, workflow).shuffle(slots)
        return slots

    def draw(self, seed: int, workflow: str) -> str | None:
        """The next rollout's scenario id for this task instance (None: the control)."""
        if workflow not in self.scenarios:
            raise ValueError(
                f"workflow {workflow!r} is not in this fault mix; "
                f"known: {', '.join(sorted(self.scenarios))}"
            )
        k = self._seen[(seed, workflow)]
        self._seen[(seed, workflow)] = k + 1
        slots = self.cycle(seed, workflow)
        return slots[k % len(slots)]
