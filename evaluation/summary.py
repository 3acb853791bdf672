"""summary.json: overall metrics, breakdowns, method contrasts (Holm) and TOST on competence."""

from __future__ import annotations

import itertools
import math
import warnings
from typing import Any

import numpy as np
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import test_proportions_2indep, tost_proportions_2indep

from .metrics import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, INDICATORS, Pair, is_infra_error, metrics

GROUPS = {
    "method": "method",
    "model": "model",
    "framework": "framework",
    "task": "workflow",
    "boundary": "boundary",
    "domain": "domain",
}
CONTRAST_METRICS = ("rsr", "der")
TOST_MARGIN = 0.10


def _group(pairs: list[Pair], key: str) -> dict[str, list[Pair]]:
    out: dict[str, list[Pair]] = {}
    for p in pairs:
        out.setdefault(str(p.get(key)), []).append(p)
    return dict(sorted(out.items()))


def _counts(pairs: list[Pair], metric: str) -> tuple[int, int]:
    num = den = 0
    for p in pairs:
        n, d = INDICATORS[metric](p)
        num += int(n and d)
        den += int(d)
    return num, den


def _finite(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), 6)


def _diff_bootstrap(a: list[Pair], b: list[Pair], metric: str) -> list[float] | None:
    """Resample tasks, the same draw for both arms (they share tasks and seeds). With a
    single task, resample the matched (scenario, seed) units instead: a one-cluster
    bootstrap would give a zero-width interval."""
    key = "workflow"
    tasks = sorted({p["workflow"] for p in a} | {p["workflow"] for p in b})
    if len(tasks) < 2:

        def unit(p: Pair) -> str:
            return f"{p.get('scenario')}|{p.get('seed')}"

        a = [{**p, "_unit": unit(p)} for p in a]
        b = [{**p, "_unit": unit(p)} for p in b]
        key = "_unit"
        tasks = sorted({p[key] for p in a} | {p[key] for p in b})

    def per_cluster(pairs: list[Pair]) -> tuple[np.ndarray, np.ndarray]:
        by = _group(pairs, key)
        n = [_counts(by.get(t, []), metric) for t in tasks]
        return np.array([x[0] for x in n], float), np.array([x[1] for x in n], float)

    (na, da), (nb, db) = per_cluster(a), per_cluster(b)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    idx = rng.integers(0, len(tasks), size=(BOOTSTRAP_RESAMPLES, len(tasks)))
    sa, sda, sb, sdb = na[idx].sum(1), da[idx].sum(1), nb[idx].sum(1), db[idx].sum(1)
    ok = (sda > 0) & (sdb > 0)
    if not ok.any():
        return None
    diffs = sa[ok] / sda[ok] - sb[ok] / sdb[ok]
    lo, hi = np.percentile(diffs, [2.5, 97.5])
    return [round(float(lo), 6), round(float(hi), 6)]


def contrasts(pairs: list[Pair]) -> list[dict[str, Any]]:
    by_method = _group(pairs, "method")
    out: list[dict[str, Any]] = []
    for metric in CONTRAST_METRICS:
        for a, b in itertools.combinations(by_method, 2):
            (xa, na), (xb, nb) = _counts(by_method[a], metric), _counts(by_method[b], metric)
            if not na or not nb:
                continue
            diff = xa / na - xb / nb
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                p = (
                    1.0
                    if xa == xb and na == nb
                    else _finite(
                        test_proportions_2indep(xa, na, xb, nb, method="agresti-caffo").pvalue
                    )
                )
            out.append(
                {
                    "metric": metric,
                    "a": a,
                    "b": b,
                    "diff": round(diff, 6),
                    "ci": _diff_bootstrap(by_method[a], by_method[b], metric),
                    "p": p,
                    "p_holm": None,
                }
            )
    ps = [c["p"] for c in out if c["p"] is not None]
    if ps:
        adjusted = iter(multipletests(ps, method="holm")[1])
        for c in out:
            if c["p"] is not None:
                c["p_holm"] = round(float(next(adjusted)), 6)
    return out


def tost(pairs: list[Pair]) -> dict[str, Any]:
    """Competence should not depend on the recovery method: equivalence of control_rate
    between each method and the first, within ±TOST_MARGIN."""
    by_method = _group(pairs, "method")
    names = list(by_method)
    result: dict[str, Any] = {
        "metric": "control_rate",
        "margin": TOST_MARGIN,
        "reference": names[0] if names else None,
        "comparisons": [],
    }
    for other in names[1:]:
        (xa, na), (xb, nb) = (
            _counts(by_method[other], "control_rate"),
            _counts(by_method[names[0]], "control_rate"),
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = tost_proportions_2indep(
                xa, na, xb, nb, -TOST_MARGIN, TOST_MARGIN, method="agresti-caffo"
            )
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


def summarize(pairs: list[Pair]) -> dict[str, Any]:
    valid = [p for p in pairs if not is_infra_error(p)]
    return {
        "overall": metrics(pairs),
        "by": {
            name: {k: metrics(v) for k, v in _group(pairs, key).items()}
            for name, key in GROUPS.items()
        },
        "contrasts": contrasts(valid),
        "tost": tost(valid),
    }
