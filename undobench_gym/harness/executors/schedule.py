"""The driver's queue: pairs grouped by the stack they need, longest first, handed to the
worker that already holds that stack, so stacks start once per worker instead of once per
pair, and the sweep ends on short pairs.

Pairs that share a control episode (`TrialTask.control_key`: an agent's scenarios of one
workflow, method and seed) stay together: they are queued next to each other, and once a
worker takes one of them the rest are kept for that worker, whose cache holds the control
it ran.

A worker with nothing left on its own stacks joins the stack whose remaining work per
worker on it is largest (work stealing), so big queues get several workers and the last
pairs of every queue finish at about the same time. It does not start a stack that other
workers are emptying when they would finish its work before a new stack could start.
"""

from __future__ import annotations

import statistics
from collections import Counter, OrderedDict, defaultdict, deque
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from undobench_gym.contract.errors import UnknownWorkflowError
from undobench_gym.contract.specs import Boundary
from undobench_gym.core.catalog import find_workflow
from undobench_gym.harness.executors.base import StackKey, TrialTask

#: Seconds a pair of the scripted agent takes when it runs its own control episode, by
#: domain: medians of the TEST factorial (7,020 pairs, process runtime, 2 workers on the
#: 2-core machine). Only their order matters to the schedule; the simulator
#: (`harness.simulate`) uses a run's measured times instead.
OWN_CONTROL_S = {
    "git": 0.25,
    "cloud": 0.10,
    "crm": 0.10,
    "ticketing": 0.09,
    "storage": 0.07,
    "payments": 0.07,
    "messaging": 0.07,
    "database": 0.06,
}
#: A pair that reuses its group's control runs its fault episode only (measured: 0.55).
REUSED_CONTROL = 0.55
#: A crash restarts a service inside the fault episode (measured: about 1.5 times).
CRASH = 1.5
#: What starting a stack costs a worker (measured: 2.2 s on the process runtime), against
#: which the work left on a stack is weighed before another worker joins it; replaced by
#: the sweep's own median once it has started one (`Scheduler.observe`).
STACK_START_S = 2.0
#: How many recent pairs (and stack starts) `Scheduler.observe` takes the median of.
RECENT = 101
#: A pair whose stack took less than this to get was on a stack its worker held.
STARTED_S = 0.05

Cost = Callable[[TrialTask], float]


def _crashes(task: TrialTask) -> bool:
    try:
        sc = find_workflow(task.workflow, task.domain).scenario(task.scenario)
    except (UnknownWorkflowError, KeyError):  # a task built by hand (tests): no entry
        return False
    return bool(sc.crash_point) or sc.boundary is Boundary.POST_ACK_PRE_CHECKPOINT


def pair_cost(task: TrialTask, reuses_control: bool = False) -> float:
    """The expected seconds of one pair, for ordering: its domain, a crash, a reused
    control."""
    base = OWN_CONTROL_S.get(task.domain, 0.1)
    return base * (CRASH if _crashes(task) else 1.0) * (REUSED_CONTROL if reuses_control else 1.0)


def _groups(tasks: list[TrialTask]) -> list[list[TrialTask]]:
    """Pairs sharing a control follow the first of them; others are groups of one."""
    groups: dict[Any, list[TrialTask]] = {}
    for n, t in enumerate(tasks):
        groups.setdefault(t.control_key if t.control_key is not None else n, []).append(t)
    return list(groups.values())


class Scheduler:
    def __init__(self, tasks: Iterable[TrialTask], cost: Cost | None = None) -> None:
        """`cost(task)`: a pair's expected seconds (default: `pair_cost`, which knows which
        pairs of a group reuse its control)."""
        by_stack: dict[StackKey, list[TrialTask]] = {}
        for t in tasks:
            by_stack.setdefault(t.stack_key, []).append(t)
        self.cost: dict[str, float] = {}
        self.remaining: defaultdict[StackKey, float] = defaultdict(float)
        queues: dict[StackKey, deque[TrialTask]] = {}
        for key, listed in by_stack.items():
            groups = _groups(listed)
            for group in groups:
                for n, t in enumerate(group):
                    c = cost(t) if cost else pair_cost(t, reuses_control=n > 0)
                    self.cost[t.pair_id] = c
                    self.remaining[key] += c
            # Longest first (stable: equal groups keep the sweep's order).
            groups.sort(key=lambda g: -sum(self.cost[t.pair_id] for t in g))
            queues[key] = deque(t for g in groups for t in g)
        order = sorted(queues, key=lambda k: -self.remaining[k])
        self.queues: OrderedDict[StackKey, deque[TrialTask]] = OrderedDict(
            (k, queues[k]) for k in order
        )
        # A group's remaining pairs, kept for the slot that took its first one.
        self.kept: dict[int, deque[TrialTask]] = {}
        # What the sweep has measured: seconds per unit of cost (a model agent's pairs take
        # minutes, not the scripted agent's tenths), and what a stack start takes.
        self.scale = 1.0
        self.stack_start_s = STACK_START_S
        # The most recent measurements only: a median over a bounded window stays cheap
        # on the driver's loop however long the sweep, and follows a change of pace.
        self._ratios: deque[float] = deque(maxlen=RECENT)
        self._starts: deque[float] = deque(maxlen=RECENT)

    def observe(self, pair_id: str, wall_s: float, stack_s: float, first: bool = False) -> None:
        """A finished pair's measured time: the costs are rescaled to what this sweep's
        pairs take (the median ratio over the recent ones), and stack starts to theirs.
        `first`: the pair was its worker's first, whose stack start (new interpreters, or
        a fork from a zygote still importing) says nothing of what joining another stack
        costs."""
        cost = self.cost.get(pair_id)
        if cost:
            self._ratios.append(max(0.0, wall_s - stack_s) / cost)
            self.scale = statistics.median(self._ratios)
        if stack_s > STARTED_S and not first:
            self._starts.append(stack_s)
            self.stack_start_s = statistics.median(self._starts)

    def __len__(self) -> int:
        return sum(len(q) for q in self.queues.values()) + sum(len(q) for q in self.kept.values())

    def push_front(self, task: TrialTask) -> None:
        """A retry goes first in its group: it keeps its place in the sweep's order."""
        self.queues.setdefault(task.stack_key, deque()).appendleft(task)
        self.remaining[task.stack_key] += self.cost.get(task.pair_id, 0.0)

    def pop_for(
        self,
        held: list[StackKey],
        others: Collection[StackKey] | Mapping[StackKey, int],
        slot: int | None = None,
    ) -> TrialTask | None:
        """A pair for a worker holding `held` (LRU order) while other workers hold or run
        `others` (a count per stack, or a set): the rest of the control group it started,
        then its own most recent stack, then the stack with the most work left per worker
        on it (see the module's docstring). None: nothing worth taking now."""
        kept = self.kept.get(slot) if slot is not None else None
        if kept:
            return kept.popleft()
        on = others if isinstance(others, Mapping) else Counter(others)
        task = self._pop(held, on)
        if task is None:
            return None
        self.remaining[task.stack_key] -= self.cost.get(task.pair_id, 0.0)
        if slot is not None and task.control_key is not None:
            queue = self.queues[task.stack_key]
            rest: deque[TrialTask] = deque()
            while queue and queue[0].control_key == task.control_key:
                rest.append(queue.popleft())
                self.remaining[task.stack_key] -= self.cost.get(rest[-1].pair_id, 0.0)
            if rest:
                self.kept[slot] = rest
        return task

    def _pop(self, held: list[StackKey], on: Mapping[StackKey, int]) -> TrialTask | None:
        live = [k for k, q in self.queues.items() if q]
        if not live:
            return None
        for key in reversed(held):
            if self.queues.get(key):
                return self.queues[key].popleft()
        # max() keeps the first of equals: the queue order, longest first.
        key = max(live, key=lambda k: self.remaining[k] / (on.get(k, 0) + 1))
        # Its n workers finish its work R alone at R/n; with this worker too, at
        # (R + a stack start)/(n + 1): sooner exactly when R/n is more than a stack start.
        workers = on.get(key, 0)
        if workers and self.remaining[key] * self.scale / workers < self.stack_start_s:
            return None  # its workers finish it sooner than a new stack would start
        return self.queues[key].popleft()
