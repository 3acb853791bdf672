"""The driver's queue: pairs grouped by the stack they need, handed to the worker that
already holds that stack, so stacks start once per worker instead of once per pair.

Pairs that share a control episode (`TrialTask.control_key`: an agent's
scenarios of one workflow, method and seed) stay together: they are queued next to each
other, and once a worker takes one of them the rest are kept for that worker, whose cache
holds the control it ran.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable
from typing import Any

from undobench_gym.harness.executors.base import StackKey, TrialTask


def _grouped(tasks: list[TrialTask]) -> list[TrialTask]:
    """Stable: pairs sharing a control follow the first of them, others keep their place."""
    groups: dict[Any, list[TrialTask]] = {}
    for n, t in enumerate(tasks):
        groups.setdefault(t.control_key if t.control_key is not None else n, []).append(t)
    return [t for group in groups.values() for t in group]


class Scheduler:
    def __init__(self, tasks: Iterable[TrialTask]) -> None:
        self.queues: OrderedDict[StackKey, deque[TrialTask]] = OrderedDict()
        by_stack: dict[StackKey, list[TrialTask]] = {}
        for t in tasks:
            by_stack.setdefault(t.stack_key, []).append(t)
        for key, listed in by_stack.items():
            self.queues[key] = deque(_grouped(listed))
        # A group's remaining pairs, kept for the slot that took its first one.
        self.kept: dict[int, deque[TrialTask]] = {}

    def __len__(self) -> int:
        return sum(len(q) for q in self.queues.values()) + sum(len(q) for q in self.kept.values())

    def push_front(self, task: TrialTask) -> None:
        """A retry goes first in its group: it keeps its place in the sweep's order."""
        self.queues.setdefault(task.stack_key, deque()).appendleft(task)
        self.queues.move_to_end(task.stack_key, last=False)

    def pop_for(
        self, held: list[StackKey], others: set[StackKey], slot: int | None = None
    ) -> TrialTask | None:
        """A pair for a worker holding `held` (LRU order) while other workers hold `others`:
        the rest of the control group it started, then its own most recent stack, then a
        stack nobody holds (in sweep order), then the largest remaining group."""
        kept = self.kept.get(slot) if slot is not None else None
        if kept:
            return kept.popleft()
        task = self._pop(held, others)
        if task is not None and slot is not None and task.control_key is not None:
            queue = self.queues[task.stack_key]
            rest: deque[TrialTask] = deque()
            while queue and queue[0].control_key == task.control_key:
                rest.append(queue.popleft())
            if rest:
                self.kept[slot] = rest
        return task

    def _pop(self, held: list[StackKey], others: set[StackKey]) -> TrialTask | None:
        live = [k for k, q in self.queues.items() if q]
        if not live:
            return None
        for key in reversed(held):
            if self.queues.get(key):
                return self.queues[key].popleft()
        free = [k for k in live if k not in others]
        key = free[0] if free else max(live, key=lambda k: len(self.queues[k]))
        return self.queues[key].popleft()
