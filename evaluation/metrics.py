"""Competence vs recovery metrics over paired trials, with the contract's names.

Each rate is `{"value", "num", "den", "wilson", "bootstrap"}`; `value` is null when the
denominator is 0. Intervals: Wilson from statsmodels; a percentile bootstrap that
resamples whole tasks (workflows), since pairs of one task are not independent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from statsmodels.stats.proportion import proportion_confint

Pair = dict[str, Any]
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20261201


def _fx(p: Pair) -> dict[str, Any]:
    effects: dict[str, Any] = p["fault"]["effects"]
    return effects


def is_infra_error(p: Pair) -> bool:
    return bool(p["control"].get("error") or p["fault"].get("error"))


# Per-pair indicators: (numerator flag, denominator flag).
Indicator = Callable[[Pair], tuple[bool, bool]]


def _eor(p: Pair) -> bool:
    fx = _fx(p)
    return bool(fx["missing"] == 0 and fx["duplicates"] == 0 and fx["forbidden"] == 0)


INDICATORS: dict[str, Indicator] = {
    "control_rate": lambda p: (bool(p["control"]["success"]), True),
    "rsr": lambda p: (bool(p["fault"]["success"]), True),
    "crsr": lambda p: (
        bool(p["control"]["success"] and p["fault"]["success"]),
        bool(p["control"]["success"]),
    ),
    "der": lambda p: (_fx(p)["duplicates"] > 0, True),
    "mer": lambda p: (_fx(p)["missing"] > 0, True),
    "urr": lambda p: (_fx(p).get("reissued_after_commit", 0) > 0 or _fx(p)["duplicates"] > 0, True),
    "eor": lambda p: (_eor(p), True),
    "eor_cond": lambda p: (
        _eor(p) and bool(p["control"]["success"]),
        bool(p["control"]["success"]),
    ),
    "fired_rate": lambda p: (bool(p["fault"].get("fault_fired")), True),
    "abstention_rate": lambda p: (
        not p["fault"]["success"] and _fx(p)["duplicates"] == 0 and _fx(p)["forbidden"] == 0,
        True,
    ),
}


def wilson(num: int, den: int) -> list[float] | None:
    if den == 0:
        return None
    lo, hi = proportion_confint(num, den, alpha=0.05, method="wilson")
    return [round(float(lo), 6), round(float(hi), 6)]


def _cluster_arrays(pairs: list[Pair], metric: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    indicator = INDICATORS[metric]
    clusters: dict[str, list[int]] = {}
    nums, dens = [], []
    for i, p in enumerate(pairs):
        n, d = indicator(p)
        nums.append(int(n and d))
        dens.append(int(d))
        clusters.setdefault(p["workflow"], []).append(i)
    keys = sorted(clusters)
    num_c = np.array([sum(nums[i] for i in clusters[k]) for k in keys], dtype=float)
    den_c = np.array([sum(dens[i] for i in clusters[k]) for k in keys], dtype=float)
    return num_c, den_c, keys


def bootstrap(
    pairs: list[Pair], metric: str, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> list[float] | None:
    """Task-clustered percentile bootstrap of the ratio; pairs are resampled when there is
    a single task (a one-cluster bootstrap would say nothing)."""
    if not pairs:
        return None
    num_c, den_c, keys = _cluster_arrays(pairs, metric)
    if len(keys) < 2:
        indicator = INDICATORS[metric]
        flags = [indicator(p) for p in pairs]
        num_c = np.array([float(n and d) for n, d in flags])
        den_c = np.array([float(d) for _, d in flags])
    if den_c.sum() == 0:
        return None
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(num_c), size=(resamples, len(num_c)))
    num_s, den_s = num_c[idx].sum(axis=1), den_c[idx].sum(axis=1)
    ok = den_s > 0
    if not ok.any():
        return None
    ratios = num_s[ok] / den_s[ok]
    lo, hi = np.percentile(ratios, [2.5, 97.5])
    return [round(float(lo), 6), round(float(hi), 6)]


def rate(pairs: list[Pair], metric: str) -> dict[str, Any]:
    indicator = INDICATORS[metric]
    num = den = 0
    for p in pairs:
        n, d = indicator(p)
        den += int(d)
        num += int(n and d)
    return {
        "value": round(num / den, 6) if den else None,
        "num": num,
        "den": den,
        "wilson": wilson(num, den),
        "bootstrap": bootstrap(pairs, metric) if den else None,
    }


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
