"""Dual oracles: the final state (on values) and the effect history (three layers)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from undobench_gym.contract.specs import (
    EffectExpectation,
    EffectLayers,
    InvariantResult,
    StatePredicate,
    Verdict,
    WorkflowSpec,
    fill,
)
from undobench_gym.core.catalog import FINISH_STATUSES
from undobench_gym.core.repairs import pair_repairs

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


def _normalised(text: Any) -> str:
    return " ".join(str(text).casefold().split())


def content_identity(
    op: str,
    identity: dict[str, Any],
    args: dict[str, Any],
    workflow: WorkflowSpec,
    params: dict[str, Any],
) -> dict[str, Any]:
    """An effect's identity by content, where the task judges free text (`mentions`).

    A message that carries every fact the task asked for is the task's message, whatever
    its wording or whichever client-chosen key it carried: it gets the expectation's
    identity, so a reworded re-send is a duplicate. A message of that op that does not is
    another message: its identity is its normalised text, so a different follow-up is an
    unrequired effect (and only its own repeat a duplicate). Ops no expectation judges by
    text keep the service's identity."""
    expectations = [
        e
        for e in (*workflow.required_effects, *workflow.forbidden_effects)
        if e.op == op and e.mentions
    ]
    for exp in expectations:
        wanted = fill(exp.identity, params)
        if all(k in identity and _canon(identity[k]) == _canon(v) for k, v in wanted.items()):
            facts = fill(exp.mentions, params)
            if all(
                _normalised(fact) in _normalised(args.get(arg, ""))
                for arg, arg_facts in facts.items()
                for fact in arg_facts
            ):
                return dict(wanted)
    fields = {arg for exp in expectations for arg in exp.mentions}
    return {**identity, **{f: _normalised(args.get(f, "")) for f in sorted(fields)}}


def effect_keys(
    commit_log: list[dict[str, Any]],
    workflow: WorkflowSpec | None = None,
    params: dict[str, Any] | None = None,
) -> list[tuple[str, str]]:
    """Each row's (operation, canonical identity), by content where the task judges text."""
    keys = []
    for row in commit_log:
        identity = json.loads(row["identity"])
        if workflow is not None and isinstance(identity, dict):
            identity = content_identity(
                row["op"], identity, row.get("args") or {}, workflow, params or {}
            )
        keys.append((row["op"], _canon(identity)))
    return keys


def semantic_effects(
    commit_log: list[dict[str, Any]],
    workflow: WorkflowSpec | None = None,
    params: dict[str, Any] | None = None,
) -> list[SemanticEffect]:
    """Group committed mutations by (operation, identity); with the workflow, identity is
    by content where the task judges free text (`content_identity`)."""
    counts: Counter[tuple[str, str]] = Counter()
    classes: dict[tuple[str, str], str] = {}
    for row, key in zip(commit_log, effect_keys(commit_log, workflow, params), strict=True):
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


def _allows(exp: EffectExpectation, params: dict[str, Any], effect: SemanticEffect) -> bool:
    """An allowed-effect pattern matches when its op and every field it names agree."""
    if exp.op != effect.op:
        return False
    identity = json.loads(effect.identity)
    wanted = fill(exp.identity, params)
    return all(k in identity and _canon(identity[k]) == _canon(v) for k, v in wanted.items())


def judge_effects(
    workflow: WorkflowSpec, params: dict[str, Any], effects: list[SemanticEffect]
) -> tuple[list[dict[str, Any]], ...]:
    """(duplicates, missing, forbidden, unrequired) of the committed effects.

    A required effect committed fewer times than its multiplicity is missing; more times,
    for a class where a repeat is a new real-world effect (additive, irreversible send),
    it is duplicated. A repeat of a `set` with the same value is harmless. Any other
    committed effect that the task neither requires nor allows is unrequired (forbidden
    ones are listed as forbidden instead); a duplicable effect committed twice with an
    identity the task never asked for is a duplicate as well."""
    by_key = {(e.op, e.identity): e for e in effects}
    required: dict[tuple[str, str], int] = {}
    for exp in workflow.required_effects:
        key = _key(exp, params)
        required[key] = required.get(key, 0) + exp.count
    forbidden_keys = {_key(exp, params) for exp in workflow.forbidden_effects}
    duplicates, missing, forbidden, unrequired = [], [], [], []
    for (op, ident), want in required.items():
        got = by_key[(op, ident)].count if (op, ident) in by_key else 0
        if got < want:
            missing.append(
                {"op": op, "identity": json.loads(ident), "required": want, "count": got}
            )
    for e in effects:
        key = (e.op, e.identity)
        allowed = required.get(key, 1)
        if e.count > allowed and e.effect_class in DUPLICABLE:
            duplicates.append({**e.as_dict(), "required": required.get(key, 0)})
        if key in forbidden_keys:
            forbidden.append(e.as_dict())
        elif key not in required and not any(
            _allows(exp, params, e) for exp in workflow.allowed_effects
        ):
            unrequired.append(e.as_dict())
    return duplicates, missing, forbidden, unrequired


def agents_rows(commit_log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The commit-log rows the agent made: not the concurrent writer's (tagged `actor`)."""
    return [r for r in commit_log if not r.get("actor")]


def evaluate(
    workflow: WorkflowSpec,
    params: dict[str, Any],
    state: dict[str, Any],
    commit_log: list[dict[str, Any]],
    physical_calls: int,
    *,
    reissued_after_commit: int = 0,
    safe_reissues: int = 0,
    fault_fired: bool | None = None,
    finished: bool = False,
    truncated: bool = False,
    finish_status: str | None = None,
) -> Verdict:
    # The concurrent writer's commits are another client's: the state oracle
    # sees their result, the effect oracle never counts them as the agent's.
    commit_log = agents_rows(commit_log)
    kept, compensated = pair_repairs(
        commit_log, effect_keys(commit_log, workflow, params), workflow, params
    )
    effects = semantic_effects([commit_log[i] for i in kept], workflow, params)
    invariants = [check_predicate(p, state["tables"], params) for p in workflow.invariants]
    duplicates, missing, forbidden, unrequired = judge_effects(workflow, params, effects)
    partial = list(state.get("partial", []))
    state_ok = all(r.passed for r in invariants)
    # A repaired effect is still not a clean run: the world saw it before the undo.
    effects_ok = not (duplicates or missing or forbidden or partial or unrequired or compensated)
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
        unrequired=unrequired,
        compensated=compensated,
        reissued_after_commit=reissued_after_commit,
        safe_reissues=safe_reissues,
        fault_fired=fault_fired,
        finished=finished,
        truncated=truncated,
        finish_status=finish_status if finish_status in FINISH_STATUSES else None,
    )


def committed_calls(statuses_by_index: dict[int, int | None], calls: int) -> set[int]:
    """Positions (0-based, among an episode's `calls` calls) whose request reached the
    service and succeeded, as the wire saw it (lost acknowledgements included): the wire
    numbers calls from 1 in the order the env made them (it is the stack's only client
    and calls one at a time), so call k is wire index k + 1."""
    out = set()
    for i in range(calls):
        status = statuses_by_index.get(i + 1)
        if status is not None and 200 <= status < 300:
            out.add(i)
    return out


class IssuedCall(Protocol):
    """What re-issue counting reads of a call (the env's `CallRecord`)."""

    identity: str | None
    key: str | None
    guarded: bool


def reissues_after_commit(calls: Sequence[IssuedCall], committed: set[int]) -> tuple[int, int]:
    """(unsafe, safe): mutating calls re-sent (same semantic identity) after an earlier one
    committed; whatever the agent believed, the service had already done it.

    A re-send is safe when it could not take effect twice: it carried the Idempotency-Key of
    a committed attempt and the service honours keys there, or it carried a precondition
    (expected_head, if_match, ...) and the service refused it. Any other re-send could have
    duplicated (a blind one, a fresh key, a precondition the agent updated and that let it
    through): it is unsafe, whether or not the effect class makes a repeat harmful."""
    keys: dict[str, set[str]] = {}  # identity -> keys of its committed attempts
    unsafe = safe = 0
    for i, call in enumerate(calls):
        ident = call.identity
        if ident is None:
            continue
        if ident in keys:
            replayed = call.key is not None and call.key in keys[ident]
            refused = call.guarded and i not in committed
            if replayed or refused:
                safe += 1
            else:
                unsafe += 1
        if i in committed:
            keys.setdefault(ident, set()).update([call.key] if call.key is not None else [])
    return unsafe, safe
