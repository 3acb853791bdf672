"""Faults injected into the harness itself: killed services, proxies and sweep drivers.

`KillingAgent` is the scripted gold-plan agent that also kills one of its stack's
processes at a chosen step of a chosen episode. It freezes the process (SIGSTOP) and
kills it (SIGKILL) a moment later, so the env's next request is certainly in flight when
the process dies: a deterministic "crash mid-call" without touching the harness. Load it
with `--agent python:tests.reliability.chaos:KillingAgent`; configure it with `configure()`
in process, or with UB_CHAOS="EPISODE:STEP:ROLE,..." in a sweep subprocess.

`RandomKiller` kills stack processes at random points of a sweep instead.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

from undobench_gym.agents.scripted import ScriptedAgent

from .procs import kill, stack_processes

FREEZE_S = 0.3


@dataclass
class Kill:
    role: str
    pid: int
    at: float
    episode: int | None = None
    step: int | None = None


def freeze_then_kill(pid: int, delay: float = FREEZE_S) -> None:
    """Stop `pid` now and SIGKILL it after `delay`: requests sent meanwhile hang, then
    see the connection drop, as they would when a process dies while serving them."""
    kill(pid, signal.SIGSTOP)
    timer = threading.Timer(delay, kill, (pid, signal.SIGKILL))
    timer.daemon = True
    timer.start()


def pick(
    role: str, protect: set[int], min_age: float = 0.0, rng: random.Random | None = None
) -> int | None:
    """A live process of `role` below this one, not protected, running for `min_age` s."""
    found = sorted(
        p.pid for p in stack_processes(role=role) if p.pid not in protect and p.age_s >= min_age
    )
    if not found:
        return None
    return rng.choice(found) if rng else found[-1]


def _schedule_from_env() -> dict[int, tuple[int, str]]:
    schedule = {}
    for item in filter(None, os.environ.get("UB_CHAOS", "").split(",")):
        episode, step, role = item.split(":")
        schedule[int(episode)] = (int(step), role)
    return schedule


class KillingAgent(ScriptedAgent):
    """Same name as the scripted agent, so its pairs line up with a baseline sweep's."""

    name = "scripted"
    schedule: ClassVar[dict[int, tuple[int, str]]] = {}
    protect: ClassVar[set[int]] = set()
    kills: ClassVar[list[Kill]] = []

    @classmethod
    def configure(cls, schedule: dict[int, tuple[int, str]], protect: set[int]) -> None:
        """`schedule`: episode number (1-based, counted over the sweep) -> (step, role)."""
        cls.schedule, cls.protect, cls.kills = dict(schedule), set(protect), []

    def __init__(self) -> None:
        super().__init__()
        self.episodes = 0
        self.steps = 0
        if not self.schedule and os.environ.get("UB_CHAOS"):
            type(self).schedule = _schedule_from_env()

    def reset(self, plan: list[dict[str, Any]]) -> None:
        super().reset(plan)
        self.episodes += 1
        self.steps = 0

    def act(self, observation: str) -> dict[str, Any]:
        action = super().act(observation)
        self.steps += 1
        step, role = self.schedule.get(self.episodes, (0, ""))
        if self.steps == step and action["tool"] != "finish":
            pid = pick(role, self.protect)
            if pid is not None:
                freeze_then_kill(pid)
                self.kills.append(Kill(role, pid, time.monotonic(), self.episodes, step))
        return action


@dataclass
class RandomKiller:
    """An `on_trial` callback for run_sweep: after each recorded pair, with probability
    `p`, SIGKILL a random service, proxy or sweep worker below this process that has run
    for `min_age` s, sparing the pids in `protect`. With two workers the other worker is
    mid-pair at that moment, so kills land mid-call, between episodes and during resets."""

    protect: set[int]
    p: float = 0.35
    roles: tuple[str, ...] = ("service", "proxy", "worker")
    min_age: float = 1.0
    seed: int = 0
    kills: list[Kill] = field(default_factory=list)
    _rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def __call__(self, _record: dict[str, Any]) -> None:
        if self._rng.random() >= self.p:
            return
        role = self._rng.choice(self.roles)
        pid = pick(role, self.protect, self.min_age, self._rng)
        if pid is not None and kill(pid):
            self.kills.append(Kill(role, pid, time.monotonic()))
