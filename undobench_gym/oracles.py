"""Dual oracles: the final state (on values) and the effect history (three layers)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from .specs import (
    EffectExpectation,
    EffectLayers,
    InvariantResult,
    StatePredicate,
    Verdict,
    WorkflowSpec,
    fill,
)

#: Classes where a second commit of the same identity is a second real-world effect.
DUPLICABLE = {"additive", "irreversible_send"}


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class SemanticEffect:
    op: str
    identity: str
    effect_class: str
    count: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "identity": json.loads(self.identity),
            "count": self.count,
            "effect_class": self.effect_class,
        }


def semantic_effects(commit_log: list[dict[str, Any]]) -> list[SemanticEffect]:
    """Group committed mutations by (operation, identity from arguments)."""
    counts: Counter[tuple[str, str]] = Counter()
    classes: dict[tuple[str, str], str] = {}
    for row in commit_log:
        key = (row["op"], _canon(json.loads(row["identity"])))
        counts[key] += 1
        classes[key] = row["effect_class"]
    return [
        SemanticEffect(op, ident, classes[(op, ident)], n)
        for (op, ident), n in sorted(counts.items())
    ]


def _compare(op: str, actual: Any, expected: Any) -> bool:
    if op in ("eq", "count"):
        return bool(actual == expected)
    if op == "ne":
        return bool(actual != expected)
    try:
        return bool(actual >= expected) if op == "ge" else bool(actual <= expected)
    except TypeError:
        return False


def check_predicate(
    pred: StatePredicate, tables: dict[str, list[dict[str, Any]]], params: dict[str, Any]
) -> InvariantResult:
    where = fill(pred.where, params)
    expected = fill(pred.value, params)
    rows = [r for r in tables.get(pred.table, []) if all(r.get(k) == v for k, v in where.items())]
    if pred.op == "count":
        return InvariantResult(
            description=pred.description,
            passed=len(rows) == expected,
            expected=expected,
            actual=len(rows),
        )
    if len(rows) != 1:
        return InvariantResult(
            description=pred.description,
            passed=False,
            expected=expected,
            actual=f"{len(rows)} matching rows",
        )
    actual = rows[0].get(pred.field or "")
    return InvariantResult(
        description=pred.description,
        passed=_compare(pred.op, actual, expected),
        expected=expected,
        actual=actual,
    )


def _key(exp: EffectExpectation, params: dict[str, Any]) -> tuple[str, str]:
    return exp.op, _canon(fill(exp.identity, params))


def evaluate(
    workflow: WorkflowSpec,
    params: dict[str, Any],
    state: dict[str, Any],
    commit_log: list[dict[str, Any]],
    physical_calls: int,
    *,
    reissued_after_commit: int = 0,
    fault_fired: bool | None = None,
    finished: bool = False,
    truncated: bool = False,
) -> Verdict:
    effects = semantic_effects(commit_log)
    by_key = {(e.op, e.identity): e for e in effects}
    invariants = [check_predicate(p, state["tables"], params) for p in workflow.invariants]
    duplicates = [e.as_dict() for e in effects if e.count > 1 and e.effect_class in DUPLICABLE]
    missing, forbidden = [], []
    for exp in workflow.required_effects:
        op, ident = _key(exp, params)
        if op == "" or (op, ident) not in by_key:
            missing.append({"op": op, "identity": json.loads(ident)})
    for exp in workflow.forbidden_effects:
        op, ident = _key(exp, params)
        if (op, ident) in by_key:
            forbidden.append(by_key[(op, ident)].as_dict())
    partial = list(state.get("partial", []))
    state_ok = all(r.passed for r in invariants)
    effects_ok = not (duplicates or missing or forbidden or partial)
    return Verdict(
        success=state_ok and effects_ok,
        state_ok=state_ok,
        effects_ok=effects_ok,
        invariants=invariants,
        layers=EffectLayers(
            physical=physical_calls, committed=len(commit_log), semantic=len(effects)
        ),
        duplicates=duplicates,
        missing=missing,
        forbidden=forbidden,
        partial=partial,
        reissued_after_commit=reissued_after_commit,
        fault_fired=fault_fired,
        finished=finished,
        truncated=truncated,
    )
