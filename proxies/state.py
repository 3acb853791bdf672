"""Per-episode state shared by the proxy's addons (and its control thread)."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any

CRASH_HEADER = "x-undobench-crash-point"
HEADER_PREFIX = "x-undobench-"
MAX_EVENTS = 10_000


@dataclass(frozen=True)
class RoutePattern:
    tool: str
    method: str
    regex: re.Pattern[str]
    read_only: bool


@dataclass
class FaultPlan:
    """A concrete plan: the env has already resolved boundary and hidden coin to an action."""

    scenario: str
    action: str  # drop_request | drop_response | crash
    call_index: int | None = None
    tool: str | None = None
    nth: int = 1
    visible_error: str = "connection_reset"
    crash_point: str | None = None
    timeout_s: float = 5.0

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FaultPlan:
        plan = cls(**data)
        if plan.action not in ("drop_request", "drop_response", "crash"):
            raise ValueError(f"unknown fault action {plan.action!r}")
        if (plan.call_index is None) == (plan.tool is None):
            raise ValueError("a fault plan targets either call_index or tool")
        if plan.action == "crash" and not plan.crash_point:
            raise ValueError("a crash plan needs a crash_point")
        return plan

    def matches(self, index: int, tool: str | None, nth: int) -> bool:
        if self.call_index is not None:
            return index == self.call_index
        return tool == self.tool and nth == self.nth


@dataclass
class EpisodeState:
    lock: threading.Lock = field(default_factory=threading.Lock)
    episode_id: str | None = None
    call_index: int = 0
    tool_counts: dict[str, int] = field(default_factory=dict)
    plan: FaultPlan | None = None
    fired: bool = False
    fault: dict[str, Any] | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    dropped_events: int = 0
    routes: list[RoutePattern] = field(default_factory=list)

    def begin(self, episode_id: str, plan: FaultPlan | None) -> None:
        with self.lock:
            self.episode_id = episode_id
            self.call_index = 0
            self.tool_counts = {}
            self.plan = plan
            self.fired = False
            self.fault = None
            self.events = []
            self.dropped_events = 0

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

    def mark_fired(self, record: dict[str, Any], episode: str | None) -> None:
        with self.lock:
            if episode != self.episode_id:
                return
            self.fired = True
            self.fault = record

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                "episode_id": self.episode_id,
                "calls": self.call_index,
                "fault_fired": self.fired,
                "fault": self.fault,
                "events": list(self.events),
                "dropped_events": self.dropped_events,
            }


#: One state per mitmdump process; the addons and the control thread share it.
STATE = EpisodeState()
