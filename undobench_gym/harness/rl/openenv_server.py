"""An UndoBench domain as an OpenEnv environment server (`undobench openenv --domain D`).

OpenEnv (openenv-core) serves an `Environment` over HTTP and WebSocket; each WebSocket
session gets its own instance, which here owns one `gym.make("UndoBench/<Domain>-v0")` env
and so one stack. Episodes are the gym's: `reset(seed=s, fault=<scenario id or None>,
workflow=<id>)` starts the seeded task instance with that fault (a pair is two resets of one
seed, one without the fault), `step({"tool", "arguments"})` is one tool call through the
fault proxy, and the last step carries `done`, the reward (success: right state, no harm)
and the verdict. As in the gym, nothing an observation holds tells the control and the fault
episode apart before the fault. Stacks start on the first reset and are kept in a pool when
a session closes, so a new session does not pay for a stack start.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import gymnasium as gym
from openenv.core.env_server import (  # type: ignore[import-untyped]  # no py.typed
    Action,
    Environment,
    Observation,
    State,
    create_fastapi_app,
)

from undobench_gym.contract.errors import UndoBenchError
from undobench_gym.core.registration import ENV_IDS


class UndoBenchAction(Action):  # type: ignore[misc]  # openenv is untyped
    """One tool call: `{"tool": name, "arguments": {...}}` (`finish` ends the task)."""

    tool: str
    arguments: dict[str, Any] = {}


class UndoBenchObservation(Observation):  # type: ignore[misc]
    """`text` is the env's observation (JSON text, what a real client would see); on reset
    `task` and `tools` (function-tool schemas) too; on the last step `verdict`."""

    text: str = ""
    task: str | None = None
    tools: list[dict[str, Any]] | None = None
    verdict: dict[str, Any] | None = None


class StackPool:
    """Gym envs of one domain, kept between sessions; closed together on shutdown."""

    def __init__(self, domain: str, *, runtime: str, max_steps: int) -> None:
        ids = {d: e for e, d in ENV_IDS.items()}
        if domain not in ids:
            raise UndoBenchError(f"unknown domain {domain!r}; known: {', '.join(sorted(ids))}")
        self.env_id, self.runtime, self.max_steps = ids[domain], runtime, max_steps
        self._idle: list[Any] = []
        self._all: list[Any] = []
        self._lock = threading.Lock()

    def take(self) -> Any:
        with self._lock:
            if self._idle:
                return self._idle.pop()
        env = gym.make(self.env_id, runtime=self.runtime, max_steps=self.max_steps)
        with self._lock:
            self._all.append(env)
        return env

    def give_back(self, env: Any) -> None:
        with self._lock:
            self._idle.append(env)

    def close(self) -> None:
        with self._lock:
            envs, self._all, self._idle = self._all, [], []
        for env in envs:
            env.close()


class UndoBenchOpenEnv(Environment[UndoBenchAction, UndoBenchObservation, State]):  # type: ignore[misc]
    SUPPORTS_CONCURRENT_SESSIONS = True  # one stack per session: nothing shared

    def __init__(self, pool: StackPool) -> None:
        super().__init__()
        self._pool = pool
        self._env: Any = None
        self._state = State()

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        fault: str | None = None,
        workflow: str | None = None,
        **_kwargs: Any,
    ) -> UndoBenchObservation:
        if self._env is None:
            self._env = self._pool.take()
        obs, info = self._env.reset(seed=seed, options={"fault": fault, "workflow": workflow})
        self._state = State(episode_id=info["episode_id"], step_count=0)
        self._state.workflow = info["workflow"]  # State allows extra fields
        return UndoBenchObservation(text=obs, task=info["task"], tools=info["tools"])

    def step(
        self, action: UndoBenchAction, timeout_s: float | None = None, **_kwargs: Any
    ) -> UndoBenchObservation:
        if self._env is None:
            raise UndoBenchError("call reset first: no episode is running")
        obs, reward, terminated, truncated, info = self._env.step(
            {"tool": action.tool, "arguments": action.arguments}
        )
        self._state.step_count += 1
        done = bool(terminated or truncated)
        return UndoBenchObservation(
            text=obs,
            done=done,
            reward=float(reward) if done else None,
            verdict=info.get("verdict"),
        )

    @property
    def state(self) -> State:
        return self._state

    def close(self) -> None:
        if self._env is not None:
            self._pool.give_back(self._env)
            self._env = None


def create_app(pool: StackPool, *, max_sessions: int = 4) -> Any:
    """The FastAPI app (HTTP `/reset`, `/step`, `/state`, `/schema`, `/health` and the
    WebSocket `/ws` sessions OpenEnv clients use)."""
    return create_fastapi_app(
        lambda: UndoBenchOpenEnv(pool),
        UndoBenchAction,
        UndoBenchObservation,
        max_concurrent_envs=max_sessions,
    )


def observation_json(obs: dict[str, Any]) -> Any:
    """An observation's `text` parsed (for clients that got it as a dict)."""
    return json.loads(obs["text"])
