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
the pairs of one task are not independent, with percentile and BCa intervals (stats.py),
computed only over MIN_CLUSTERS or more workflows (`bootstrap_reason` says why not).
`effective` is the rate's effective N beside its N: clusters, cells, distinct outcomes and
the independent units (cells when the seeds only copy each other: units.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np

from undobench_gym.evaluation.errors import Unsupported
from undobench_gym.evaluation.indicators import (
    AS_FAILURE,
    CONDITIONED,
    CONTROL_CONDITIONED,
    EXCLUSION_REASONS,
    HARM,
    INDICATORS,
    Indicator,
    Pair,
    conditioning_applies,
    control_ok,
    counted_as_failure,
    exclusion,
    fault_outcome,
    indicator,
    is_infra_error,
)
from undobench_gym.evaluation.pass_k import CELL_KEYS, pass_k
from undobench_gym.evaluation.records import PairLike, as_record, as_records
from undobench_gym.evaluation.stats import cluster_bootstrap, ratio, too_few_clusters, wilson
from undobench_gym.evaluation.units import effective_n, shared_cells

#: Public names, including those defined in indicators.py and pass_k.py (kept importable
#: from here: this module was their home).
__all__ = [
    "AS_FAILURE",
    "BOOTSTRAP_RESAMPLES",
    "BOOTSTRAP_SEED",
    "CELL_KEYS",
    "CONDITIONED",
    "CONTROL_CONDITIONED",
    "EXCLUSION_REASONS",
    "HARM",
    "INDICATORS",
    "NOT_APPLIED",
    "SENSITIVITY_METRICS",
    "Indicator",
    "Pair",
    "bootstrap",
    "clusters",
    "conditioning",
    "conditioning_applies",
    "exclusion",
    "fault_outcome",
    "indicator",
    "infra_as_failure",
    "intervals",
    "is_infra_error",
    "metrics",
    "pass_k",
    "rate",
    "record_flag",
    "record_rate",
    "wilson",
]

BOOTSTRAP_RESAMPLES = 4000
BOOTSTRAP_SEED = 20261201


#: (metric, condition) -> id(pair) -> (pair, its flags or the unrecorded field), while a
#: `shared_flags()` block runs. A summary asks for each pair's flags once per group the pair
#: is in (overall, by method, by boundary, ...); indicators are pure functions of the pair,
#: so the first answer serves all. The pair itself is kept in the entry so that its id
#: cannot be reused by another pair while the block runs. One table per metric, so that a
#: group's lookups are a dict get each (a summary makes about 1.8 million).
Flag = tuple[int, int] | str
_MEMO: ContextVar[dict[tuple[str, bool], dict[int, tuple[Pair, Flag]]] | None]
_MEMO = ContextVar("undobench_flag_memo", default=None)
#: Interval results by their inputs (the clustered values, resamples, seed), in the same
#: block: a bootstrap is a pure function of them, and a summary's 1,136 rate intervals
#: over the factorial have 180 distinct inputs (rsr and crsr agree, so do groups).
_BOOT_MEMO: ContextVar[dict[tuple[Any, ...], dict[str, Any]] | None]
_BOOT_MEMO = ContextVar("undobench_bootstrap_memo", default=None)


@contextmanager
def shared_flags() -> Iterator[None]:
    """Compute each pair's indicator flags once inside the block (see `_MEMO`)."""
    token, boot = _MEMO.set({}), _BOOT_MEMO.set({})
    try:
        with shared_cells():
            yield
    finally:
        _MEMO.reset(token)
        _BOOT_MEMO.reset(boot)


def _flag(ind: Indicator, p: Pair) -> tuple[int, int] | str:
    """(numerator, denominator) as 0/1, or the name of the field the pair did not record."""
    try:
        n, d = ind(p)
    except Unsupported as exc:
        return exc.field
    return int(n and d), int(d)


def _flag_table(metric: str, condition: bool) -> dict[int, tuple[Pair, Flag]] | None:
    memo = _MEMO.get()
    return None if memo is None else memo.setdefault((metric, condition), {})


def _memo_flag(
    p: Pair, ind: Indicator, table: dict[int, tuple[Pair, Flag]] | None
) -> tuple[int, int] | str:
    if table is None:
        return _flag(ind, p)
    hit = table.get(id(p))
    if hit is None:
        hit = table[id(p)] = (p, _flag(ind, p))
    return hit[1]


def record_flag(p: Pair, metric: str, condition: bool) -> tuple[int, int]:
    """One pair's (numerator, denominator) as 0/1; raises `Unsupported` when the pair did
    not record what the metric needs."""
    flag = _memo_flag(p, indicator(metric, condition), _flag_table(metric, condition))
    if isinstance(flag, str):
        raise Unsupported(flag)
    return flag


def pair_flag(p: PairLike, metric: str, condition: bool) -> tuple[int, int]:
    """`record_flag` of a record given as a model or a dict."""
    return record_flag(as_record(p), metric, condition)


def _flags(
    pairs: list[Pair], metric: str, condition: bool
) -> tuple[list[tuple[int, int]], dict[str, int]]:
    ind, table = indicator(metric, condition), _flag_table(metric, condition)
    flags: list[tuple[int, int]] = []
    missing: dict[str, int] = {}
    for p in pairs:
        flag = _memo_flag(p, ind, table)
        if isinstance(flag, str):
            missing[flag] = missing.get(flag, 0) + 1
            flags.append((-1, -1))
        else:
            flags.append(flag)
    return flags, missing


def _cluster_values(pairs: list[Pair], flags: list[tuple[int, int]]) -> np.ndarray:
    """(num, den) per task (workflow). Never per pair: the pairs of one task are not
    independent, and below MIN_CLUSTERS tasks no interval is computed at all."""
    rows = np.array(flags, dtype=float).reshape(-1, 2)
    keys = sorted({p.workflow for p in pairs})
    where = {k: i for i, k in enumerate(keys)}
    index = np.array([where[p.workflow] for p in pairs])
    out = np.zeros((len(keys), 2))
    np.add.at(out, index, rows)
    return out


def _clusters(records: list[Pair], flags: list[tuple[int, int]]) -> int:
    return len({p.workflow for p, (_, d) in zip(records, flags, strict=True) if d > 0})


def clusters(pairs: Sequence[PairLike], flags: list[tuple[int, int]]) -> int:
    """Workflows with at least one pair in the denominator."""
    return _clusters(as_records(pairs), flags)


def intervals(
    pairs: Sequence[PairLike],
    metric: str,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    flags: tuple[list[tuple[int, int]], dict[str, int]] | None = None,
    condition: bool | None = None,
) -> dict[str, Any]:
    """bootstrap (percentile), bca, empty_resamples and bootstrap_reason of one rate over
    `pairs`; no interval (and the reason) from fewer than MIN_CLUSTERS workflows."""
    return _intervals(as_records(pairs), metric, resamples, seed, flags, condition)


def _intervals(
    records: list[Pair],
    metric: str,
    resamples: int,
    seed: int,
    flags: tuple[list[tuple[int, int]], dict[str, int]] | None,
    condition: bool | None,
) -> dict[str, Any]:
    none: dict[str, Any] = {
        "bootstrap": None,
        "bca": None,
        "empty_resamples": None,
        "bootstrap_reason": None,
    }
    if flags is None:
        cond = conditioning_applies(records) if condition is None else condition
        flags = _flags(records, metric, cond)
    per_pair, missing = flags
    if not records or missing or not any(d for _, d in per_pair):
        return none
    few = too_few_clusters(_clusters(records, per_pair))
    if few is not None:
        return {**none, "bootstrap_reason": few}
    values = _cluster_values(records, per_pair)
    memo = _BOOT_MEMO.get()
    key = (values.shape, values.tobytes(), resamples, seed)
    if memo is not None and key in memo:
        return _copied(memo[key])
    res = cluster_bootstrap(values, ratio, resamples=resamples, seed=seed)
    out = {
        "bootstrap": res.percentile,
        "bca": res.bca,
        "empty_resamples": res.empty,
        "bootstrap_reason": None,
    }
    if memo is not None:
        memo[key] = out
    return _copied(out)


def _copied(result: dict[str, Any]) -> dict[str, Any]:
    """A memoized result as a new object (its intervals are lists a caller may change)."""
    return {k: list(v) if isinstance(v, list) else v for k, v in result.items()}


def bootstrap(
    pairs: Sequence[PairLike],
    metric: str,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> list[float] | None:
    """The task-clustered percentile interval (kept as a function: tests and users call it);
    None from fewer than MIN_CLUSTERS workflows."""
    result: list[float] | None = intervals(pairs, metric, resamples, seed)["bootstrap"]
    return result


def rate(pairs: Sequence[PairLike], metric: str, condition: bool | None = None) -> dict[str, Any]:
    """One rate object over valid `pairs`; `condition` None decides from the pairs
    (`conditioning_applies`), which is right for one whole run, not for a slice of it."""
    records = as_records(pairs)
    cond = conditioning_applies(records) if condition is None else condition
    return record_rate(records, metric, cond)


def record_rate(records: list[Pair], metric: str, condition: bool) -> dict[str, Any]:
    """`rate` over records that are models already, conditioning decided."""
    flags, missing = computed = _flags(records, metric, condition)
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
        out.update(bootstrap=None, bca=None, empty_resamples=None, bootstrap_reason=None)
        out["effective"] = None
    else:
        out.update(_intervals(records, metric, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, computed, None))
        out["effective"] = effective_n(records, flags)
    out.update(unsupported=unsupported, reason=reason)
    return out


NOT_APPLIED = (
    "not applied: no pair records fault_outcome (imported reference rows, or records "
    "written before it), so the recovery metrics are over all N pairs, as published"
)


def conditioning(
    all_pairs: Sequence[PairLike], applied: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(conditioning, excluded) of `all_pairs`: how many pairs the recovery metrics are
    over and their D/F/C, and how many were left out for each reason."""
    return _conditioning(as_records(all_pairs), applied)


def _conditioning(records: list[Pair], applied: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    valid = [p for p in records if not is_infra_error(p)]
    excluded: dict[str, int | None] = dict.fromkeys(EXCLUSION_REASONS, None if not applied else 0)
    excluded["infra_error"] = len(records) - len(valid)
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
    d = sum(1 for p in kept if control_ok(p))
    f = sum(1 for p in kept if p.fault.success)
    c = sum(1 for p in kept if control_ok(p) and p.fault.success)
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
        "control": sum(1 for p in pairs if p.control.truncated),
        "fault": sum(1 for p in pairs if p.fault.truncated),
    }


def metrics(pairs: Iterable[PairLike], *, condition: bool | None = None) -> dict[str, Any]:
    """M of summary.json over `pairs`. `condition` None decides from the pairs; a summary
    decides once for the whole run and passes it to every group."""
    all_pairs = as_records(pairs)
    valid = [p for p in all_pairs if not is_infra_error(p)]
    applied = conditioning_applies(valid) if condition is None else condition
    d = sum(1 for p in valid if p.control.success)
    f = sum(1 for p in valid if p.fault.success)
    c = sum(1 for p in valid if p.control.success and p.fault.success)
    block, excluded = _conditioning(all_pairs, applied)
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
        out[name] = record_rate(valid, name, applied)
    out["unconditioned"] = {
        name: record_rate(valid, name, False) if applied else out[name] for name in CONDITIONED
    }
    return out


# --- sensitivity: infrastructure errors counted as failures -------------------------------

SENSITIVITY_METRICS = ("control_rate", "rsr", "crsr", "rsr_aware", "crsr_aware", "eor", "eor_cond")


def infra_as_failure(pairs: Iterable[PairLike], *, condition: bool | None = None) -> dict[str, Any]:
    """The success metrics recomputed with every pair lost to an infrastructure error put
    back as a fault failure (in every denominator, conditioned ones included: a worst case
    for recovery). Harm rates (der, uer, mer, abstention) are left out: a failure that
    was never observed says nothing about which effects happened."""
    all_pairs = as_records(pairs)
    applied = conditioning_applies(all_pairs) if condition is None else condition
    counted = [counted_as_failure(p) if is_infra_error(p) else p for p in all_pairs]
    out: dict[str, Any] = {
        "N": len(counted),
        "infra_errors_counted": sum(1 for p in all_pairs if is_infra_error(p)),
    }
    for name in SENSITIVITY_METRICS:
        out[name] = record_rate(counted, name, applied)
    return out
