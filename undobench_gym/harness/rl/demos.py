"""Demonstrations for a warm start: recorded episodes as chat transcripts.

A policy that has never produced a well-formed tool call gives GRPO no reward spread (every
rollout scores 0), so GRPO cannot move it. A short supervised phase on demonstrations fixes
the format first. A demonstration is one real episode on a real stack: an agent (the
benchmark's scripted agent, alone or under a recovery method such as B6 verify-before-retry)
drives `gym.make(...)`, and `Recorder` keeps every call that reached the env with the
observation it got back, so a recovery the method did (a read-back after a lost
acknowledgement, a re-send after a verified absence) appears as the calls it made. Only
episodes the verdict calls a success are kept as demonstrations (`record_demo` returns the
others too, with `success` false, so the caller can count them).

`Demo.messages` renders an episode the way TRL's environment mode shows a rollout to the
model: the system prompt, the task as the user message, then per call an assistant message
with one tool call and a `tool` message with the env's observation text, and a short closing
assistant text after `finish`. Rendered with the same chat template and tool schemas as the
GRPO phase (`tool_schemas`), the supervised and the reinforcement phases see one format.

Seeds: a demonstration set must come from training seeds only; `record_demos` refuses
seeds at or above `held_out_from` (the example evaluates on 100000 and up).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import gymnasium as gym

from undobench_gym.core.catalog import FINISH_TOOL

#: The example's held-out evaluation seeds start here; demonstrations stay below.
HELD_OUT_FROM = 100_000
CLOSING = {"done": "The task is done.", "gave_up": "I could not complete the task."}


class ScriptedPolicy(Protocol):
    """The scripted agent's interface (`undobench_gym.agents.scripted.ScriptedAgent`)."""

    def reset(self, plan: list[dict[str, Any]]) -> None: ...

    def act(self, observation: str) -> dict[str, Any]: ...


class Recorder(gym.Wrapper[str, str, str, str]):
    """Keeps every (action, observation) that reached the wrapped env in this episode."""

    def __init__(self, env: gym.Env[str, str]) -> None:
        super().__init__(env)
        self.steps: list[tuple[dict[str, Any], str]] = []
        self.last_info: dict[str, Any] = {}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        self.steps = []
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[str, Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        parsed = json.loads(action) if isinstance(action, str) else dict(action)
        self.steps.append((parsed, str(obs)))
        self.last_info = info
        return obs, reward, terminated, truncated, info


@dataclass
class Demo:
    """One recorded episode: the task text, the calls with their observations, the verdict."""

    workflow: str
    seed: int
    scenario: str | None
    task: str
    steps: list[tuple[dict[str, Any], str]]
    success: bool
    verdict: dict[str, Any] = field(default_factory=dict)

    @property
    def tools_called(self) -> list[str]:
        return [str(a.get("tool")) for a, _ in self.steps]

    def messages(self, system: str) -> list[dict[str, Any]]:
        """The episode as a chat conversation in TRL's environment-mode shape."""
        msgs: list[dict[str, Any]] = [
            {"role": "system", "content": system},
            {"role": "user", "content": self.task},
        ]
        status = "gave_up"
        for action, obs in self.steps:
            name = str(action.get("tool"))
            args = dict(action.get("arguments") or {})
            if name == FINISH_TOOL["function"]["name"]:
                status = str(args.get("status", "gave_up"))
            call = {"type": "function", "function": {"name": name, "arguments": args}}
            msgs.append({"role": "assistant", "content": "", "tool_calls": [call]})
            msgs.append({"role": "tool", "name": name, "content": obs})
        msgs.append({"role": "assistant", "content": CLOSING.get(status, CLOSING["gave_up"])})
        return msgs


def record_demo(
    env: gym.Env[str, str],
    agent: ScriptedPolicy,
    *,
    seed: int,
    workflow: str,
    scenario: str | None,
    method: Callable[[gym.Env[str, str]], gym.Env[str, str]] | None = None,
    max_actions: int = 16,
) -> Demo:
    """Run `agent` (on the gold plan of this episode) through `method` (a recovery wrapper,
    or none) over a `Recorder` on `env`, and return what reached the env."""
    rec = Recorder(env)
    top: gym.Env[str, str] = method(rec) if method is not None else rec
    obs, info = top.reset(seed=seed, options={"workflow": workflow, "fault": scenario})
    agent.reset(env.unwrapped.gold_plan())  # type: ignore[attr-defined]
    done = False
    for _ in range(max_actions):
        action: Any = agent.act(obs)  # a dict: the env takes dicts and JSON strings
        obs, _r, terminated, truncated, _info = top.step(action)
        if terminated or truncated:
            done = True
            break
    if not done:  # the agent kept going: end it like a step budget would
        rec.last_info = {"verdict": env.unwrapped.truncate("no_finish")["verdict"]}  # type: ignore[attr-defined]
    verdict = dict(rec.last_info.get("verdict") or {})
    return Demo(
        workflow=workflow,
        seed=seed,
        scenario=scenario,
        task=str(info["task"]),
        steps=list(rec.steps),
        success=bool(verdict.get("success")),
        verdict=verdict,
    )


def record_demos(
    env: gym.Env[str, str],
    agent: ScriptedPolicy,
    episodes: Iterable[tuple[int, str, str | None]],
    *,
    method: Callable[[gym.Env[str, str]], gym.Env[str, str]] | None = None,
    held_out_from: int = HELD_OUT_FROM,
    max_actions: int = 16,
) -> list[Demo]:
    """One `record_demo` per (seed, workflow, scenario); raises ValueError on a held-out seed
    (before anything runs)."""
    todo = list(episodes)
    bad = sorted({s for s, _, _ in todo if s >= held_out_from})
    if bad:
        raise ValueError(
            f"seeds {bad[:5]} are held out (>= {held_out_from}): demonstrations come from "
            "training seeds only"
        )
    return [
        record_demo(
            env, agent, seed=s, workflow=w, scenario=f, method=method, max_actions=max_actions
        )
        for s, w, f in todo
    ]


def tool_schemas(env_class: type) -> list[dict[str, Any]]:
    """The tool schemas TRL's environment mode renders for an environment class: its public
    methods other than `reset` and `get_reward`, in name order, through transformers'
    `get_json_schema` (the same call TRL's chat-template rendering makes)."""
    from transformers.utils.chat_template_utils import get_json_schema

    instance = object()  # bound methods, as TRL passes them: `self` is not a parameter
    return [
        get_json_schema(fn.__get__(instance, env_class))
        for name, fn in inspect.getmembers(env_class, predicate=inspect.isfunction)
        if not name.startswith("_") and name not in ("reset", "get_reward")
    ]
