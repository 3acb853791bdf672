"""Interval estimates and paired tests over task clusters.

Library code where it exists: Wilson and McNemar from statsmodels, normal quantiles from
scipy, the cluster-robust standard error from statsmodels' OLS. Three pieces are
hand-written, each for a stated reason:

- the BCa interval (Efron & Tibshirani 1993, ch. 14): `scipy.stats.bootstrap` cannot
  resample clusters of unequal size and cannot drop (and count) resamples whose
  denominator is empty, which a conditional rate such as crsr = C/D needs;
- the paired permutation test, which swaps method labels inside each task: a task where
  both methods scored the same is invariant under the swap, so ties at zero contribute
  nothing to the null distribution instead of inflating the p-value;
- the paired, task-clustered TOST (`paired_tost`): statsmodels' `ttost_paired` treats
  pairs as independent and `tost_proportions_2indep` ignores the pairing; neither takes a
  cluster-robust standard error with cluster degrees of freedom, so the two one-sided t
  tests are written out here (scipy's t distribution) around statsmodels' cluster SE.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm
from scipy.stats import t as student_t
from statsmodels.regression.linear_model import OLS
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar
from statsmodels.stats.proportion import proportion_confint

Statistic = Callable[[np.ndarray], np.ndarray]
"""Maps summed cluster values of shape (..., k) to a statistic of shape (...); NaN where
it is undefined (an empty denominator)."""

ALPHA = 0.05
#: Below this many clusters (workflows) no bootstrap interval is computed: resampling 2 to
#: 4 tasks gives a handful of distinct values, not an interval, and resampling the pairs of
#: one task instead would treat them as independent. The Wilson interval is shown beside.
MIN_CLUSTERS = 5
EXACT_PERMUTATION_MAX = 16  # up to 2**16 sign patterns are enumerated exactly
MCNEMAR_EXACT_BELOW = 25  # discordant pairs; below this the binomial test is used


def _r(x: float) -> float:
    return round(float(x), 6)


def sig(p: float) -> float:
    """A p-value to 6 significant digits (rounding to 6 decimals would turn 1e-9 into 0)."""
    return float(f"{float(p):.6g}")


def too_few_clusters(clusters: int) -> str | None:
    """Why no bootstrap interval is computed over `clusters` clusters, or None."""
    if clusters >= MIN_CLUSTERS:
        return None
    return f"fewer than {MIN_CLUSTERS} clusters ({clusters})"


def wilson(num: int, den: int) -> list[float] | None:
    if den == 0:
        return None
    lo, hi = proportion_confint(num, den, alpha=ALPHA, method="wilson")
    return [_r(lo), _r(hi)]


def ratio(sums: np.ndarray) -> np.ndarray:
    """num/den of (..., 2) sums; NaN where den is 0."""
    num, den = sums[..., 0], sums[..., 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        out: np.ndarray = np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)
    return out


def ratio_diff(sums: np.ndarray) -> np.ndarray:
    """num_a/den_a - num_b/den_b of (..., 4) sums; NaN where either den is 0."""
    out: np.ndarray = ratio(sums[..., 0:2]) - ratio(sums[..., 2:4])
    return out


def resample_sums(values: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """Sums over `resamples` cluster resamples (with replacement) of `values` (n, k).

    A resample matters only through how often each distinct row is drawn, so when rows
    repeat (binary pairs, equal clusters) the counts come from one multinomial over the
    distinct rows: the same distribution as drawing n indices, with far fewer draws.
    """
    rng = np.random.default_rng(seed)
    n = len(values)
    uniq, counts = np.unique(values, axis=0, return_counts=True)
    if len(uniq) * 2 <= n:
        weights = rng.multinomial(n, counts / n, size=resamples)
        out: np.ndarray = weights @ uniq
        return out
    idx = rng.integers(0, n, size=(resamples, n), dtype=np.int32)
    return np.stack([values[:, j][idx].sum(axis=1) for j in range(values.shape[1])], axis=1)


@dataclass(frozen=True)
class BootResult:
    percentile: list[float] | None
    bca: list[float] | None
    empty: int  # resamples whose statistic was undefined: excluded and counted, not scored


def _jackknife(values: np.ndarray, statistic: Statistic) -> tuple[np.ndarray, np.ndarray]:
    """Leave-one-cluster-out statistics over distinct rows, with their multiplicities."""
    uniq, counts = np.unique(values, axis=0, return_counts=True)
    return statistic(values.sum(axis=0) - uniq), counts.astype(float)


def bca_interval(
    theta: float, boot: np.ndarray, jack: np.ndarray, weights: np.ndarray
) -> list[float] | None:
    """Hand-written BCa (see module docstring). The bias correction counts ties with the
    estimate as half below, which matters for the discrete statistics we bootstrap; the
    acceleration comes from the cluster jackknife (undefined leave-one-out values are
    dropped)."""
    if len(boot) == 0 or not np.isfinite(theta):
        return None
    below = np.count_nonzero(boot < theta - 1e-12)
    ties = np.count_nonzero(np.abs(boot - theta) <= 1e-12)
    share = (below + 0.5 * ties) / len(boot)
    if not 0.0 < share < 1.0:
        return None
    z0 = float(norm.ppf(share))
    ok = np.isfinite(jack)
    jack, weights = jack[ok], weights[ok]
    accel = 0.0
    if weights.sum() > 0:
        d = np.average(jack, weights=weights) - jack
        spread = float((weights * d**2).sum())
        if spread > 0:
            accel = float((weights * d**3).sum()) / (6.0 * spread**1.5)
    z = norm.ppf([ALPHA / 2, 1 - ALPHA / 2])
    levels = norm.cdf(z0 + (z0 + z) / (1 - accel * (z0 + z)))
    if not np.all(np.isfinite(levels)):
        return None
    lo, hi = np.quantile(boot, levels)
    return [_r(lo), _r(hi)]


def cluster_bootstrap(
    values: np.ndarray, statistic: Statistic, *, resamples: int, seed: int
) -> BootResult:
    """Percentile and BCa intervals of `statistic` over resampled clusters (rows of values)."""
    if len(values) == 0:
        return BootResult(None, None, 0)
    theta = float(statistic(values.sum(axis=0)))
    stats = statistic(resample_sums(values, resamples, seed))
    ok = np.isfinite(stats)
    boot = stats[ok]
    empty = int(resamples - ok.sum())
    if len(boot) == 0:
        return BootResult(None, None, empty)
    lo, hi = np.percentile(boot, [100 * ALPHA / 2, 100 * (1 - ALPHA / 2)])
    jack, weights = _jackknife(values, statistic)
    return BootResult([_r(lo), _r(hi)], bca_interval(theta, boot, jack, weights), empty)


def paired_permutation_p(
    values: np.ndarray, statistic: Statistic, *, resamples: int, seed: int
) -> float | None:
    """Two-sided p-value of `statistic` (a difference a - b) under H0: within each cluster
    the two arms are exchangeable. `values` is (n, 4): (num_a, den_a, num_b, den_b).

    Swapping the arms of a cluster with identical arms changes nothing, so those clusters
    are left out of the enumeration: all-tied data give p = 1. Exact over all 2**m swap
    patterns for m <= 16 differing clusters, else Monte Carlo with the (1 + hits)/(1 + B)
    correction. An undefined permuted statistic counts as extreme (conservative)."""
    if len(values) == 0:
        return None
    observed = float(statistic(values.sum(axis=0)))
    if not np.isfinite(observed):
        return None
    swapped = values[:, [2, 3, 0, 1]]
    differs = np.any(values != swapped, axis=1)
    m = int(differs.sum())
    if m == 0:
        return 1.0
    base = values[~differs].sum(axis=0)
    a, b = values[differs], swapped[differs]
    exact = m <= EXACT_PERMUTATION_MAX
    if exact:
        codes = np.arange(2**m, dtype=np.int64)[:, None]
        flips = ((codes >> np.arange(m)) & 1).astype(float)
    else:
        flips = np.random.default_rng(seed).integers(0, 2, size=(resamples, m)).astype(float)
    totals = base + (1 - flips) @ a + flips @ b
    stats = statistic(totals)
    hits = np.count_nonzero(~np.isfinite(stats) | (np.abs(stats) >= abs(observed) - 1e-12))
    p = hits / len(flips) if exact else (1 + hits) / (1 + len(flips))
    return sig(min(1.0, p))


@dataclass(frozen=True)
class McNemar:
    p: float | None
    matched: int
    a_only: int
    b_only: int
    exact: bool


def mcnemar(a: list[bool], b: list[bool]) -> McNemar:
    """McNemar's test on matched binary outcomes; the exact binomial version when the
    discordant pairs are few (statsmodels). No discordant pair: p = 1."""
    both = sum(x and y for x, y in zip(a, b, strict=True))
    a_only = sum(x and not y for x, y in zip(a, b, strict=True))
    b_only = sum(y and not x for x, y in zip(a, b, strict=True))
    neither = len(a) - both - a_only - b_only
    exact = a_only + b_only < MCNEMAR_EXACT_BELOW
    if not a:
        return McNemar(None, 0, 0, 0, exact)
    if a_only + b_only == 0:
        return McNemar(1.0, len(a), 0, 0, exact)
    table = [[both, a_only], [b_only, neither]]
    res = sm_mcnemar(table, exact=exact, correction=True)
    return McNemar(sig(min(1.0, float(res.pvalue))), len(a), a_only, b_only, exact)


@dataclass(frozen=True)
class Tost:
    diff: float | None  # mean paired difference (a - b) over matched pairs
    se: float | None
    df: int | None
    p: float | None  # the larger of the two one-sided p-values
    ci90: list[float] | None  # equivalence at level ALPHA <=> ci90 inside the margin
    matched: int
    clusters: int
    method: str

    @property
    def equivalent(self) -> bool:
        return self.p is not None and self.p < ALPHA


def paired_tost(d: np.ndarray, clusters: list[str], margin: float) -> Tost:
    """Equivalence within +-margin of the mean paired difference `d` (one value per
    matched pair, in [-1, 1]), pairs clustered by `clusters` (tasks).

    Standard error: statsmodels' cluster-robust (CR1) SE of the mean, never below the
    independent-pairs SE (with few clusters the robust estimate is noisy and can fall
    under it by chance; a positive within-task correlation cannot make the true SE
    smaller); t with G - 1 degrees of freedom. One cluster: the matched pairs are the
    clusters. When every matched pair agrees (all differences 0) no SE can be estimated;
    then the exact bound is used: |diff| <= P(discordant), so under H0 (|diff| >= margin)
    seeing no discordant pair among n has probability at most (1 - margin)^n, given that
    pairs are independent within a task (tasks may differ)."""
    n = len(d)
    groups = clusters if len(set(clusters)) >= 2 else [str(i) for i in range(n)]
    g = len(set(groups))
    if n < 2:
        return Tost(None, None, None, None, None, n, g, "fewer than 2 matched pairs")
    diff = float(d.mean())
    if np.all(d == d[0]):
        if d[0] != 0:  # every matched pair differs the same way: |diff| = 1
            return Tost(_r(diff), 0.0, None, 1.0, [_r(diff), _r(diff)], n, g, "all pairs differ")
        bound = 1 - ALPHA ** (1 / n)  # one-sided 95% upper bound on the discordance
        p = sig((1 - margin) ** n)
        return Tost(0.0, 0.0, None, p, [_r(-bound), _r(bound)], n, g, "exact: no discordant pair")
    codes = np.unique(np.array(groups), return_inverse=True)[1]
    fit = OLS(d, np.ones((n, 1))).fit(cov_type="cluster", cov_kwds={"groups": codes})
    se = max(float(fit.bse[0]), float(d.std(ddof=1)) / np.sqrt(n))
    df = g - 1
    p_low = float(student_t.sf((diff + margin) / se, df))
    p_high = float(student_t.cdf((diff - margin) / se, df))
    half = float(student_t.ppf(1 - ALPHA, df)) * se
    return Tost(
        _r(diff),
        _r(se),
        df,
        sig(min(1.0, max(p_low, p_high))),
        [_r(diff - half), _r(diff + half)],
        n,
        g,
        "cluster-robust t",
    )
