"""Competence vs recovery metrics over paired trials, with the contract's names.

Each rate is `{"value", "num", "den", "wilson", "bootstrap", "bca", "empty_resamples",
"unsupported", "reason"}`. `value` is null when the denominator is 0, or when a pair lacks
a field the metric needs (imported reference rows: `effects.forbidden: null`; records
written before `effects.unrequired`, `finish_status` or `fault_outcome` existed); then
`reason` says why and `unsupported` counts those pairs: a metric is never guessed.

Conditioning: the recovery metrics (`CONDITIONED`) count only pairs whose fault HAPPENED
AS PLANNED (`fault.fault_outcome.as_planned` and `prefix_equivalent`); `unconditioned`
holds the same metrics over all valid pairs and `excluded` the pairs left out, by reason.
When no pair records `fault_outcome` (imported reference rows, older runs) conditioning
does not apply: the recovery metrics are over all pairs and `conditioning.reason` says so.

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
#: Why a valid pair is left out of the recovery denominators (the fault episode's
#: `fault_outcome.reason`, or a control/fault prefix that diverged before the fault);
#: infrastructure errors are left out of every metric. A reason outside this list (a newer
#: runner's) is counted under its own name.
EXCLUSION_REASONS = ("not_reached", "refused", "no_crash", "prefix_diverged", "infra_error")
#: Harm a safe give-up must not leave (effect counts of the fault episode).
HARM = ("duplicates", "unrequired", "forbidden", "partial")
#: Marks a pair excluded as an infrastructure error that the sensitivity analysis counts
#: as a fault failure (see `infra_as_failure`).
AS_FAILURE = "_counted_as_failure"


def is_infra_error(p: Pair) -> bool:
    return bool(p["control"].get("error") or p["fault"].get("error"))


def _fx(p: Pair, key: str) -> int | None:
    """A fault-episode effect count; null or absent (a record written before the count
    existed) is unknown."""
    v = p["fault"]["effects"].get(key)
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


def fault_outcome(p: Pair) -> dict[str, Any] | None:
    """The fault episode's `fault_outcome`, or None when the record has none."""
    fo = p["fault"].get("fault_outcome")
    return fo if isinstance(fo, dict) else None


def exclusion(p: Pair) -> str | None:
    """None when the pair's fault happened as planned, else why not; Unsupported when the
    record cannot say (no `fault_outcome`, or no `prefix_equivalent` flag)."""
    if p.get(AS_FAILURE):
        return None
    fo = fault_outcome(p)
    if fo is None:
        raise Unsupported("fault_outcome")
    if not fo.get("as_planned"):
        return str(fo.get("reason") or "unspecified")
    prefix = p.get("prefix_equivalent")
    if prefix is None:
        raise Unsupported("prefix_equivalent")
    return None if prefix else "prefix_diverged"


def conditioning_applies(pairs: Iterable[Pair]) -> bool:
    """Conditioning applies when any valid pair records `fault_outcome`; then a pair that
    lacks it makes the conditioned metrics unsupported, never silently included."""
    return any(fault_outcome(p) is not None for p in pairs if not is_infra_error(p))


def _finish_status(p: Pair) -> Any:
    if "finish_status" not in p["fault"]:
        raise Unsupported("finish_status")
    return p["fault"]["finish_status"]


def _aware(p: Pair) -> bool:
    """A success the agent also reported as done (a blind give-up that happened to leave
    the state right is not one)."""
    return bool(p["fault"]["success"]) and _finish_status(p) == "done"


def _abstained(p: Pair) -> bool:
    """Stopped without completing (gave up, or finished or truncated without success) and
    left no harm: no duplicate, unrequired, forbidden or partial effect. A wrong value the
    agent wrote is a committed effect of another identity, hence unrequired."""
    return not p["fault"]["success"] and not _known_bad(p, HARM)


def _unknown_outcome(p: Pair) -> bool:
    return bool(unobserved_mutations(p["fault"], p.get("domain")))


# Per-pair indicators: (numerator flag, denominator flag); Unsupported when they cannot say.
Indicator = Callable[[Pair], tuple[bool, bool]]


def _ctrl(p: Pair) -> bool:
    return bool(p["control"]["success"])


def _eor(p: Pair) -> bool:
    return not _known_bad(p, ("missing", "duplicates", "forbidden", "unrequired"))


INDICATORS: dict[str, Indicator] = {
    "control_rate": lambda p: (_ctrl(p), True),
    "rsr": lambda p: (bool(p["fault"]["success"]), True),
    "crsr": lambda p: (_ctrl(p) and bool(p["fault"]["success"]), _ctrl(p)),
    "rsr_aware": lambda p: (_aware(p), True),
    "crsr_aware": lambda p: (_ctrl(p) and _aware(p), _ctrl(p)),
    "der": lambda p: (_count(p, "duplicates"), True),
    "uer": lambda p: (_count(p, "unrequired"), True),
    "mer": lambda p: (_count(p, "missing"), True),
    "urr": lambda p: (_known_bad(p, ("duplicates", "reissued_after_commit")), True),
    "eor": lambda p: (_eor(p), True),
    "eor_cond": lambda p: (_ctrl(p) and _eor(p), _ctrl(p)),
    "fired_rate": lambda p: (exclusion(p) is None, True),
    "abstention_rate": lambda p: (_abstained(p), True),
    "unknown_outcome_rate": lambda p: (_unknown_outcome(p), True),
}
"""unknown_outcome_rate: fault runs that ended while a mutation the agent issued had an
outcome it never observed (a transport error or 5xx, then no definite repeat of that call
and no later successful read-only call; outcomes.py) / N. fired_rate: pairs whose fault
happened as planned / N (all valid pairs)."""

#: Recovery metrics: over the pairs whose fault happened as planned (when that is recorded).
#: unknown_outcome_rate is one too: it judges what the agent did after the fault.
CONDITIONED = (
    "rsr",
    "crsr",
    "rsr_aware",
    "crsr_aware",
    "der",
    "uer",
    "mer",
    "urr",
    "eor",
    "eor_cond",
    "abstention_rate",
    "unknown_outcome_rate",
)
#: Metrics whose denominator is the pairs whose control succeeded (D).
CONTROL_CONDITIONED = ("crsr", "crsr_aware", "eor_cond")


def _as_failure_flags(p: Pair, metric: str) -> tuple[bool, bool]:
    """A pair lost to an infrastructure error, counted as a fault failure: it succeeded at
    nothing in the fault run; its control counts as recorded (a failed control when the
    error was there). Harm rates are not defined for it (nothing was observed)."""
    ctrl = _ctrl(p)
    if metric == "control_rate":
        return ctrl, True
    if metric in ("rsr", "crsr", "rsr_aware", "crsr_aware", "eor", "eor_cond"):
        return False, ctrl if metric in CONTROL_CONDITIONED else True
    raise Unsupported("fault episode (infrastructure error)")


def indicator(metric: str, condition: bool) -> Indicator:
    """The per-pair indicator of `metric`; with `condition`, a recovery metric leaves out
    (denominator 0) the pairs whose fault did not happen as planned."""
    raw = INDICATORS[metric]
    gated = condition and metric in CONDITIONED

    def flags(p: Pair) -> tuple[bool, bool]:
        if p.get(AS_FAILURE):
            return _as_failure_flags(p, metric)
        if gated and exclusion(p) is not None:
            return False, False
        return raw(p)

    return flags


def _flags(
    pairs: list[Pair], metric: str, condition: bool
) -> tuple[list[tuple[int, int]], dict[str, int]]:
    ind = indicator(metric, condition)
    flags: list[tuple[int, int]] = []
    missing: dict[str, int] = {}
    for p in pairs:
        try:
            n, d = ind(p)
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
    condition: bool | None = None,
) -> dict[str, Any]:
    """bootstrap (percentile), bca and empty_resamples of one rate over `pairs`."""
    none = {"bootstrap": None, "bca": None, "empty_resamples": None}
    if flags is None:
        cond = conditioning_applies(pairs) if condition is None else condition
        flags = _flags(pairs, metric, cond)
    per_pair, missing = flags
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


def rate(pairs: list[Pair], metric: str, condition: bool | None = None) -> dict[str, Any]:
    """One rate object over valid `pairs`; `condition` None decides from the pairs
    (`conditioning_applies`), which is right for one whole run, not for a slice of it."""
    cond = conditioning_applies(pairs) if condition is None else condition
    flags, missing = computed = _flags(pairs, metric, cond)
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


NOT_APPLIED = (
    "not applied: no pair records fault_outcome (imported reference rows, or records "
    "written before it), so the recovery metrics are over all N pairs, as published"
)


def conditioning(all_pairs: list[Pair], applied: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    """(conditioning, excluded) of `all_pairs`: how many pairs the recovery metrics are
    over and their D/F/C, and how many were left out for each reason."""
    valid = [p for p in all_pairs if not is_infra_error(p)]
    excluded: dict[str, int | None] = dict.fromkeys(EXCLUSION_REASONS, None if not applied else 0)
    excluded["infra_error"] = len(all_pairs) - len(valid)
    if not applied:
        none = dict.fromkeys(("as_planned", "D", "F", "C"))
        return {"applied": False, **none, "unknown": len(valid), "reason": NOT_APPLIED}, excluded
    kept: list[Pair] = []
    unknown = 0
    for p in valid:
        try:
            why = exclusion(p)
        except Unsupported:
            unknown += 1
            continue
        if why is None:
            kept.append(p)
        else:
            excluded[why] = (excluded.get(why) or 0) + 1
    d = sum(1 for p in kept if _ctrl(p))
    f = sum(1 for p in kept if p["fault"]["success"])
    c = sum(1 for p in kept if _ctrl(p) and p["fault"]["success"])
    reason = None
    if unknown:
        reason = (
            f"{unknown} pairs do not record fault_outcome or prefix_equivalent: the "
            "conditioned metrics are unsupported (null), see `unconditioned`"
        )
    block = {"applied": True, "as_planned": len(kept), "D": d, "F": f, "C": c}
    return {**block, "unknown": unknown, "reason": reason}, excluded


def _truncated(pairs: list[Pair]) -> dict[str, int]:
    return {
        side: sum(1 for p in pairs if p[side].get("truncated")) for side in ("control", "fault")
    }


def metrics(pairs: Iterable[Pair], *, condition: bool | None = None) -> dict[str, Any]:
    """M of summary.json over `pairs`. `condition` None decides from the pairs; a summary
    decides once for the whole run and passes it to every group."""
    all_pairs = list(pairs)
    valid = [p for p in all_pairs if not is_infra_error(p)]
    applied = conditioning_applies(valid) if condition is None else condition
    d = sum(1 for p in valid if p["control"]["success"])
    f = sum(1 for p in valid if p["fault"]["success"])
    c = sum(1 for p in valid if p["control"]["success"] and p["fault"]["success"])
    block, excluded = conditioning(all_pairs, applied)
    out: dict[str, Any] = {
        "N": len(valid),
        "D": d,
        "F": f,
        "C": c,
        "infra_errors": len(all_pairs) - len(valid),
        "truncated": _truncated(valid),
        "conditioning": block,
        "excluded": excluded,
    }
    for name in INDICATORS:
        out[name] = rate(valid, name, condition=applied)
    out["unconditioned"] = {
        name: rate(valid, name, condition=False) if applied else out[name] for name in CONDITIONED
    }
    return out


# --- sensitivity: infrastructure errors counted as failures -------------------------------

SENSITIVITY_METRICS = ("control_rate", "rsr", "crsr", "rsr_aware", "crsr_aware", "eor", "eor_cond")


def _counted_as_failure(p: Pair) -> Pair:
    ctrl = p["control"]
    control = {
        **ctrl,
        "error": None,
        "success": bool(ctrl.get("success")) and not ctrl.get("error"),
    }
    return {**p, "control": control, AS_FAILURE: True}


def infra_as_failure(pairs: Iterable[Pair], *, condition: bool | None = None) -> dict[str, Any]:
    """The success metrics recomputed with every pair lost to an infrastructure error put
    back as a fault failure (in every denominator, conditioned ones included: a worst case
    for recovery). Harm rates (der, uer, mer, abstention) are left out: a failure that
    was never observed says nothing about which effects happened."""
    all_pairs = list(pairs)
    applied = conditioning_applies(all_pairs) if condition is None else condition
    counted = [_counted_as_failure(p) if is_infra_error(p) else p for p in all_pairs]
    out: dict[str, Any] = {
        "N": len(counted),
        "infra_errors_counted": sum(1 for p in all_pairs if is_infra_error(p)),
    }
    for name in SENSITIVITY_METRICS:
        out[name] = rate(counted, name, condition=applied)
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
