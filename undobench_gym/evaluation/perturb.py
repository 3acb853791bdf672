"""Scripted agents built from a workflow's gold plan, each with one known defect.

A `Plan` is a list of steps; each step remembers which gold step it came from, so `@N.path`
references keep pointing at the N-th *gold* step's response even when steps are dropped
or repeated. Builders return None when a perturbation does not apply to a workflow.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from undobench_gym.agents.scripted import is_failure, resolve_refs
from undobench_gym.contract.specs import WorkflowSpec, fill
from undobench_gym.core.catalog import ToolSpec

DUPLICABLE = ("additive", "irreversible_send")


@dataclass
class Step:
    tool: str
    arguments: dict[str, Any]
    gold: int | None  # the gold step it came from (its response feeds @N references)
    repeat: bool = False  # a deliberate repeat: its failure does not end the attempt
    marked: bool = False  # the step a perturbation changed (its response decides the verdict)


@dataclass
class Sent:
    step: Step
    arguments: dict[str, Any]
    observation: dict[str, Any]

    @property
    def status(self) -> int | None:
        s = self.observation.get("status")
        return s if isinstance(s, int) else None


@dataclass
class PlanAgent:
    """Follows its plan; gives up at the first failure of a non-repeat step."""

    plan: list[Step]
    name: str = "conformance"
    sent: list[Sent] = field(default_factory=list)
    _results: dict[int, Any] = field(default_factory=dict)
    _cursor: int = 0
    _pending: tuple[Step, dict[str, Any]] | None = None
    gave_up: bool = False

    def reset(self, plan: list[dict[str, Any]]) -> None:
        self.sent, self._results, self._cursor, self._pending = [], {}, 0, None

    def _refs(self) -> list[Any]:
        size = max(self._results, default=-1) + 1
        return [self._results.get(i) for i in range(size)]

    def act(self, observation: str) -> dict[str, Any]:
        if self._pending is not None:
            step, args = self._pending
            obs = json.loads(observation)
            self.sent.append(Sent(step, args, obs))
            self._pending = None
            if is_failure(obs) and not step.repeat:
                self.gave_up = True
                return {"tool": "finish", "arguments": {"status": "gave_up"}}
            if step.gold is not None and step.gold not in self._results and not is_failure(obs):
                self._results[step.gold] = obs.get("body")
        if self._cursor >= len(self.plan):
            return {"tool": "finish", "arguments": {"status": "done"}}
        step = self.plan[self._cursor]
        self._cursor += 1
        try:
            args = resolve_refs(step.arguments, self._refs())
        except (KeyError, IndexError, ValueError, TypeError):
            self.gave_up = True
            return {"tool": "finish", "arguments": {"status": "gave_up"}}
        self._pending = (step, args)
        return {"tool": step.tool, "arguments": args}


@dataclass
class Context:
    workflow: WorkflowSpec
    tools: dict[str, ToolSpec]
    gold: list[dict[str, Any]]  # the filled gold plan (env.gold_plan())
    params: dict[str, Any]

    def mutating(self, i: int) -> bool:
        return not self.tools[self.gold[i]["tool"]].read_only

    def effect_class(self, i: int) -> str | None:
        return self.tools[self.gold[i]["tool"]].effect_class

    def op(self, i: int) -> str | None:
        return self.tools[self.gold[i]["tool"]].op

    def steps(self) -> list[Step]:
        return [Step(s["tool"], copy.deepcopy(s["arguments"]), i) for i, s in enumerate(self.gold)]


Builder = Callable[[Context], list[Step] | None]


def always_retry(ctx: Context) -> list[Step] | None:
    out: list[Step] = []
    for step in ctx.steps():
        out.append(step)
        if ctx.mutating(step.gold or 0):
            out.append(Step(step.tool, copy.deepcopy(step.arguments), step.gold, repeat=True))
    return out if len(out) > len(ctx.gold) else None


def duplicate_last_additive(ctx: Context) -> list[Step] | None:
    idx = [i for i in range(len(ctx.gold)) if ctx.effect_class(i) in DUPLICABLE]
    if not idx:
        return None
    out = ctx.steps()
    last = out[idx[-1]]
    out.insert(idx[-1] + 1, Step(last.tool, copy.deepcopy(last.arguments), last.gold, repeat=True))
    return out


def skip_step(i: int) -> Builder:
    def build(ctx: Context) -> list[Step] | None:
        return [s for s in ctx.steps() if s.gold != i]

    return build


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], Any]]:
    if isinstance(value, dict):
        return [x for k, v in value.items() for x in _leaves(v, (*path, k))]
    if isinstance(value, list):
        return [x for i, v in enumerate(value) for x in _leaves(v, (*path, i))]
    return [(path, value)]


def _set(obj: Any, path: tuple[Any, ...], value: Any) -> None:
    for part in path[:-1]:
        obj = obj[part]
    obj[path[-1]] = value


def _candidates(ctx: Context, steps: list[int]) -> list[tuple[int, tuple[Any, ...], Any]]:
    """Task values in mutating steps: numbers first, then strings; not references, ids
    resolved from responses, or idempotency keys."""
    numbers, strings = [], []
    for i in steps:
        for path, v in _leaves(ctx.gold[i]["arguments"]):
            if path[0] == "idempotency_key" or (isinstance(v, str) and v.startswith("@")):
                continue
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                numbers.append((i, path, v))
            elif isinstance(v, str) and v:
                strings.append((i, path, v))
    return numbers + strings


def wrong_value_in(steps: Callable[[Context], list[int]]) -> Builder:
    def build(ctx: Context) -> list[Step] | None:
        found = _candidates(ctx, steps(ctx))
        if not found:
            return None
        i, path, v = found[0]
        out = ctx.steps()
        wrong = v + 1 if isinstance(v, (int, float)) else f"{v}-x"
        _set(out[i].arguments, path, wrong)
        return out

    return build


def mutating_steps(ctx: Context) -> list[int]:
    return [i for i in range(len(ctx.gold)) if ctx.mutating(i)]


def compensation_steps(ctx: Context) -> list[int]:
    return [i for i in mutating_steps(ctx) if ctx.tools[ctx.gold[i]["tool"]].compensation]


def commit_forbidden(ctx: Context) -> list[Step] | None:
    """Make the first forbidden effect that a workflow tool can produce happen: the gold
    step of that tool is re-aimed at the forbidden identity (or the call is appended)."""
    for exp in ctx.workflow.forbidden_effects:
        identity = fill(exp.identity, ctx.params)
        for name in ctx.workflow.tools:
            tool = ctx.tools[name]
            props = set(tool.parameters.get("properties", {}))
            wanted = {k: v for k, v in identity.items() if v is not None}
            if tool.op != exp.op or not set(wanted) <= props:
                continue
            out = ctx.steps()
            same = [s for s in out if s.tool == name]
            if same:
                target = same[0]
                for k in identity:
                    target.arguments.pop(k, None)
                target.arguments.update(wanted)
                target.marked = True
                return out
            required = set(tool.parameters.get("required", []))
            if required <= set(wanted):
                return [*out, Step(name, wanted, None, marked=True)]
    return None
