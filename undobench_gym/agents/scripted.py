"""A scripted agent that follows the workflow's gold plan and gives up at the first failure.

It has no recovery logic of its own: under the `bare` method a transport error or a 5xx
ends its attempt, so any recovery measured comes from the method wrapped around it.
"""

from __future__ import annotations

import json
from typing import Any


def _lookup(body: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(body, list):
            body = body[int(part)]
        elif isinstance(body, dict):
            body = body[part]
        else:
            raise KeyError(path)
    return body


def resolve_refs(value: Any, results: list[Any]) -> Any:
    """Replace `@N.path` strings by that field of the N-th gold step's response body."""
    if isinstance(value, str) and value.startswith("@"):
        index, _, path = value[1:].partition(".")
        body = results[int(index)]
        return _lookup(body, path) if path else body
    if isinstance(value, dict):
        return {k: resolve_refs(v, results) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_refs(v, results) for v in value]
    return value


def is_failure(obs: dict[str, Any]) -> bool:
    return "error" in obs or int(obs.get("status", 200)) >= 400


class ScriptedAgent:
    """`reset(plan)` with the env's filled gold plan, then `act(observation)` per step."""

    name = "scripted"
    #: Same observations, same actions: a sweep may run one control episode for all the
    #: scenarios of a workflow, method and seed (`undobench run --own-controls` to not).
    deterministic = True

    def __init__(self) -> None:
        self.plan: list[dict[str, Any]] = []
        self.results: list[Any] = []
        self.cursor = 0

    def reset(self, plan: list[dict[str, Any]]) -> None:
        self.plan, self.results, self.cursor = list(plan), [], 0

    def act(self, observation: str) -> dict[str, Any]:
        obs = json.loads(observation)
        if self.cursor > 0:
            if is_failure(obs):
                return {
                    "tool": "finish",
                    "arguments": {"status": "gave_up", "summary": "a call failed"},
                }
            self.results.append(obs.get("body"))
        if self.cursor >= len(self.plan):
            return {"tool": "finish", "arguments": {"status": "done"}}
        step = self.plan[self.cursor]
        self.cursor += 1
        try:
            args = resolve_refs(step["arguments"], self.results)
        except (KeyError, IndexError, ValueError, TypeError):
            return {
                "tool": "finish",
                "arguments": {"status": "gave_up", "summary": "could not read a result"},
            }
        return {"tool": step["tool"], "arguments": args}
