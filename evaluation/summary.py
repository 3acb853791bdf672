"""summary.json: overall metrics, breakdowns, method contrasts (Holm), TOST, pass^k, the
infra-as-failure sensitivity row and the assumptions each interval and test makes.

Contrasts are paired, because the methods of one run share tasks, scenarios and seeds:
- `p`: a permutation test that swaps the two methods' labels inside each task (the
  cluster), exact when few tasks differ; tasks where both methods tie contribute nothing,
  so ties at zero cannot inflate (or deflate) the p-value (stats.paired_permutation_p);
- `ci` / `ci_bca`: a task-clustered bootstrap with the same draw for both arms;
- `p_mcnemar`: McNemar on pairs matched by (workflow, scenario, seed) — and model,
  framework and agent, so that imported runs with several models match one to one;
- `p_holm`: Holm-Bonferroni over the `p` of all contrasts.
Both arms keep only the (workflow, scenario) cells where both methods are applicable
(`method_applicable`; absent = applicable): a method that cannot act on a scenario's
targeted tool behaves as another and would dilute the contrast. `dropped_inapplicable`
counts the pairs left out.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from statsmodels.stats.multitest import multipletests

from .errors import Unsupported
from .indicators import Pair, conditioning_applies, fault_outcome, is_infra_error
from .metrics import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    NOT_APPLIED,
    infra_as_failure,
    metrics,
    pair_flag,
    shared_flags,
)
from .pass_k import pass_k
from .schedules import fault_counts, has_cascades, schedule
from .stats import (
    cluster_bootstrap,
    mcnemar,
    paired_permutation_p,
    paired_tost,
    ratio_diff,
    sig,
)

GroupKey = str | Callable[[Pair], str | None]


def mechanism(p: Pair) -> str:
    """What actually happened to the fault (the env's `fault_outcome.mechanism`), not the
    declared boundary; `not_as_planned` when it did not happen, `not_recorded` without a
    `fault_outcome`."""
    fo = fault_outcome(p)
    if fo is None:
        return "not_recorded"
    return str(fo.get("mechanism") or "not_as_planned")


def coin(p: Pair) -> str | None:
    """Ambiguous scenarios only: whether the hidden coin said the call committed."""
    fo = fault_outcome(p) or {}
    value = fo.get("coin")
    if value is None:
        value = p["fault"].get("hidden_commit_coin")
    if value is None:
        return "unknown" if p.get("ambiguous") else None
    return "committed" if value else "not_committed"


GROUPS: dict[str, GroupKey] = {
    "method": "method",
    "model": "model",
    "framework": "framework",
    "task": "workflow",
    "boundary": "boundary",
    "domain": "domain",
    "mechanism": mechanism,
    "coin": coin,
    "schedule": schedule,
}
#: Groups shown only when they say something: `schedule` when the run has a cascade.
OPTIONAL_GROUPS = {"schedule": has_cascades}
CONTRAST_METRICS = ("rsr", "crsr", "crsr_aware", "der", "uer")
TOST_MARGIN = 0.10
MATCH_KEYS = ("workflow", "scenario", "seed", "model", "framework", "agent")
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
        "resampled (the pairs themselves when there is a single task)"
    ),
    "bca": "as bootstrap; BCa corrections are unstable with few tasks and discrete rates",
    "contrasts.p": (
        "paired by task: the two methods are exchangeable within each task under H0; tasks "
        "independent (matched units when there is a single task)"
    ),
    "contrasts.ci": "the task-clustered bootstrap, one draw of tasks for both methods",
    "contrasts.p_mcnemar": (
        "matched pairs independent (no clustering): did these pairs differ, not will the "
        "difference generalise to other tasks"
    ),
    "tost": (
        "paired over matched pairs (workflow, scenario, seed, model, framework, agent); "
        "task-clustered: cluster-robust SE (never below the independent-pairs SE), t with "
        "tasks - 1 df; when all matched pairs agree, the exact bound (1 - margin)^n, which "
        "assumes pairs independent within a task"
    ),
    "sensitivity.infra_as_failure": (
        "pairs lost to infrastructure errors put back as fault failures (worst case for "
        "recovery), in every denominator"
    ),
}


def _group(pairs: list[Pair], key: GroupKey) -> dict[str, list[Pair]]:
    out: dict[str, list[Pair]] = {}
    for p in pairs:
        k = key(p) if callable(key) else str(p.get(key))
        if k is not None:
            out.setdefault(k, []).append(p)
    return dict(sorted(out.items()))


def _counts(pairs: list[Pair], metric: str, condition: bool) -> tuple[int, int] | None:
    """(num, den) over pairs, or None when a pair cannot support the metric."""
    num = den = 0
    for p in pairs:
        try:
            n, d = pair_flag(p, metric, condition)
        except Unsupported:
            return None
        num += n
        den += d
    return num, den


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else sig(x)


def _unit(p: Pair) -> str:
    return "|".join(str(p.get(k)) for k in MATCH_KEYS[1:])


def _cluster_values(a: list[Pair], b: list[Pair], metric: str, condition: bool) -> np.ndarray:
    """(num_a, den_a, num_b, den_b) per task. With a single task the matched
    (scenario, seed, …) units are the clusters: one cluster would give a zero-width
    interval and a permutation test with nothing to permute."""
    key = "workflow"
    if len({p["workflow"] for p in a} | {p["workflow"] for p in b}) < 2:
        a = [{**p, "_unit": _unit(p)} for p in a]
        b = [{**p, "_unit": _unit(p)} for p in b]
        key = "_unit"
    ga, gb = _group(a, key), _group(b, key)
    rows = []
    for cluster in sorted(set(ga) | set(gb)):
        ca = _counts(ga.get(cluster, []), metric, condition)
        cb = _counts(gb.get(cluster, []), metric, condition)
        assert ca is not None and cb is not None  # checked by the caller
        rows.append([*ca, *cb])
    return np.array(rows, dtype=float)


def _index(pairs: list[Pair], value: Callable[[Pair], Any]) -> dict[tuple[Any, ...], Any]:
    """value(p) by match key; keys that occur more than once are ambiguous and left out."""
    seen: dict[tuple[Any, ...], list[Any]] = {}
    for p in pairs:
        seen.setdefault(tuple(p.get(k) for k in MATCH_KEYS), []).append(value(p))
    return {k: v[0] for k, v in seen.items() if len(v) == 1}


def _matched(
    a: list[Pair], b: list[Pair], metric: str, condition: bool
) -> tuple[list[bool], list[bool]]:
    """Binary outcomes of pairs matched one to one across the two methods; keys that occur
    more than once in an arm are ambiguous and left out, as are pairs outside a
    conditional (or conditioned) metric's denominator in either arm."""
    ia = _index(a, lambda p: pair_flag(p, metric, condition))
    ib = _index(b, lambda p: pair_flag(p, metric, condition))
    keys = sorted((k for k in ia.keys() & ib.keys() if ia[k][1] and ib[k][1]), key=repr)
    return [bool(ia[k][0]) for k in keys], [bool(ib[k][0]) for k in keys]


def applicable(a: list[Pair], b: list[Pair]) -> tuple[list[Pair], list[Pair], dict[str, int]]:
    """Both arms without the (workflow, scenario) cells where either method is not
    applicable (`method_applicable` false; absent = applicable), and how many pairs of
    each arm that dropped."""

    def off(pairs: list[Pair]) -> set[tuple[Any, Any]]:
        return {
            (p.get("workflow"), p.get("scenario"))
            for p in pairs
            if p.get("method_applicable") is False
        }

    cells = off(a) | off(b)
    ka = [p for p in a if (p.get("workflow"), p.get("scenario")) not in cells]
    kb = [p for p in b if (p.get("workflow"), p.get("scenario")) not in cells]
    return ka, kb, {"a": len(a) - len(ka), "b": len(b) - len(kb)}


def contrasts(
    pairs: list[Pair],
    resamples: int = BOOTSTRAP_RESAMPLES,
    *,
    condition: bool | None = None,
    key: GroupKey = "method",
    metrics: tuple[str, ...] = CONTRAST_METRICS,
) -> list[dict[str, Any]]:
    """Every pair of methods (or of the arms `key` names) on `metrics`, over the cells both
    can act on; with `condition` (default: decided from the pairs) over pairs whose fault
    happened as planned."""
    cond = conditioning_applies(pairs) if condition is None else condition
    by_method = _group(pairs, key)
    out: list[dict[str, Any]] = []
    for metric in metrics:
        for a, b in itertools.combinations(by_method, 2):
            arm_a, arm_b, dropped = applicable(by_method[a], by_method[b])
            ca, cb = _counts(arm_a, metric, cond), _counts(arm_b, metric, cond)
            if ca is None or cb is None or not ca[1] or not cb[1]:
                continue
            values = _cluster_values(arm_a, arm_b, metric, cond)
            boot = cluster_bootstrap(values, ratio_diff, resamples=resamples, seed=BOOTSTRAP_SEED)
            perm = paired_permutation_p(
                values, ratio_diff, resamples=resamples, seed=BOOTSTRAP_SEED
            )
            mc = mcnemar(*_matched(arm_a, arm_b, metric, cond))
            out.append(
                {
                    "metric": metric,
                    "a": a,
                    "b": b,
                    "diff": round(ca[0] / ca[1] - cb[0] / cb[1], 6),
                    "ci": boot.percentile,
                    "ci_bca": boot.bca,
                    "clusters": len(values),
                    "p": perm,
                    "p_holm": None,
                    "p_mcnemar": mc.p,
                    "mcnemar": {
                        "matched": mc.matched,
                        "a_only": mc.a_only,
                        "b_only": mc.b_only,
                        "exact": mc.exact,
                    },
                    "dropped_inapplicable": dropped,
                }
            )
    ps = [c["p"] for c in out if c["p"] is not None]
    if ps:
        adjusted = iter(multipletests(ps, method="holm")[1])
        for c in out:
            if c["p"] is not None:
                c["p_holm"] = sig(next(adjusted))
    return out


def _control(p: Pair) -> int:
    return int(bool(p["control"]["success"]))


def tost(pairs: list[Pair], margin: float = TOST_MARGIN) -> dict[str, Any]:
    """Competence should not depend on the recovery method: equivalence of control_rate
    between each method and the first, within ±margin. Paired and task-clustered: the
    differences of control success over pairs matched by MATCH_KEYS, in the cells where
    both methods are applicable, tested with a cluster-robust SE (stats.paired_tost)."""
    if not 0 < margin < 1:
        raise ValueError("the TOST margin is a proportion in (0, 1)")
    by_method = _group(pairs, "method")
    names = list(by_method)
    result: dict[str, Any] = {
        "metric": "control_rate",
        "margin": margin,
        "reference": names[0] if names else None,
        "comparisons": [],
    }
    for other in names[1:]:
        arm_a, arm_b, dropped = applicable(by_method[other], by_method[names[0]])
        ia, ib = _index(arm_a, _control), _index(arm_b, _control)
        keys = sorted(ia.keys() & ib.keys(), key=repr)
        d = np.array([ia[k] - ib[k] for k in keys], dtype=float)
        res = paired_tost(d, [str(k[0]) for k in keys], margin)
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
                "matched": res.matched,
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


def summarize(pairs: list[Pair], *, tost_margin: float = TOST_MARGIN) -> dict[str, Any]:
    """Whether conditioning applies is decided once for the run and used in every group,
    so that a group's figures mean the same as the overall ones."""
    with shared_flags():  # each pair's flags once, not once per group it is in
        return _summarize(pairs, tost_margin)


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
