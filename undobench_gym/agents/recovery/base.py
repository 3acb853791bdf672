"""What every recovery wrapper needs: the agent's call, the episode's tools as every agent
sees them, a classification of what came back, and a record of what the agent saw.

Zero privilege: the wrappers know the tools only from the schemas `reset` returns in
`info["tools"]` (`public_tools.PublicTool`: parameters, MCP hints, REST route, whether an
idempotency key is accepted), the task and the observations; never from the env's
internals. Every call they add goes through `self.env.step`, so through the fault proxy,
and counts as a physical invocation. Nothing here reads a service's state directly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, SupportsFloat

import gymnasium as gym

from undobench_gym.agents.public_tools import FINISH, KEY_ARG, PublicTool, public_tools

StepResult = tuple[str, SupportsFloat, bool, bool, dict[str, Any]]
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


def episode_tools(info: dict[str, Any]) -> tuple[dict[str, PublicTool], set[str]]:
    """The episode's service tools (from the schemas `reset` returned) and the names that
    take an idempotency key (B2 and B5 add keys there)."""
    schemas = info.get("tools")
    tools = public_tools(schemas if isinstance(schemas, list) else [])
    return tools, {name for name, tool in tools.items() if tool.accepts_key}


#: The longest raw action text kept in the agent's view (as the env's transcript does).
ACTION_TEXT_LIMIT = 2000


def loggable(action: Any) -> Any:
    """The agent's action as it can go into a JSON record: itself when it is JSON (long
    text cut), else its repr."""
    if isinstance(action, (bytes, bytearray)):
        action = repr(bytes(action))
    if isinstance(action, str):
        return action if len(action) <= ACTION_TEXT_LIMIT else action[:ACTION_TEXT_LIMIT] + "…"
    try:
        json.dumps(action, allow_nan=False)
    except (TypeError, ValueError):
        return repr(action)[:ACTION_TEXT_LIMIT]
    return action


class RecoveryWrapper(gym.Wrapper[str, str, str, str]):
    """Base: learns the episode's tools and task instance on reset, and keeps the episode's
    `agent_view`: per agent step, the action the agent sent, the observation text it got
    back, whether the wrapper answered it itself (B1 replay, B5 journal, B6 "verified") and
    how many env steps the wrapper made for it. The env's transcript holds the calls that
    reached the wire; this is the other side of the wrapper. Subclasses implement `handle`."""

    method = "?"

    def __init__(self, env: gym.Env[str, str]) -> None:
        super().__init__(env)
        self.tools: dict[str, PublicTool] = {}
        self.keyed: set[str] = set()
        self.task_instance = ""
        self.agent_view: list[dict[str, Any]] = []
        self._answered = False
        self._env_steps = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        self.tools, self.keyed = episode_tools(info)
        self.task_instance = str(info.get("task_instance", ""))
        self.agent_view = []
        self.on_reset()
        return obs, info

    def on_reset(self) -> None:
        """Clear per-episode state (the same wrapper object serves many episodes)."""

    def step(self, action: Any) -> StepResult:
        self._answered, self._env_steps = False, 0
        obs, reward, terminated, truncated, info = self.handle(action)
        self.agent_view.append(
            {
                "step": len(self.agent_view) + 1,
                "action": loggable(action),
                "observation": obs,
                "answered_by_wrapper": self._answered,
                "env_steps": self._env_steps,
            }
        )
        if terminated or truncated:
            # The trial record gets the agent's side beside the env's wire-level transcript;
            # an outer wrapper replaces an inner one's view with its own (what the agent saw).
            info = {**info, "agent_transcript": self.agent_transcript()}
        return obs, reward, terminated, truncated, info

    def handle(self, action: Any) -> StepResult:
        """One agent step: by default, passed to the env as it is."""
        return self.send(action)

    def agent_transcript(self) -> list[dict[str, Any]]:
        """What the agent sent and saw this episode, step by step (a copy)."""
        return [dict(entry) for entry in self.agent_view]

    def mutating(self, call: Call | None) -> PublicTool | None:
        """The public tool when `call` is a known mutating tool of this episode."""
        if call is None or call.tool == FINISH:
            return None
        tool = self.tools.get(call.tool)
        return tool if tool is not None and not tool.read_only else None

    def send(self, action: Any) -> StepResult:
        """One env step on the agent's behalf (its own call, a retry, a read, an undo)."""
        self._env_steps += 1
        return self.env.step(action)

    def answer(self, text: str, **info: Any) -> StepResult:
        """A step the wrapper answers itself, without a call: no reward, the episode goes on."""
        self._answered = True
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
