"""One env behind the MCP front end, with episode control kept for the harness.

`EpisodeHost` is the tool session the server serves (`tools`, `call`: one call is one env
step through the fault proxy) and, separately, the harness's handle on the episode
(`reset` with seed and fault, `finish`, the verdict). The agent's MCP session can reach
only the first part: it lists the episode's tools and calls them, `finish` included as in
the gym; it can neither start an episode nor learn the scenario, and a call outside a
running episode is answered with an error result, never with a step.
"""

from __future__ import annotations

import threading
from typing import Any

import gymnasium as gym
from mcp import types

from undobench_gym.contract.errors import UndoBenchError
from undobench_gym.core.mcp.tools import error_result, tool_result


class EpisodeHost:
    """Thread-safe: the MCP server calls `call` from its worker threads while the harness
    calls `reset`/`finish` from its own (the control endpoint, a test, a script)."""

    def __init__(self, env: gym.Env[str, str], workflow: str | None = None) -> None:
        self.env = env
        self.workflow = workflow
        self._lock = threading.RLock()
        self._info: dict[str, Any] | None = None
        self._running = False
        self._record: dict[str, Any] | None = None
        self._verdict: dict[str, Any] | None = None
        self._harness: dict[str, Any] | None = None

    # ---- the agent's side (through MCP) -------------------------------------------------

    def tools(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._info["tools"]) if self._info else []

    def call(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        with self._lock:
            if not self._running:
                message = "no episode is running" if self._info is None else "the task is over"
                return error_result("episode", message)
            action: Any = {"tool": name, "arguments": arguments}  # the env takes dicts too
            obs, _r, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:
                self._end(info)
            return tool_result(obs)

    # ---- the harness's side ------------------------------------------------------------

    def reset(
        self, seed: int, fault: str | None = None, workflow: str | None = None
    ) -> dict[str, Any]:
        """Start an episode; returns what the agent may be told (the task and the tool
        names), the same for the control and the fault episode of a seed."""
        with self._lock:
            options = {"workflow": workflow or self.workflow, "fault": fault}
            _obs, info = self.env.reset(seed=seed, options=options)
            self._info, self._running = info, True
            self._record = self._verdict = None
            base: Any = self.env.unwrapped
            self._harness = base.harness_info()
            return self.public()

    def public(self) -> dict[str, Any]:
        with self._lock:
            if self._info is None:
                return {"running": False}
            names = [t["function"]["name"] for t in self._info["tools"]]
            return {
                "running": self._running,
                "task": self._info["task"],
                "task_instance": self._info["task_instance"],
                "tools": names,
            }

    def finish(self) -> dict[str, Any]:
        """End the episode (truncated, if the agent has not finished it) and return the
        verdict, the trial-record episode and what only the harness knows."""
        with self._lock:
            if self._info is None:
                raise UndoBenchError("no episode has been started: reset first")
            if self._running:
                base: Any = self.env.unwrapped
                self._end(base.truncate("harness_finish"))
            return self.result()

    def result(self) -> dict[str, Any]:
        with self._lock:
            return {
                "running": self._running,
                "verdict": self._verdict,
                "episode": self._record,
                "harness": self._harness,
            }

    def _end(self, info: dict[str, Any]) -> None:
        self._running = False
        self._verdict, self._record = info.get("verdict"), info.get("episode")
