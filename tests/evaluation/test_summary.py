"""Unit tests for evaluation/summary.py: breakdowns, contrasts (Holm) and TOST."""

from __future__ import annotations

import pytest
from statsmodels.stats.multitest import multipletests
from undobench_gym.evaluation.metrics import metrics
from undobench_gym.evaluation.summary import contrasts, summarize, tost

from .factories import episode, method_arm, trial

CONTRACT_KEYS = {"metric", "a", "b", "diff", "ci", "p", "p_holm"}
CONTRAST_KEYS = CONTRACT_KEYS | {"ci_bca", "clusters", "p_mcnemar", "mcnemar"}

# 8 workflows x 5 seeds = 40 pairs per method.
HIGH = [5, 5, 5, 5, 4, 4, 4, 4]  # 36/40 = 0.9
LOW = [1, 1, 1, 1, 0, 0, 0, 0]  # 4/40 = 0.1


def _contrast(out: list[dict], metric: str, a: str, b: str) -> dict:
    (c,) = [c for c in out if c["metric"] == metric and c["a"] == a and c["b"] == b]
    return c


def _varied_pairs() -> list[dict]:
    pairs = method_arm("B0", HIGH, 5) + method_arm("bare", LOW, 5)
    for i, p in enumerate(pairs):
        p["model"] = "m1" if i % 2 else "m2"
        p["framework"] = "F1" if i % 3 else "F2"
        p["boundary"] = "before_commit" if i % 4 else "after_commit"
        p["domain"] = "payments" if p["workflow"] < "wf4" else "database"
    return pairs


def test_summary_shape() -> None:
    pairs = _varied_pairs()
    s = summarize(pairs)
    assert set(s) == {"overall", "by", "contrasts", "tost", "pass_k"}
    assert set(s["by"]) == {"method", "model", "framework", "task", "boundary", "domain"}
    assert set(s["by"]["method"]) == {"B0", "bare"}
    assert set(s["by"]["model"]) == {"m1", "m2"}
    assert set(s["by"]["framework"]) == {"F1", "F2"}
    assert set(s["by"]["task"]) == {f"wf{i}" for i in range(8)}
    assert set(s["by"]["boundary"]) == {"before_commit", "after_commit"}
    assert set(s["by"]["domain"]) == {"payments", "database"}
    assert s["overall"] == metrics(pairs)
    assert s["by"]["method"]["B0"] == metrics([p for p in pairs if p["method"] == "B0"])
    assert s["by"]["task"]["wf3"]["N"] == 10
    for c in s["contrasts"]:
        assert set(c) == CONTRAST_KEYS


def test_group_totals_add_up() -> None:
    s = summarize(_varied_pairs())
    for name, groups in s["by"].items():
        assert sum(m["N"] for m in groups.values()) == s["overall"]["N"], name
        assert sum(m["F"] for m in groups.values()) == s["overall"]["F"], name


def test_infra_errors_kept_out_of_contrasts_and_breakdowns() -> None:
    pairs = method_arm("B0", HIGH, 5) + method_arm("bare", LOW, 5)
    broken = [
        trial(episode(False, error="stack down"), False, method="B0", workflow="wf0")
        for _ in range(30)
    ]
    s = summarize(pairs + broken)
    clean = summarize(pairs)
    assert s["contrasts"] == clean["contrasts"]
    assert s["tost"] == clean["tost"]
    assert s["overall"]["infra_errors"] == 30
    assert s["by"]["method"]["B0"]["N"] == 40
    assert s["by"]["method"]["B0"]["infra_errors"] == 30


def test_contrast_detects_a_large_difference() -> None:
    # "B0" sorts before "B2", so diff = rsr(B0) - rsr(B2) is negative here.
    pairs = method_arm("B0", LOW, 5) + method_arm("B2", HIGH, 5)
    out = contrasts(pairs)
    c = _contrast(out, "rsr", "B0", "B2")
    assert c["diff"] == pytest.approx(0.1 - 0.9)
    assert c["p"] < 0.01
    assert c["p_holm"] >= c["p"]
    assert c["p_holm"] < 0.05
    lo, hi = c["ci"]
    assert lo <= c["diff"] <= hi
    assert hi < 0  # the interval excludes 0, on the right side


def test_contrast_of_identical_methods() -> None:
    pattern = [3, 2, 4, 1, 5, 2, 3, 0]
    pairs = method_arm("B1", pattern, 5) + method_arm("B3", pattern, 5)
    c = _contrast(contrasts(pairs), "rsr", "B1", "B3")
    assert c["diff"] == pytest.approx(0.0)
    assert c["p"] == pytest.approx(1.0, abs=0.05)
    assert c["p_holm"] == pytest.approx(1.0, abs=0.05)
    lo, hi = c["ci"]
    assert lo <= 0.0 <= hi


def test_contrast_of_similar_methods_is_not_significant() -> None:
    pairs = method_arm("B1", [3, 2, 4, 1, 5, 2, 3, 0], 5) + method_arm(
        "B3", [3, 3, 4, 1, 4, 2, 3, 1], 5
    )
    c = _contrast(contrasts(pairs), "rsr", "B1", "B3")
    assert c["p"] > 0.5
    lo, hi = c["ci"]
    assert lo < 0.0 < hi


def test_holm_adjustment_over_all_contrasts() -> None:
    pairs = (
        method_arm("B0", LOW, 5)
        + method_arm("B1", [3, 2, 3, 2, 3, 2, 3, 2], 5)
        + method_arm("B2", HIGH, 5)
    )
    pairs.append(trial(True, episode(False, duplicates=1), method="B0", workflow="wf0"))
    out = contrasts(pairs)
    # 3 method pairs x 3 metrics (rsr, crsr, der).
    assert {(c["metric"], c["a"], c["b"]) for c in out} == {
        (m, a, b)
        for m in ("rsr", "crsr", "der")
        for a, b in (("B0", "B1"), ("B0", "B2"), ("B1", "B2"))
    }
    ps = [c["p"] for c in out]
    expected = multipletests(ps, method="holm")[1]
    for c, adj in zip(out, expected, strict=True):
        assert set(c) == CONTRAST_KEYS
        assert c["p_holm"] == pytest.approx(adj, abs=1e-6)
        assert c["p_holm"] >= c["p"] - 1e-12
        assert 0.0 <= c["p_holm"] <= 1.0


def test_single_method_has_no_contrasts() -> None:
    s = summarize(method_arm("bare", HIGH, 5))
    assert s["contrasts"] == []
    assert s["tost"]["reference"] == "bare"
    assert s["tost"]["comparisons"] == []


def test_contrast_ci_is_not_degenerate_for_a_single_workflow() -> None:
    pairs = method_arm("A", [20], 40) + method_arm("B", [10], 40)
    c = _contrast(contrasts(pairs), "rsr", "A", "B")
    assert c["diff"] == pytest.approx(0.25)
    # One task: the matched (scenario, seed) units are the clusters. Seeds 10-19 succeed
    # under A only and no seed under B only: 10 discordant units, all one way, so the
    # paired tests agree on p = 2 / 2**10 (exact sign flips; exact McNemar).
    assert c["clusters"] == 40
    assert c["p"] == pytest.approx(2 / 2**10, abs=1e-6)
    assert c["p_mcnemar"] == pytest.approx(2 / 2**10, abs=1e-6)
    assert c["mcnemar"] == {"matched": 40, "a_only": 10, "b_only": 0, "exact": True}
    lo, hi = c["ci"]
    assert hi - lo > 0.1  # a 95% interval over 40 units cannot have zero width
    assert lo <= c["diff"] <= hi


def test_tost_equivalent_for_equal_control_rates() -> None:
    # 400 pairs per method, control rate 0.8 in both.
    ctrl = [40] * 8
    pairs = method_arm("B0", [25] * 8, 50, control_successes_per_workflow=ctrl) + method_arm(
        "B5", [10] * 8, 50, control_successes_per_workflow=ctrl
    )
    t = tost(pairs)
    assert t["metric"] == "control_rate"
    assert t["margin"] == pytest.approx(0.10)
    assert t["reference"] == "B0"
    (cmp,) = t["comparisons"]
    assert cmp["a"] == "B5" and cmp["b"] == "B0"
    assert cmp["diff"] == pytest.approx(0.0)
    assert cmp["p"] < 0.05
    assert cmp["equivalent"] is True


def test_tost_not_equivalent_for_different_control_rates() -> None:
    pairs = method_arm("B0", [5] * 8, 5, control_successes_per_workflow=HIGH) + method_arm(
        "B5", [5] * 8, 5, control_successes_per_workflow=LOW
    )
    (cmp,) = tost(pairs)["comparisons"]
    assert cmp["diff"] == pytest.approx(0.1 - 0.9)
    assert cmp["equivalent"] is False
    assert cmp["p"] is None or cmp["p"] > 0.05


def test_tost_not_equivalent_for_equal_rates_on_tiny_samples() -> None:
    pairs = method_arm("B0", [2], 4, control_successes_per_workflow=[2]) + method_arm(
        "B5", [2], 4, control_successes_per_workflow=[2]
    )
    (cmp,) = tost(pairs)["comparisons"]
    assert cmp["equivalent"] is False


def test_summary_of_nothing() -> None:
    s = summarize([])
    assert s["overall"]["N"] == 0
    assert all(v == {} for v in s["by"].values())
    assert s["contrasts"] == []
    assert s["tost"]["reference"] is None and s["tost"]["comparisons"] == []


# --- paired tests, McNemar and the TOST margin ------------------------------------------


def test_mcnemar_matches_pairs_by_workflow_scenario_seed() -> None:
    # Same tasks and seeds; B2 fixes exactly the seeds B0 fails (4 of 40), breaks none.
    pairs = method_arm("B0", [4, 4, 4, 4, 4, 4, 4, 4], 5) + method_arm("B2", [5] * 8, 5)
    c = _contrast(contrasts(pairs), "rsr", "B0", "B2")
    assert c["mcnemar"] == {"matched": 40, "a_only": 0, "b_only": 8, "exact": True}
    assert c["p_mcnemar"] == pytest.approx(2 / 2**8, abs=1e-6)
    # The cluster-level test: all 8 tasks differ one way, 2 / 2**8 as well.
    assert c["p"] == pytest.approx(2 / 2**8, abs=1e-6)
    assert c["clusters"] == 8


def test_mcnemar_ignores_unmatched_and_ambiguous_pairs() -> None:
    pairs = method_arm("B0", [5, 5], 5) + method_arm("B2", [5, 5], 5)
    pairs.append(trial(True, False, method="B0", workflow="wf0", seed=99))  # no partner
    pairs.append(trial(True, False, method="B2", workflow="wf1", seed=0))  # key twice in B2
    c = _contrast(contrasts(pairs), "rsr", "B0", "B2")
    assert c["mcnemar"]["matched"] == 9


def test_ties_at_zero_do_not_inflate_the_cluster_p() -> None:
    # Eight tasks tie at zero difference, two differ in the same direction: the exact
    # swap test gives 2 / 2**2 = 0.5, and adding more tied tasks leaves it there.
    base = [3, 2, 4, 1, 5, 2, 3, 0]
    a = method_arm("B0", [*base, 0, 0], 5)
    b = method_arm("B1", [*base, 5, 5], 5)
    c = _contrast(contrasts(a + b), "rsr", "B0", "B1")
    assert c["p"] == pytest.approx(0.5)
    a2 = method_arm("B0", [*base, *base, 0, 0], 5)
    b2 = method_arm("B1", [*base, *base, 5, 5], 5)
    assert _contrast(contrasts(a2 + b2), "rsr", "B0", "B1")["p"] == pytest.approx(0.5)


def test_contrast_skips_metrics_the_rows_cannot_support() -> None:
    pairs = method_arm("B0", [3, 2], 5) + method_arm("B2", [5, 4], 5)
    for p in pairs:
        p["fault"]["effects"]["duplicates"] = None
    out = contrasts(pairs)
    assert {c["metric"] for c in out} == {"rsr", "crsr"}


def test_tost_margin_is_a_parameter() -> None:
    ctrl = [40] * 8
    pairs = method_arm("B0", [25] * 8, 50, control_successes_per_workflow=ctrl) + method_arm(
        "B5", [10] * 8, 50, control_successes_per_workflow=[39] * 8
    )
    # control rates 0.80 vs 0.78: equivalent within ±10 pp, not within ±2 pp.
    assert tost(pairs)["comparisons"][0]["equivalent"] is True
    narrow = summarize(pairs, tost_margin=0.02)["tost"]
    assert narrow["margin"] == 0.02
    assert narrow["comparisons"][0]["equivalent"] is False
    with pytest.raises(ValueError):
        tost(pairs, margin=0)
