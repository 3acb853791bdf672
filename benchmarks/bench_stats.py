"""Time the task-clustered bootstrap: 10,000 resamples over 3,000 pairs, percentile and BCa.

Run: .venv/bin/python benchmarks/bench_stats.py. Prints the median of several runs for a
few cluster layouts, from the realistic (12 tasks, as in the reference study) to one
cluster per pair, and for the paired contrast of two methods.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np

from undobench_gym.evaluation.stats import (
    cluster_bootstrap,
    paired_permutation_p,
    ratio,
    ratio_diff,
    resample_sums,
)

PAIRS = 3000
RESAMPLES = 10_000
RUNS = 7


def _clusters(n_clusters: int, seed: int = 0) -> np.ndarray:
    """(num, den) per cluster for PAIRS binary pairs spread over n_clusters tasks, with a
    per-task success rate so that clusters differ."""
    rng = np.random.default_rng(seed)
    task = rng.integers(0, n_clusters, PAIRS)
    p = rng.uniform(0.1, 0.9, n_clusters)[task]
    den = rng.random(PAIRS) < 0.8  # a conditional rate: some pairs are outside C/D
    num = (rng.random(PAIRS) < p) & den
    out = np.zeros((n_clusters, 2))
    np.add.at(out, task, np.stack([num, den], axis=1).astype(float))
    return out


def _median(fn: Callable[[], object]) -> float:
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _percentile_only(values: np.ndarray) -> None:
    stats = ratio(resample_sums(values, RESAMPLES, 1))
    np.percentile(stats[np.isfinite(stats)], [2.5, 97.5])


def main() -> None:
    print(f"{RESAMPLES:,} resamples over {PAIRS:,} pairs, median of {RUNS} runs")
    for n_clusters in (12, 300, PAIRS):
        values = _clusters(n_clusters)
        pct = _median(lambda v=values: _percentile_only(v))
        both = _median(lambda v=values: cluster_bootstrap(v, ratio, resamples=RESAMPLES, seed=1))
        res = cluster_bootstrap(values, ratio, resamples=RESAMPLES, seed=1)
        print(
            f"  {n_clusters:>5} clusters: percentile {pct * 1000:7.1f} ms, "
            f"percentile + BCa {both * 1000:7.1f} ms  "
            f"(pct {res.percentile}, bca {res.bca}, empty {res.empty})"
        )
    a, b = _clusters(12, seed=1), _clusters(12, seed=2)
    paired = np.concatenate([a, b], axis=1)
    contrast = _median(lambda: cluster_bootstrap(paired, ratio_diff, resamples=RESAMPLES, seed=1))
    perm = _median(lambda: paired_permutation_p(paired, ratio_diff, resamples=RESAMPLES, seed=1))
    print(
        f"  paired contrast, 12 tasks: bootstrap (pct + BCa) {contrast * 1000:.1f} ms, "
        f"exact permutation p {perm * 1000:.1f} ms"
    )


if __name__ == "__main__":
    main()
