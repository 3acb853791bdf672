"""summary.json: overall metrics, breakdowns, method contrasts (Holm), TOST and pass^k.

Contrasts are paired, because the methods of one run share tasks, scenarios and seeds:
- `p`: a permutation test that swaps the two methods' labels inside each task (the
  cluster), exact when few tasks differ; tasks where both methods tie contribute nothing,
  so ties at zero cannot inflate (or deflate) the p-value (stats.paired_permutation_p);
- `ci` / `ci_bca`: a task-clustered bootstrap with the same draw for both arms;
- `p_mcnemar`: McNemar on pairs matched by (workflow, scenario, seed) — and model,
  framework and agent, so that imported runs with several models match one to one;
- `p_holm`: Holm-Bonferroni over the `p` of all contrasts.
"""

from __future__ import annotations

import itertools
import math
import warnings
from typing import Any

import numpy as np
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import tost_proportions_2indep

from .errors import Unsupported
from .metrics import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    INDICATORS,
    Pair,
    is_infra_error,
    metrics,
    pass_k,
)
from .stats import cluster_bootstrap, mcnemar, paired_permutation_p, ratio_diff, sig

GROUPS = {
    "method": "method",
    "model": "model",
    "framework": "framework",
    "task": "workflow",
    "boundary": "boundary",
    "domain": "domain",
}
CONTRAST_METRICS = ("rsr", "crsr", "der")
TOST_MARGIN = 0.10
MATCH_KEYS = ("workflow", "scenario", "seed", "model", "framework", "agent")


def _group(pairs: list[Pair], key: str) -> dict[str, list[Pair]]:
    out: dict[str, list[Pair]] = {}
    for p in pairs:
        out.setdefault(str(p.get(key)), []).append(p)
    return dict(sorted(out.items()))


def _flag(p: Pair, metric: str) -> tuple[int, int]:
    n, d = INDICATORS[metric](p)
    return int(n and d), int(d)


def _counts(pairs: list[Pair], metric: str) -> tuple[int, int] | None:
    """(num, den) over pairs, or None when a pair cannot support the metric."""
    num = den = 0
    for p in pairs:
        try:
            n, d = _flag(p, metric)
        except Unsupported:
            return None
        num += n
        den += d
    return num, den


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else sig(x)


def _unit(p: Pair) -> str:
    return "|".join(str(p.get(k)) for k in MATCH_KEYS[1:])


def _cluster_values(a: list[Pair], b: list[Pair], metric: str) -> np.ndarray:
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
        ca, cb = _counts(ga.get(cluster, []), metric), _counts(gb.get(cluster, []), metric)
        assert ca is not None and cb is not None  # checked by the caller
        rows.append([*ca, *cb])
    return np.array(rows, dtype=float)


def _matched(a: list[Pair], b: list[Pair], metric: str) -> tuple[list[bool], list[bool]]:
    """Binary outcomes of pairs matched one to one across the two methods; keys that occur
    more than once in an arm are ambiguous and left out, as are pairs outside a
    conditional metric's denominator in either arm."""

    def index(pairs: list[Pair]) -> dict[tuple[Any, ...], tuple[int, int]]:
        seen: dict[tuple[Any, ...], list[tuple[int, int]]] = {}
        for p in pairs:
            seen.setdefault(tuple(p.get(k) for k in MATCH_KEYS), []).append(_flag(p, metric))
        return {k: v[0] for k, v in seen.items() if len(v) == 1}

    ia, ib = index(a), index(b)
    keys = sorted((k for k in ia.keys() & ib.keys() if ia[k][1] and ib[k][1]), key=repr)
    return [bool(ia[k][0]) for k in keys], [bool(ib[k][0]) for k in keys]


def contrasts(pairs: list[Pair], resamples: int = BOOTSTRAP_RESAMPLES) -> list[dict[str, Any]]:
    by_method = _group(pairs, "method")
    out: list[dict[str, Any]] = []
    for metric in CONTRAST_METRICS:
        for a, b in itertools.combinations(by_method, 2):
            ca, cb = _counts(by_method[a], metric), _counts(by_method[b], metric)
            if ca is None or cb is None or not ca[1] or not cb[1]:
                continue
            values = _cluster_values(by_method[a], by_method[b], metric)
            boot = cluster_bootstrap(values, ratio_diff, resamples=resamples, seed=BOOTSTRAP_SEED)
            perm = paired_permutation_p(
                values, ratio_diff, resamples=resamples, seed=BOOTSTRAP_SEED
            )
            mc = mcnemar(*_matched(by_method[a], by_method[b], metric))
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
                }
            )
    ps = [c["p"] for c in out if c["p"] is not None]
    if ps:
        adjusted = iter(multipletests(ps, method="holm")[1])
        for c in out:
            if c["p"] is not None:
                c["p_holm"] = sig(next(adjusted))
    return out


def tost(pairs: list[Pair], margin: float = TOST_MARGIN) -> dict[str, Any]:
    """Competence should not depend on the recovery method: equivalence of control_rate
    between each method and the first, within ±margin (two one-sided tests, statsmodels)."""
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
        ca, cb = (
            _counts(by_method[other], "control_rate"),
            _counts(by_method[names[0]], "control_rate"),
        )
        assert ca is not None and cb is not None  # control success is always recorded
        (xa, na), (xb, nb) = ca, cb
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = tost_proportions_2indep(xa, na, xb, nb, -margin, margin, method="agresti-caffo")
        p = _finite(res.pvalue)
        result["comparisons"].append(
            {
                "a": other,
                "b": names[0],
                "diff": round(xa / na - xb / nb, 6),
                "p": p,
                "equivalent": p is not None and p < 0.05,
            }
        )
    return result


def summarize(pairs: list[Pair], *, tost_margin: float = TOST_MARGIN) -> dict[str, Any]:
    valid = [p for p in pairs if not is_infra_error(p)]
    return {
        "overall": metrics(pairs),
        "by": {
            name: {k: metrics(v) for k, v in _group(pairs, key).items()}
            for name, key in GROUPS.items()
        },
        "contrasts": contrasts(valid),
        "tost": tost(valid, tost_margin),
        "pass_k": pass_k(valid),
    }
