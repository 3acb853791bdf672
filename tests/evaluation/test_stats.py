"""The statistics in `undobench_gym.evaluation.stats`, checked against scipy/statsmodels or
exact values."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as ss
from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

from undobench_gym.evaluation.stats import (
    cluster_bootstrap,
    mcnemar,
    paired_permutation_p,
    ratio,
    ratio_diff,
    resample_sums,
)


def _clusters(n: int, rate: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    den = rng.integers(3, 30, n).astype(float)
    num = np.array([rng.binomial(int(d), rate) for d in den], dtype=float)
    return np.stack([num, den], axis=1)


def _scipy(values: np.ndarray, method: str) -> tuple[float, float]:
    res = ss.bootstrap(
        (values[:, 0], values[:, 1]),
        lambda n, d, axis=-1: n.sum(axis) / d.sum(axis),
        paired=True,
        vectorized=True,
        method=method,
        n_resamples=40_000,
        rng=np.random.default_rng(7),
    )
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


@pytest.mark.parametrize(("rate", "seed"), [(0.55, 1), (0.08, 2)])
def test_percentile_and_bca_agree_with_scipy(rate: float, seed: int) -> None:
    # Continuous enough that ties with the estimate are rare, so our tie-aware bias
    # correction and scipy's should agree; the rare-event case is skewed, where BCa and
    # percentile differ and the check is meaningful.
    values = _clusters(25, rate, seed)
    ours = cluster_bootstrap(values, ratio, resamples=40_000, seed=3)
    assert ours.empty == 0
    assert ours.percentile == pytest.approx(_scipy(values, "percentile"), abs=0.006)
    assert ours.bca == pytest.approx(_scipy(values, "BCa"), abs=0.006)


def test_bootstrap_is_seeded() -> None:
    values = _clusters(12, 0.4, 5)
    a = cluster_bootstrap(values, ratio, resamples=2000, seed=11)
    assert a == cluster_bootstrap(values, ratio, resamples=2000, seed=11)
    assert a != cluster_bootstrap(values, ratio, resamples=2000, seed=12)


def test_multinomial_resampling_matches_index_resampling_in_distribution() -> None:
    # Binary pairs: the multinomial over distinct rows; must match drawing indices.
    rng = np.random.default_rng(0)
    pairs = np.stack([rng.random(400) < 0.3, np.ones(400, bool)], axis=1).astype(float)
    sums = resample_sums(pairs, 20_000, seed=1)
    idx = np.random.default_rng(2).integers(0, 400, size=(20_000, 400))
    direct = pairs[idx].sum(axis=1)
    assert sums[:, 1] == pytest.approx(np.full(20_000, 400.0))
    assert sums[:, 0].mean() == pytest.approx(direct[:, 0].mean(), rel=0.01)
    assert sums[:, 0].std() == pytest.approx(direct[:, 0].std(), rel=0.03)


def test_empty_denominators_are_counted_not_scored() -> None:
    # crsr = C/D where only one of three tasks has any control success: a resample
    # without that task has D = 0. Such resamples are excluded and counted; scoring them
    # as 0 would drag the interval down to 0 although every defined value is 1.
    values = np.array([[4.0, 4.0], [0.0, 0.0], [0.0, 0.0]])
    res = cluster_bootstrap(values, ratio, resamples=10_000, seed=1)
    assert res.empty == pytest.approx(10_000 * (2 / 3) ** 3, rel=0.05)
    assert res.percentile == [1.0, 1.0]
    assert res.bca == [1.0, 1.0]


def test_all_empty_gives_no_interval() -> None:
    res = cluster_bootstrap(np.zeros((3, 2)), ratio, resamples=100, seed=1)
    assert res.percentile is None and res.bca is None and res.empty == 100


def test_permutation_ties_at_zero_give_p_one() -> None:
    # Both methods score the same in every task: nothing to permute.
    values = np.array([[3.0, 5, 3, 5], [0, 5, 0, 5], [5, 5, 5, 5]])
    assert paired_permutation_p(values, ratio_diff, resamples=1000, seed=1) == 1.0


def test_permutation_ignores_tied_tasks() -> None:
    # Three tasks differ, all in one direction (+1 of 5 each); ten tie at 0. The exact
    # sign-flip p over the differing tasks is 2 / 2**3 whatever the number of ties: ties
    # neither inflate nor deflate it.
    differing = [[3.0, 5, 2, 5]] * 3
    for ties in (0, 10):
        values = np.array(differing + [[0.0, 5, 0, 5]] * ties)
        p = paired_permutation_p(values, ratio_diff, resamples=1000, seed=1)
        assert p == pytest.approx(2 / 8)


def test_permutation_exact_matches_sign_flip_enumeration() -> None:
    # Equal denominators: swapping arms is flipping the sign of the per-task difference.
    rng = np.random.default_rng(4)
    a, b = rng.integers(0, 6, 9).astype(float), rng.integers(0, 6, 9).astype(float)
    values = np.stack([a, np.full(9, 5.0), b, np.full(9, 5.0)], axis=1)
    d = a - b
    obs = abs(d.sum())
    signs = np.array([[1 if (c >> i) & 1 else -1 for i in range(9)] for c in range(2**9)])
    expected = np.mean(np.abs(signs @ d) >= obs - 1e-9)
    p = paired_permutation_p(values, ratio_diff, resamples=1000, seed=1)
    assert p == pytest.approx(expected, abs=1e-6)


def test_permutation_monte_carlo_for_many_tasks() -> None:
    values = np.array([[4.0, 5, 1, 5]] * 30)  # 30 differing tasks: Monte Carlo
    p = paired_permutation_p(values, ratio_diff, resamples=5000, seed=1)
    assert p == pytest.approx(1 / 5001)  # the identity is never beaten; (1 + 0) / (1 + B)


def test_mcnemar_exact_and_asymptotic_match_statsmodels() -> None:
    a = [True] * 10 + [False] * 3 + [True] * 5 + [False] * 2
    b = [False] * 10 + [True] * 3 + [True] * 5 + [False] * 2
    res = mcnemar(a, b)
    assert (res.a_only, res.b_only, res.matched, res.exact) == (10, 3, 20, True)
    assert res.p == pytest.approx(sm_mcnemar([[5, 10], [3, 2]], exact=True).pvalue, abs=1e-6)
    big_a, big_b = [True] * 30 + [False] * 10, [False] * 30 + [True] * 10
    res = mcnemar(big_a, big_b)
    assert not res.exact
    expected = sm_mcnemar([[0, 30], [10, 0]], exact=False, correction=True).pvalue
    assert res.p == pytest.approx(expected, rel=1e-5)
    assert mcnemar([True, False], [True, False]).p == 1.0
    assert mcnemar([], []).p is None
