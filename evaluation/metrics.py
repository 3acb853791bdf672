"""Competence vs recovery metrics over paired trials, with the contract's names.

Each rate is `{"value", "num", "den", "wilson", "bootstrap", "bca", "empty_resamples",
"unsupported", "reason"}`. `value` is null when the denominator is 0, or when a pair lacks
a field the metric needs (imported reference rows: `effects.forbidden: null`, …); then
`reason` says why and `unsupported` counts those pairs: a metric is never guessed.

Intervals: Wilson (statsmodels); a bootstrap that resamples whole tasks (workflows), since
the pairs of one task are not independent, with percentile and BCa intervals (stats.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from .errors import Unsupported
from .outcomes import unobserved_mutations
from .stats import cluster_bootstrap, ratio, wilson

Pair = dict[str, Any]
BOOTSTRAP_RESAMPLES = 4000
BOOTSTRAP_SEED = 20261201


def is_infra_error(p: Pair) -> bool:
    return bool(p["control"].get("error") or p["fault"].get("error"))


def _fx(p: Pair, key: str) -> int | None:
    """A fault-episode effect count; a missing key is 0 (older records), null is unknown."""
    v = p["fault"]["effects"].get(key, 0)
    return None if v is None else int(v)


def _known_bad(p: Pair, keys: tuple[str, ...]) -> bool:
    """True if any count is known positive; Unsupported if none is and one is unknown."""
    values = {k: _fx(p, k) for k in keys}
    if any((v or 0) > 0 for v in values.values()):
        return True
    for k, v in values.items():
        if v is None:
            raise Unsupported(f"effects.{k}")
    return False


def _count(p: Pair, key: str) -> bool:
    return _known_bad(p, (key,))


def _fired(p: Pair) -> bool:
    fired = p["fault"].get("fault_fired")
    if fired is None:
        raise Unsupported("fault_fired")
    return bool(fired)


def _abstained(p: Pair) -> bool:
    return not p["fault"]["success"] and not _known_bad(p, ("duplicates", "forbidden"))


def _unknown_outcome(p: Pair) -> bool:
    return bool(unobserved_mutations(p["fault"], p.get("domain")))


# Per-pair indicators: (numerator flag, denominator flag); Unsupported when they cannot say.
Indicator = Callable[[Pair], tuple[bool, bool]]


def _ctrl(p: Pair) -> bool:
    return bool(p["control"]["success"])


def _eor(p: Pair) -> bool:
    return not _known_bad(p, ("missing", "duplicates", "forbidden"))


INDICATORS: dict[str, Indicator] = {
    "control_rate": lambda p: (_ctrl(p), True),
    "rsr": lambda p: (bool(p["fault"]["success"]), True),
    "crsr": lambda p: (_ctrl(p) and bool(p["fault"]["success"]), _ctrl(p)),
    "der": lambda p: (_count(p, "duplicates"), True),
    "mer": lambda p: (_count(p, "missing"), True),
    "urr": lambda p: (_known_bad(p, ("duplicates", "reissued_after_commit")), True),
    "eor": lambda p: (_eor(p), True),
    "eor_cond": lambda p: (_ctrl(p) and _eor(p), _ctrl(p)),
    "fired_rate": lambda p: (_fired(p), True),
    "abstention_rate": lambda p: (_abstained(p), True),
    "unknown_outcome_rate": lambda p: (_unknown_outcome(p), True),
}
"""unknown_outcome_rate: fault runs that ended while a mutation the agent issued had an
outcome it never observed (a transport error or 5xx, then no definite repeat of that call
and no later successful read-only call; outcomes.py) / N."""


def _flags(pairs: list[Pair], metric: str) -> tuple[list[tuple[int, int]], dict[str, int]]:
    indicator = INDICATORS[metric]
    flags: list[tuple[int, int]] = []
    missing: dict[str, int] = {}
    for p in pairs:
        try:
            n, d = indicator(p)
        except Unsupported as exc:
            missing[exc.field] = missing.get(exc.field, 0) + 1
            flags.append((-1, -1))
            continue
        flags.append((int(n and d), int(d)))
    return flags, missing


def _cluster_values(pairs: list[Pair], flags: list[tuple[int, int]]) -> np.ndarray:
    """(num, den) per task; per pair when there is a single task (a one-cluster bootstrap
    would say nothing)."""
    rows = np.array(flags, dtype=float).reshape(-1, 2)
    tasks = [str(p["workflow"]) for p in pairs]
    keys = sorted(set(tasks))
    if len(keys) < 2:
        return rows
    index = np.array([keys.index(t) for t in tasks])
    out = np.zeros((len(keys), 2))
    np.add.at(out, index, rows)
    return out


def intervals(
    pairs: list[Pair],
    metric: str,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    flags: tuple[list[tuple[int, int]], dict[str, int]] | None = None,
) -> dict[str, Any]:
    """bootstrap (percentile), bca and empty_resamples of one rate over `pairs`."""
    none = {"bootstrap": None, "bca": None, "empty_resamples": None}
    per_pair, missing = flags or _flags(pairs, metric)
    if not pairs or missing or not any(d for _, d in per_pair):
        return none
    values = _cluster_values(pairs, per_pair)
    res = cluster_bootstrap(values, ratio, resamples=resamples, seed=seed)
    return {"bootstrap": res.percentile, "bca": res.bca, "empty_resamples": res.empty}


def bootstrap(
    pairs: list[Pair], metric: str, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> list[float] | None:
    """The task-clustered percentile interval (kept as a function: tests and users call it)."""
    result: list[float] | None = intervals(pairs, metric, resamples, seed)["bootstrap"]
    return result


def rate(pairs: list[Pair], metric: str) -> dict[str, Any]:
    flags, missing = computed = _flags(pairs, metric)
    num = sum(n for n, d in flags if d >= 0)
    den = sum(d for _, d in flags if d >= 0)
    unsupported = sum(missing.values())
    reason = None
    if missing:
        fields = ", ".join(f"{k} ({v} pairs)" for k, v in sorted(missing.items()))
        reason = f"not recorded: {fields}"
    elif den == 0:
        reason = "empty denominator"
    value = None if reason else round(num / den, 6)
    out: dict[str, Any] = {
        "value": value,
        "num": num,
        "den": den,
        "wilson": wilson(num, den) if value is not None else None,
    }
    if value is None:
        out.update(bootstrap=None, bca=None, empty_resamples=None)
    else:
        out.update(intervals(pairs, metric, flags=computed))
    out.update(unsupported=unsupported, reason=reason)
    return out


def metrics(pairs: Iterable[Pair]) -> dict[str, Any]:
    all_pairs = list(pairs)
    valid = [p for p in all_pairs if not is_infra_error(p)]
    d = sum(1 for p in valid if p["control"]["success"])
    f = sum(1 for p in valid if p["fault"]["success"])
    c = sum(1 for p in valid if p["control"]["success"] and p["fault"]["success"])
    out: dict[str, Any] = {
        "N": len(valid),
        "D": d,
        "F": f,
        "C": c,
        "infra_errors": len(all_pairs) - len(valid),
    }
    for name in INDICATORS:
        out[name] = rate(valid, name)
    return out


# --- pass^k over seeds ------------------------------------------------------------------

CELL_KEYS = ("workflow", "scenario", "model", "framework", "agent")


def pass_k(pairs: Iterable[Pair]) -> dict[str, Any]:
    """pass^k per method: the chance that k seeds of one task all succeed, averaged over
    tasks. A task is one (workflow, scenario, model, framework, agent) cell repeated over
    seeds; with c successes in n seeds its pass^k is C(c, k) / C(n, k), the unbiased
    estimator (tau-bench), which for k = n is 1 exactly when every seed succeeded, so the
    average is then the fraction of tasks where all seeds succeed. For each k only cells
    with at least k seeds count; `cells` says how many."""
    cells: dict[str, dict[tuple[Any, ...], list[Pair]]] = {}
    for p in pairs:
        if is_infra_error(p):
            continue
        key = tuple(p.get(k) for k in CELL_KEYS)
        cells.setdefault(str(p.get("method")), {}).setdefault(key, []).append(p)
    by_method: dict[str, Any] = {}
    for method, groups in sorted(cells.items()):
        sizes = [len(g) for g in groups.values()]
        ks: dict[str, Any] = {}
        for k in range(1, max(sizes) + 1):
            chosen = [g for g in groups.values() if len(g) >= k]
            ks[str(k)] = {"cells": len(chosen)}
            for side in ("fault", "control"):
                vals = [
                    math.comb(sum(bool(p[side]["success"]) for p in g), k) / math.comb(len(g), k)
                    for g in chosen
                ]
                ks[str(k)][side] = round(sum(vals) / len(vals), 6)
        by_method[method] = {"tasks": len(groups), "max_k": max(sizes), "k": ks}
    return {"unit": list(CELL_KEYS), "by_method": by_method}
