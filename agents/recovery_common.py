"""What every recovery wrapper needs: the agent's call, the episode's tool capabilities, and a
classification of what came back.

The wrappers read capabilities only from the tool catalogue (`ToolSpec`: read-only flag,
effect class, idempotency, compensation, identity fields, REST path) and from the episode's
OpenAI tool schemas; every call they add goes through `self.env.step`, so through the fault
proxy, and counts as a physical invocation. Nothing here reads a service's state directly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, SupportsFloat

import gymnasium as gym

from undobench_gym.catalog import FINISH, ToolSpec

StepResult = tuple[str, SupportsFloat, bool, bool, dict[str, Any]]
KEY_ARG = "idempotency_key"
#: 5xx answers a gateway gives when the backend failed or was not reached: outcome unknown.
TRANSIENT_STATUS = (502, 503, 504)


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class Call:
    """A well-formed tool call as the agent meant it (arguments decoded, key excluded)."""

    tool: str
    arguments: dict[str, Any]

    @property
    def content(self) -> str:
        """What the call asks for, without the idempotency key: the journal's dedupe basis."""
        args = {k: v for k, v in self.arguments.items() if k != KEY_ARG}
        return canonical([self.tool, args])

    def action(self, **extra: Any) -> dict[str, Any]:
        return {"tool": self.tool, "arguments": {**self.arguments, **extra}}


def parse_call(action: Any) -> Call | None:
    """The call in an action (dict or JSON text, `tool` or `name`, arguments as an object or
    as JSON text), or None for anything malformed: that goes to the env untouched, so the
    agent gets the env's own `invalid_action` observation."""
    if isinstance(action, (bytes, bytearray)):
        try:
            action = action.decode()
        except UnicodeDecodeError:
            return None
    if isinstance(action, str):
        try:
            action = json.loads(action)
        except ValueError:
            return None
    if not isinstance(action, dict):
        return None
    tool = action.get("tool", action.get("name"))
    args = action.get("arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            return None
    if args is None:
        args = {}
    if not isinstance(tool, str) or not isinstance(args, dict):
        return None
    return Call(tool, args)


def load_obs(text: str) -> dict[str, Any]:
    try:
        obs = json.loads(text)
    except (TypeError, ValueError):
        return {}
    return obs if isinstance(obs, dict) else {}


def status_of(obs: dict[str, Any]) -> int | None:
    status = obs.get("status")
    return status if isinstance(status, int) else None


def is_transient(obs: dict[str, Any]) -> bool:
    """A transport error or a gateway 5xx: the call's outcome is unknown."""
    err = obs.get("error")
    if isinstance(err, dict) and err.get("type") == "transport":
        return True
    return status_of(obs) in TRANSIENT_STATUS


def is_ack(obs: dict[str, Any]) -> bool:
    status = status_of(obs)
    return status is not None and 200 <= status < 300


def is_over(result: StepResult) -> bool:
    return bool(result[2] or result[3])


def annotate(text: str, **note: Any) -> str:
    """The observation with a `recovery` entry: what the method did, in plain words, so an
    agent (an LLM in particular) knows that middleware acted on its behalf."""
    obs = load_obs(text)
    if not obs:
        return text
    obs["recovery"] = note
    return json.dumps(obs, default=str)


def episode_tools(
    env: gym.Env[str, str], info: dict[str, Any]
) -> tuple[dict[str, ToolSpec], set[str]]:
    """The episode's tools (from the catalogue, restricted to the names `reset` offered) and
    the names that take an idempotency key (from the schemas: B2-K adds keys there)."""
    base: Any = env.unwrapped
    catalogue: dict[str, ToolSpec] = base._domain.tools
    tools, keyed = {}, set()
    for schema in info.get("tools", []):
        fn = schema.get("function", {})
        name = fn.get("name")
        if name == FINISH or name not in catalogue:
            continue
        tools[name] = catalogue[name]
        if KEY_ARG in fn.get("parameters", {}).get("properties", {}):
            keyed.add(name)
    return tools, keyed


class RecoveryWrapper(gym.Wrapper[str, str, str, str]):
    """Base: learns the episode's tools and task instance on reset."""

    method = "?"

    def __init__(self, env: gym.Env[str, str]) -> None:
        super().__init__(env)
        self.tools: dict[str, ToolSpec] = {}
        self.keyed: set[str] = set()
        self.task_instance = ""

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self.tools, self.keyed = episode_tools(self.env, info)
        self.task_instance = str(info.get("task_instance", ""))
        self.on_reset()
        return obs, info

    def on_reset(self) -> None:
        """Clear per-episode state (the same wrapper object serves many episodes)."""

    def mutating(self, call: Call | None) -> ToolSpec | None:
        """The tool spec when `call` is a known mutating tool of this episode."""
        if call is None or call.tool == FINISH:
            return None
        spec = self.tools.get(call.tool)
        return spec if spec is not None and not spec.read_only else None

    def send(self, action: Any) -> StepResult:
        return self.env.step(action)

    def answer(self, text: str, **info: Any) -> StepResult:
        """A step the wrapper answers itself, without a call: no reward, the episode goes on."""
        return text, 0.0, False, False, info

    def send_bounded(self, action: Any, retries: int) -> tuple[StepResult, int]:
        """Send, re-sending while the outcome is transient, at most `retries` more times;
        returns the last result and how many re-sends there were."""
        result = self.send(action)
        tries = 0
        while tries < retries and not is_over(result) and is_transient(load_obs(result[0])):
            tries += 1
            result = self.send(action)
        return result, tries
