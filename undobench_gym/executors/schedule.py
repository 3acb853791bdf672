"""The driver's queue: pairs grouped by the stack they need, handed to the worker that
already holds that stack, so stacks start once per worker instead of once per pair."""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable

from .base import StackKey, TrialTask


class Scheduler:
    def __init__(self, tasks: Iterable[TrialTask]) -> None:
        self.queues: OrderedDict[StackKey, deque[TrialTask]] = OrderedDict()
        for t in tasks:
            self.queues.setdefault(t.stack_key, deque()).append(t)

    def __len__(self) -> int:
        return sum(len(q) for q in self.queues.values())

    def push_front(self, task: TrialTask) -> None:
        """A retry goes first in its group: it keeps its place in the sweep's order."""
        self.queues.setdefault(task.stack_key, deque()).appendleft(task)
        self.queues.move_to_end(task.stack_key, last=False)

    def pop_for(self, held: list[StackKey], others: set[StackKey]) -> TrialTask | None:
        """A pair for a worker holding `held` (LRU order) while other workers hold `others`:
        its own most recent stack first, then a stack nobody holds (in sweep order), then
        the largest remaining group."""
        live = [k for k, q in self.queues.items() if q]
        if not live:
            return None
        for key in reversed(held):
            if self.queues.get(key):
                return self.queues[key].popleft()
        free = [k for k in live if k not in others]
        key = free[0] if free else max(live, key=lambda k: len(self.queues[k]))
        return self.queues[key].popleft()
