"""summary.json: overall metrics, breakdowns, method contrasts (Holm), TOST, pass^k, the
infra-as-failure sensitivity row and the assumptions each interval and test makes.

Contrasts are paired, because the methods of one run share tasks, scenarios and seeds:
- `p`: a permutation test that swaps the two methods' labels inside each task (the
  cluster), exact when few tasks differ; tasks where both methods tie contribute nothing,
  so ties at zero cannot inflate (or deflate) the p-value (stats.paired_permutation_p).
  With a single task it swaps inside the independent matched units (`p_unit`): one per
  cell when the seeds only copy each other (units.py), else one per matched pair;
- `ci` / `ci_bca`: a task-clustered bootstrap with the same draw for both arms, from
  MIN_CLUSTERS tasks up (`ci_reason` says why there is none);
- `p_mcnemar`: McNemar on units matched by (workflow, scenario, seed) — and model,
  framework and agent, so that imported runs with several models match one to one —
  collapsed to one per cell when the seeds only copy each other (`mcnemar.unit`);
- `p_holm`: Holm-Bonferroni over the `p` of all contrasts.
Both arms keep only the (workflow, scenario) cells where both methods are applicable
(`method_applicable`; absent = applicable): a method that cannot act on a scenario's
targeted tool behaves as another and would dilute the contrast. `dropped_inapplicable`
counts the pairs left out.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from statsmodels.stats.multitest import multipletests

from undobench_gym.evaluation.errors import Unsupported
from undobench_gym.evaluation.indicators import (
    Pair,
    conditioning_applies,
    fault_outcome,
    is_infra_error,
)
from undobench_gym.evaluation.matching import (
    applicable,
    matched_flags,
    matched_units,
    mcnemar_units,
)
from undobench_gym.evaluation.metrics import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    NOT_APPLIED,
    infra_as_failure,
    metrics,
    record_flag,
    shared_flags,
)
from undobench_gym.evaluation.pass_k import pass_k
from undobench_gym.evaluation.records import PairLike, as_records, field_of
from undobench_gym.evaluation.schedules import fault_counts, has_cascades, schedule
from undobench_gym.evaluation.stats import (
    MIN_CLUSTERS,
    cluster_bootstrap,
    paired_permutation_p,
    paired_tost,
    ratio_diff,
    sig,
    too_few_clusters,
)

#: What pairs are grouped by: a function of the pair (None leaves the pair out), or the name
#: of a record field (its value as text, "None" where it is null).
GroupKey = str | Callable[[Pair], str | None]


def mechanism(p: Pair) -> str:
    """What actually happened to the fault (the env's `fault_outcome.mechanism`), not the
    declared boundary; `not_as_planned` when it did not happen, `not_recorded` without a
    `fault_outcome`."""
    fo = fault_outcome(p)
    if fo is None:
        return "not_recorded"
    return str(fo.mechanism or "not_as_planned")


def coin(p: Pair) -> str | None:
    """Ambiguous scenarios only: whether the hidden coin said the call committed."""
    fo = fault_outcome(p)
    value = fo.coin if fo is not None else None
    if value is None:
        value = p.fault.hidden_commit_coin
    if value is None:
        return "unknown" if p.ambiguous else None
    return "committed" if value else "not_committed"


def _method(p: Pair) -> str:
    return str(p.method)


def _workflow(p: Pair) -> str:
    return str(p.workflow)


GROUPS: dict[str, GroupKey] = {
    "method": _method,
    "model": lambda p: str(p.model),
    "framework": lambda p: str(p.framework),
    "task": _workflow,
    "boundary": lambda p: str(p.boundary),
    "domain": lambda p: str(p.domain),
    "mechanism": mechanism,
    "coin": coin,
    "schedule": schedule,
}
#: Groups shown only when they say something: `schedule` when the run has a cascade.
OPTIONAL_GROUPS = {"schedule": has_cascades}
CONTRAST_METRICS = ("rsr", "crsr", "crsr_aware", "der", "uer")
TOST_MARGIN = 0.10
ASSUMPTIONS = {
    "conditioning": (
        "recovery metrics count only pairs whose fault happened as planned (fault_outcome."
        "as_planned and prefix_equivalent); `unconditioned` has them over all valid pairs"
    ),
    "wilson": (
        "pairs independent (no pairing, no clustering by task): the pure sampling floor, "
        "too narrow when outcomes cluster by task"
    ),
    "bootstrap": (
        "tasks (workflows) independent, pairs within a task not: whole tasks are "
        f"resampled; none from fewer than {MIN_CLUSTERS} tasks (never the pairs instead)"
    ),
    "bca": "as bootstrap; BCa corrections are unstable with few tasks and discrete rates",
    "effective": (
        "the independent units are cells (workflow, scenario, method, model, framework, "
        "agent, coin) when every cell's seeds have the same outcome (a deterministic agent: "
        "seeds copy, not replicate), else pairs"
    ),
    "contrasts.p": (
        "paired by task: the two methods are exchangeable within each task under H0; tasks "
        "independent (with a single task, the independent matched units: p_unit)"
    ),
    "contrasts.ci": (
        f"the task-clustered bootstrap, one draw of tasks for both methods; none from "
        f"fewer than {MIN_CLUSTERS} tasks"
    ),
    "contrasts.p_mcnemar": (
        "matched units independent (no clustering; one unit per cell when seeds copy each "
        "other): did these units differ, not will the difference generalise to other tasks"
    ),
    "tost": (
        "paired over matched units (workflow, scenario, seed, model, framework, agent; one "
        "per cell when seeds copy each other); task-clustered: cluster-robust SE (never "
        "below the independent-units SE), t with tasks - 1 df; when all matched units "
        "agree, the exact bound (1 - margin)^n, which assumes units independent within a task"
    ),
    "sensitivity.infra_as_failure": (
        "pairs lost to infrastructure errors put back as fault failures (worst case for "
        "recovery), in every denominator"
    ),
}


def _key_of(key: GroupKey) -> Callable[[Pair], str | None]:
    """The group key as a function; a field name as its value's text."""
    if callable(key):
        return key
    field = field_of(key)
    return lambda p: str(field(p))


def _group(pairs: list[Pair], key: GroupKey) -> dict[str, list[Pair]]:
    out: dict[str, list[Pair]] = {}
    of = _key_of(key)
    for p in pairs:
        k = of(p)
        if k is not None:
            out.setdefault(k, []).append(p)
    return dict(sorted(out.items()))


def _counts(pairs: list[Pair], metric: str, condition: bool) -> tuple[int, int] | None:
    """(num, den) over pairs, or None when a pair cannot support the metric."""
    num = den = 0
    for p in pairs:
        try:
            n, d = record_flag(p, metric, condition)
        except Unsupported:
            return None
        num += n
        den += d
    return num, den


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else sig(x)


def _cluster_values(
    a: list[Pair], b: list[Pair], metric: str, condition: bool
) -> tuple[np.ndarray, str]:
    """(num_a, den_a, num_b, den_b) per independent unit, and the unit: the task
    (workflow) when there are two or more; with a single task the matched units (a cell
    when the seeds only copy each other, else a matched pair): one cluster would give a
    permutation test with nothing to permute."""
    if len({p.workflow for p in a} | {p.workflow for p in b}) < 2:
        flags, unit, idx = matched_flags(a, b, metric, condition)
        rows = [[*flags[i][0], *flags[i][1]] for i in idx]
        return np.array(rows, dtype=float).reshape(-1, 4), unit
    ga, gb = _group(a, _workflow), _group(b, _workflow)
    rows = []
    for cluster in sorted(set(ga) | set(gb)):
        ca = _counts(ga.get(cluster, []), metric, condition)
        cb = _counts(gb.get(cluster, []), metric, condition)
        assert ca is not None and cb is not None  # checked by the caller
        rows.append([*ca, *cb])
    return np.array(rows, dtype=float), "workflow"


def contrasts(
    pairs: Sequence[PairLike],
    resamples: int = BOOTSTRAP_RESAMPLES,
    *,
    condition: bool | None = None,
    key: GroupKey = "method",
    metrics: tuple[str, ...] = CONTRAST_METRICS,
    only_applicable: bool = True,
) -> list[dict[str, Any]]:
    """Every pair of methods (or of the arms `key` names) on `metrics`, over the cells both
    can act on (over every cell with `only_applicable` false); with `condition` (default:
    decided from the pairs) over pairs whose fault happened as planned."""
    records = as_records(pairs)
    cond = conditioning_applies(records) if condition is None else condition
    by_method = _group(records, key)
    out: list[dict[str, Any]] = []
    for metric in metrics:
        for a, b in itertools.combinations(by_method, 2):
            if only_applicable:
                arm_a, arm_b, dropped = applicable(by_method[a], by_method[b])
            else:
                arm_a, arm_b, dropped = by_method[a], by_method[b], {"a": 0, "b": 0}
            ca, cb = _counts(arm_a, metric, cond), _counts(arm_b, metric, cond)
            if ca is None or cb is None or not ca[1] or not cb[1]:
                continue
            c = {"metric": metric, "a": a, "b": b, "diff": round(ca[0] / ca[1] - cb[0] / cb[1], 6)}
            c.update(_contrast(arm_a, arm_b, metric, cond, resamples))
            c["dropped_inapplicable"] = dropped
            out.append(c)
    ps = [c["p"] for c in out if c["p"] is not None]
    if ps:
        adjusted = iter(multipletests(ps, method="holm")[1])
        for c in out:
            if c["p"] is not None:
                c["p_holm"] = sig(next(adjusted))
    return out


def _contrast(
    a: list[Pair], b: list[Pair], metric: str, condition: bool, resamples: int
) -> dict[str, Any]:
    """One contrast's intervals and tests: the bootstrap from MIN_CLUSTERS tasks up, the
    permutation p over tasks (or single-task units), McNemar on independent units."""
    values, unit = _cluster_values(a, b, metric, condition)
    tasks = len({p.workflow for p in [*a, *b] if record_flag(p, metric, condition)[1]})
    few = too_few_clusters(tasks)
    boot = None
    if few is None:
        boot = cluster_bootstrap(values, ratio_diff, resamples=resamples, seed=BOOTSTRAP_SEED)
    mc = mcnemar_units(a, b, metric, condition)
    return {
        "ci": boot.percentile if boot else None,
        "ci_bca": boot.bca if boot else None,
        "ci_reason": few,
        "clusters": tasks,
        "p": paired_permutation_p(values, ratio_diff, resamples=resamples, seed=BOOTSTRAP_SEED),
        "p_unit": unit,
        "p_units": len(values),
        "p_holm": None,
        "p_mcnemar": mc.pop("p"),
        "mcnemar": mc,
    }


def _control(p: Pair) -> int:
    return int(p.control.success)


def tost(pairs: Sequence[PairLike], margin: float = TOST_MARGIN) -> dict[str, Any]:
    """Competence should not depend on the recovery method: equivalence of control_rate
    between each method and the first, within ±margin. Paired and task-clustered: the
    differences of control success over pairs matched by MATCH_KEYS, in the cells where
    both methods are applicable, tested with a cluster-robust SE (stats.paired_tost)."""
    if not 0 < margin < 1:
        raise ValueError("the TOST margin is a proportion in (0, 1)")
    by_method = _group(as_records(pairs), _method)
    names = list(by_method)
    result: dict[str, Any] = {
        "metric": "control_rate",
        "margin": margin,
        "reference": names[0] if names else None,
        "comparisons": [],
    }
    for other in names[1:]:
        arm_a, arm_b, dropped = applicable(by_method[other], by_method[names[0]])
        keys, values, unit, idx = matched_units(arm_a, arm_b, _control)
        d = np.array([values[i][0] - values[i][1] for i in idx], dtype=float)
        res = paired_tost(d, [str(keys[i][0]) for i in idx], margin)
        result["comparisons"].append(
            {
                "a": other,
                "b": names[0],
                "diff": res.diff,
                "ci90": res.ci90,
                "se": res.se,
                "df": res.df,
                "p": _finite(res.p),
                "equivalent": res.equivalent,
                "test": res.method,
                "matched": len(keys),
                "unit": unit,
                "units": res.matched,
                "clusters": res.clusters,
                "unmatched": len(arm_a) + len(arm_b) - 2 * len(keys),
                "dropped_inapplicable": dropped,
            }
        )
    return result


def _notes(valid: list[Pair], applied: bool, overall: dict[str, Any]) -> list[str]:
    notes: list[str] = []
    if not valid:
        return notes
    if not applied:
        notes.append(f"conditioning {NOT_APPLIED}")
    elif overall["conditioning"]["reason"]:
        notes.append(f"conditioning: {overall['conditioning']['reason']}")
    return notes


def summarize(pairs: Sequence[PairLike], *, tost_margin: float = TOST_MARGIN) -> dict[str, Any]:
    """Whether conditioning applies is decided once for the run and used in every group,
    so that a group's figures mean the same as the overall ones."""
    records = as_records(pairs)
    with shared_flags():  # each pair's flags once, not once per group it is in
        return _summarize(records, tost_margin)


def _summarize(pairs: list[Pair], tost_margin: float) -> dict[str, Any]:
    valid = [p for p in pairs if not is_infra_error(p)]
    applied = conditioning_applies(valid)
    groups = {
        name: _group(pairs, key)
        for name, key in GROUPS.items()
        if name not in OPTIONAL_GROUPS or OPTIONAL_GROUPS[name](pairs)
    }
    overall = metrics(pairs, condition=applied)
    extra = {"faults": fault_counts(valid)} if has_cascades(valid) else {}
    return {
        "overall": overall,
        "by": {
            name: {k: metrics(v, condition=applied) for k, v in g.items()}
            for name, g in groups.items()
        },
        "contrasts": contrasts(valid, condition=applied),
        "tost": tost(valid, tost_margin),
        "pass_k": pass_k(valid),
        "sensitivity": {
            "infra_as_failure": {
                "overall": infra_as_failure(pairs, condition=applied),
                "method": {
                    k: infra_as_failure(v, condition=applied) for k, v in groups["method"].items()
                },
            }
        },
        "assumptions": ASSUMPTIONS,
        "notes": _notes(valid, applied, overall),
        **extra,
    }
