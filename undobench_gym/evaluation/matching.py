"""Pairs of two arms (methods) matched one to one, and the independent units among them.

Two methods' pairs match when they share (workflow, scenario, seed, model, framework,
agent): the same task, fault and seed under another method. A key that occurs twice in an
arm is ambiguous and left out. Matched pairs are the units of McNemar and the TOST, and
of the permutation test when there is a single task; when every cell's matched pairs agree
(a deterministic agent: the seeds copy each other) one unit per cell is kept (units.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from undobench_gym.evaluation.indicators import Pair
from undobench_gym.evaluation.metrics import record_flag
from undobench_gym.evaluation.records import PairLike, as_records
from undobench_gym.evaluation.stats import mcnemar
from undobench_gym.evaluation.units import cell, collapse

MATCH_KEYS = ("workflow", "scenario", "seed", "model", "framework", "agent")
Flags = tuple[tuple[int, int], tuple[int, int]]


def match_key(p: Pair) -> tuple[str, str, int, str | None, str | None, str]:
    """MATCH_KEYS' values."""
    return (p.workflow, p.scenario, p.seed, p.model, p.framework, p.agent)


def index(pairs: Sequence[PairLike], value: Callable[[Pair], Any]) -> dict[tuple[Any, ...], Any]:
    """value(p) by match key; keys that occur more than once are ambiguous and left out."""
    seen: dict[tuple[Any, ...], list[Any]] = {}
    for p in as_records(pairs):
        seen.setdefault(match_key(p), []).append(value(p))
    return {k: v[0] for k, v in seen.items() if len(v) == 1}


def applicable(
    a: Sequence[PairLike], b: Sequence[PairLike]
) -> tuple[list[Pair], list[Pair], dict[str, int]]:
    """Both arms without the (workflow, scenario) cells where either method is not
    applicable (`method_applicable` false; absent = applicable), and how many pairs of
    each arm that dropped."""
    ra, rb = as_records(a), as_records(b)

    def off(pairs: list[Pair]) -> set[tuple[str, str]]:
        return {(p.workflow, p.scenario) for p in pairs if p.method_applicable is False}

    cells = off(ra) | off(rb)
    ka = [p for p in ra if (p.workflow, p.scenario) not in cells]
    kb = [p for p in rb if (p.workflow, p.scenario) not in cells]
    return ka, kb, {"a": len(ra) - len(ka), "b": len(rb) - len(kb)}


def matched_units(
    a: Sequence[PairLike], b: Sequence[PairLike], value: Callable[[Pair], Any]
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, Any]], str, list[int]]:
    """Matched keys, both arms' value(p) on them, the unit ("cell" when every cell's
    matched values agree, else "pair") and the indices of the independent units."""
    ia = index(a, lambda p: (value(p), cell(p)))
    ib = index(b, lambda p: (value(p), cell(p)))
    keys = sorted(ia.keys() & ib.keys(), key=repr)
    values = [(ia[k][0], ib[k][0]) for k in keys]
    unit, idx = collapse([(ia[k][1], ib[k][1]) for k in keys], values)
    return keys, values, unit, idx


def matched_flags(
    a: Sequence[PairLike], b: Sequence[PairLike], metric: str, condition: bool
) -> tuple[list[Flags], str, list[int]]:
    """Both arms' (num, den) of `metric` on matched pairs, the unit and its indices."""
    _, flags, unit, idx = matched_units(a, b, lambda p: record_flag(p, metric, condition))
    return flags, unit, idx


def _outcomes(flags: list[Flags]) -> tuple[list[bool], list[bool]]:
    """Binary outcomes of the matched items inside both arms' denominators."""
    kept = [(fa, fb) for fa, fb in flags if fa[1] and fb[1]]
    return [bool(fa[0]) for fa, _ in kept], [bool(fb[0]) for _, fb in kept]


def mcnemar_units(
    a: Sequence[PairLike], b: Sequence[PairLike], metric: str, condition: bool
) -> dict[str, Any]:
    """McNemar on the independent matched units (`p`), with the matched pairs' counts
    (`matched`, `a_only`, `b_only`) beside the units' (`units`, `unit_a_only`, ...)."""
    flags, unit, idx = matched_flags(a, b, metric, condition)
    pairs = mcnemar(*_outcomes(flags))
    units = mcnemar(*_outcomes([flags[i] for i in idx]))
    return {
        "p": units.p,
        "matched": pairs.matched,
        "a_only": pairs.a_only,
        "b_only": pairs.b_only,
        "exact": units.exact,
        "unit": unit,
        "units": units.matched,
        "unit_a_only": units.a_only,
        "unit_b_only": units.b_only,
    }
