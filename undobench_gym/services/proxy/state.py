"""Per-episode state shared by the proxy's addons (and its control thread)."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any

from undobench_gym.contract import CRASH_HEADER, HEADER_PREFIX, FaultPlan

__all__ = ["CRASH_HEADER", "HEADER_PREFIX", "FaultPlan"]

MAX_EVENTS = 10_000


@dataclass(frozen=True)
class RoutePattern:
    tool: str
    method: str
    regex: re.Pattern[str]
    read_only: bool


@dataclass
class EpisodeState:
    lock: threading.Lock = field(default_factory=threading.Lock)
    episode_id: str | None = None
    call_index: int = 0
    tool_counts: dict[str, int] = field(default_factory=dict)
    plan: FaultPlan | None = None
    #: The schedule: `plan` first, then the later faults of a cascade (empty otherwise).
    plans: list[FaultPlan] = field(default_factory=list)
    fired: bool = False
    fault: dict[str, Any] | None = None
    #: The targeted call when it was made but the fault did not fire as planned (the
    #: service refused it, or answered before its crash point).
    target: dict[str, Any] | None = None
    #: Per plan of the schedule: its fault record once fired, the targeted call when it
    #: missed, and the call index it engaged (a plan engages one call, at most).
    faults: list[dict[str, Any] | None] = field(default_factory=list)
    targets: list[dict[str, Any] | None] = field(default_factory=list)
    engaged: list[int | None] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    dropped_events: int = 0
    #: Calls of this episode that have no wire event yet (held flows included).
    in_flight: int = 0
    routes: list[RoutePattern] = field(default_factory=list)
    settled: threading.Condition = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.settled = threading.Condition(self.lock)

    def begin(
        self, episode_id: str, plan: FaultPlan | None, then: list[FaultPlan] | None = None
    ) -> None:
        with self.lock:
            self.episode_id = episode_id
            self.call_index = 0
            self.tool_counts = {}
            self.plan = plan
            self.plans = ([plan] if plan else []) + list(then or [])
            self.faults = [None] * len(self.plans)
            self.targets = [None] * len(self.plans)
            self.engaged = [None] * len(self.plans)
            self.fired = False
            self.fault = None
            self.target = None
            self.events = []
            self.dropped_events = 0
            self.in_flight = 0
            self.settled.notify_all()

    def set_routes(self, tools: list[dict[str, Any]]) -> None:
        """Tools as {name, method, path, read_only}; `path` is an OpenAPI template with prefix."""
        routes = []
        for t in tools:
            pattern = re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(t["path"]))
            routes.append(
                RoutePattern(
                    t["name"],
                    t["method"].upper(),
                    re.compile(f"^{pattern}$"),
                    bool(t.get("read_only", False)),
                )
            )
        with self.lock:
            self.routes = routes

    def classify(self, method: str, path: str) -> RoutePattern | None:
        bare = path.split("?", 1)[0]
        for r in self.routes:
            if r.method == method and r.regex.match(bare):
                return r
        return None

    def next_call(self, tool: str | None) -> tuple[int, int]:
        with self.lock:
            self.call_index += 1
            self.in_flight += 1
            nth = 0
            if tool is not None:
                nth = self.tool_counts.get(tool, 0) + 1
                self.tool_counts[tool] = nth
            return self.call_index, nth

    def add_event(self, event: dict[str, Any], episode: str | None) -> None:
        """Record a finished call, unless it began in an earlier episode: a flow held by a
        `timeout` fault can finish after the env has moved on to the next episode."""
        with self.lock:
            if episode != self.episode_id:
                return
            if len(self.events) < MAX_EVENTS:
                self.events.append(event)
            else:
                self.dropped_events += 1
            self.in_flight = max(0, self.in_flight - 1)
            self.settled.notify_all()

    def wait_settled(self, timeout_s: float) -> bool:
        """Wait until every call of the episode has its wire event (a `timeout` fault holds
        its flow for seconds after the client gave up); False if time ran out."""
        with self.lock:
            return self.settled.wait_for(lambda: self.in_flight == 0, timeout=timeout_s)

    def engage(self, index: int, tool: str | None, nth: int, read_only: bool) -> int | None:
        """The plan of the schedule that takes this call, if any (the first in order that
        has not engaged a call yet): a named target, or the next mutating call after the
        call its earlier fault fired on. A fault never lands on a read."""
        if read_only or tool is None:
            return None
        with self.lock:
            for k, plan in enumerate(self.plans):
                if self.engaged[k] is not None:
                    continue
                if plan.after is None:
                    hit = plan.matches(tool, nth, read_only)
                else:
                    earlier = self.faults[plan.after]
                    hit = earlier is not None and index > int(earlier.get("index") or 0)
                if hit:
                    self.engaged[k] = index
                    return k
            return None

    def note_target(self, record: dict[str, Any], episode: str | None, k: int = 0) -> None:
        with self.lock:
            if episode != self.episode_id:
                return
            if k == 0 and self.target is None:
                self.target = record
            if k < len(self.targets) and self.targets[k] is None:
                self.targets[k] = record

    def mark_fired(self, record: dict[str, Any], episode: str | None, k: int = 0) -> None:
        with self.lock:
            if episode != self.episode_id:
                return
            if k == 0:
                self.fired = True
                self.fault = record
            if k < len(self.faults):
                self.faults[k] = record

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                "episode_id": self.episode_id,
                "calls": self.call_index,
                "fault_fired": self.fired,
                "fault": self.fault,
                "target": self.target,
                "faults": list(self.faults),
                "targets": list(self.targets),
                "in_flight": self.in_flight,
                "events": list(self.events),
                "dropped_events": self.dropped_events,
            }


#: One state per mitmdump process; the addons and the control thread share it.
STATE = EpisodeState()
