"""Unit tests for undobench_gym/evaluation/summary.py: breakdowns, contrasts (Holm) and TOST."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import tost_proportions_2indep
from statsmodels.stats.weightstats import ttost_paired

from undobench_gym.evaluation.metrics import infra_as_failure, metrics
from undobench_gym.evaluation.summary import ASSUMPTIONS, contrasts, summarize, tost

from .factories import episode, legacy, method_arm, outcome, trial

CONTRACT_KEYS = {"metric", "a", "b", "diff", "ci", "p", "p_holm"}
CONTRAST_KEYS = CONTRACT_KEYS | {
    "ci_bca",
    "ci_reason",
    "clusters",
    "p_unit",
    "p_units",
    "p_mcnemar",
    "mcnemar",
    "dropped_inapplicable",
}
CONTRAST_METRICS = ("rsr", "crsr", "crsr_aware", "der", "uer")
TOST_KEYS = {
    "a",
    "b",
    "diff",
    "ci90",
    "se",
    "df",
    "p",
    "equivalent",
    "test",
    "matched",
    "unit",
    "units",
    "clusters",
    "unmatched",
    "dropped_inapplicable",
}
MCNEMAR_KEYS = {
    "matched",
    "a_only",
    "b_only",
    "exact",
    "unit",
    "units",
    "unit_a_only",
    "unit_b_only",
}

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
    assert set(s) == {
        "overall",
        "by",
        "contrasts",
        "tost",
        "pass_k",
        "sensitivity",
        "assumptions",
        "notes",
    }
    assert set(s["by"]) == {
        "method",
        "model",
        "framework",
        "task",
        "boundary",
        "domain",
        "mechanism",
        "coin",
    }
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
    for c in s["tost"]["comparisons"]:
        assert set(c) == TOST_KEYS
    assert s["assumptions"] == ASSUMPTIONS and s["notes"] == []
    assert s["by"]["coin"] == {}  # no ambiguous scenario
    assert s["sensitivity"]["infra_as_failure"]["overall"] == infra_as_failure(pairs)


def test_group_totals_add_up() -> None:
    s = summarize(_varied_pairs())
    for name, groups in s["by"].items():
        if name == "coin":  # ambiguous scenarios only
            continue
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
    # 3 method pairs x 5 metrics.
    assert {(c["metric"], c["a"], c["b"]) for c in out} == {
        (m, a, b) for m in CONTRAST_METRICS for a, b in (("B0", "B1"), ("B0", "B2"), ("B1", "B2"))
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


def test_a_single_workflow_gets_no_interval_and_tests_its_matched_units() -> None:
    pairs = method_arm("A", [20], 40) + method_arm("B", [10], 40)
    c = _contrast(contrasts(pairs), "rsr", "A", "B")
    assert c["diff"] == pytest.approx(0.25)
    # One task: no bootstrap interval (it would resample pairs and call them tasks).
    assert c["clusters"] == 1 and c["ci"] is None and c["ci_bca"] is None
    assert c["ci_reason"] == "fewer than 5 clusters (1)"
    # The seeds' outcomes differ within the cell, so they replicate it: the matched pairs
    # are the units. Seeds 10-19 succeed under A only and no seed under B only: 10
    # discordant units, all one way, so the paired tests agree on p = 2 / 2**10.
    assert (c["p_unit"], c["p_units"]) == ("pair", 40)
    assert c["p"] == pytest.approx(2 / 2**10, abs=1e-6)
    assert c["p_mcnemar"] == pytest.approx(2 / 2**10, abs=1e-6)
    assert c["mcnemar"] == {
        "matched": 40,
        "a_only": 10,
        "b_only": 0,
        "exact": True,
        "unit": "pair",
        "units": 40,
        "unit_a_only": 10,
        "unit_b_only": 0,
    }


def test_fewer_than_five_workflows_get_no_contrast_interval() -> None:
    four = method_arm("B0", [1, 1, 1, 1], 5) + method_arm("B2", [5, 5, 5, 5], 5)
    c = _contrast(contrasts(four), "rsr", "B0", "B2")
    assert c["clusters"] == 4 and c["ci"] is None and c["ci_reason"] is not None
    # The permutation test is still over the 4 tasks: all differ one way, 2 / 2**4.
    assert (c["p_unit"], c["p_units"]) == ("workflow", 4)
    assert c["p"] == pytest.approx(2 / 2**4)
    five = method_arm("B0", [1] * 5, 5) + method_arm("B2", [5] * 5, 5)
    c5 = _contrast(contrasts(five), "rsr", "B0", "B2")
    assert c5["clusters"] == 5 and c5["ci"] is not None and c5["ci_reason"] is None


def _scripted(method: str, outcome_of: dict[str, bool], seeds: int = 20) -> list[dict]:
    """A deterministic agent: every seed of a (workflow, scenario) cell ends alike."""
    return [
        trial(
            True,
            outcome_of[f"{w}:{sc}"],
            method=method,
            workflow=w,
            scenario=sc,
            seed=s,
            pair_id=f"{method}-{w}-{sc}-{s}",
        )
        for w, sc in (k.split(":") for k in outcome_of)
        for s in range(seeds)
    ]


def test_mcnemar_on_a_deterministic_agent_counts_cells_not_seeds() -> None:
    # 3 cells; B2 recovers in 2 where B0 does not; 20 seeds copy each cell. Over pairs
    # McNemar would see 40 discordant pairs (p ~ 1e-12); over cells it sees 2 (p = 0.5).
    cells = ["wf0:lost-ack", "wf0:timeout", "wf1:lost-ack"]
    b0 = _scripted("B0", dict.fromkeys(cells, False) | {"wf1:lost-ack": True})
    b2 = _scripted("B2", dict.fromkeys(cells, True))
    c = _contrast(contrasts(b0 + b2), "rsr", "B0", "B2")
    mc = c["mcnemar"]
    assert (mc["matched"], mc["a_only"], mc["b_only"]) == (60, 0, 40)
    assert (mc["unit"], mc["units"], mc["unit_a_only"], mc["unit_b_only"]) == ("cell", 3, 0, 2)
    assert c["p_mcnemar"] == pytest.approx(0.5)  # exact binomial, 2 discordant units
    # Two tasks: the permutation p is over tasks, and there is no interval.
    assert c["p_unit"] == "workflow" and c["ci"] is None
    # One task only: the permutation test runs on its cells, not its 40 pairs.
    one = [p for p in b0 + b2 if p["workflow"] == "wf0"]
    c1 = _contrast(contrasts(one), "rsr", "B0", "B2")
    assert (c1["p_unit"], c1["p_units"]) == ("cell", 2)
    assert c1["p"] == pytest.approx(0.5)  # 2 cells differ: 2 / 2**2


def test_the_coin_of_an_ambiguous_scenario_is_part_of_the_cell() -> None:
    # The seeded coin decides the outcome; given the coin, every seed ends alike.
    pairs = []
    for method, ok_if_committed in (("B0", False), ("B2", True)):
        for s in range(10):
            committed = s % 2 == 0
            pairs.append(
                trial(
                    True,
                    ok_if_committed or not committed,
                    method=method,
                    seed=s,
                    scenario="ambiguous",
                    ambiguous=True,
                    fault_outcome=outcome(coin=committed),
                )
            )
    c = _contrast(contrasts(pairs), "rsr", "B0", "B2")
    assert (c["mcnemar"]["unit"], c["mcnemar"]["units"]) == ("cell", 2)
    assert (c["mcnemar"]["unit_a_only"], c["mcnemar"]["unit_b_only"]) == (0, 1)


def test_tost_on_a_deterministic_agent_uses_one_unit_per_cell() -> None:
    cells = [f"wf{w}:lost-ack" for w in range(6)]
    a = _scripted("B0", dict.fromkeys(cells, True))
    b = _scripted("B5", dict.fromkeys(cells, True))
    (cmp,) = tost(a + b)["comparisons"]
    assert (cmp["matched"], cmp["unit"], cmp["units"]) == (120, "cell", 6)
    # The exact bound over 6 independent units, not 120 copies of them.
    assert cmp["p"] == pytest.approx(0.9**6, rel=1e-5) and cmp["equivalent"] is False


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
    assert set(c["mcnemar"]) == MCNEMAR_KEYS
    mc = {k: c["mcnemar"][k] for k in ("matched", "a_only", "b_only", "exact", "unit", "units")}
    assert mc == {
        "matched": 40,
        "a_only": 0,
        "b_only": 8,
        "exact": True,
        "unit": "pair",  # seeds differ within a cell: they replicate it
        "units": 40,
    }
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
    assert {c["metric"] for c in out} == {"rsr", "crsr", "crsr_aware", "uer"}


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


# --- breakdowns by mechanism and coin; conditioning across groups -----------------------


def test_breakdowns_by_mechanism_and_coin() -> None:
    crash = outcome(boundary="DURING_MUTATION")
    ambiguous: dict[str, Any] = {"boundary": "PRE_MUTATION", "ambiguous": True}
    pairs = [
        trial(True, True, boundary="PRE_MUTATION", fault_outcome=outcome(boundary="PRE_MUTATION")),
        trial(True, True),
        trial(True, False, boundary="DURING_MUTATION", fault_outcome=crash),
        # Declared ambiguous PRE_MUTATION; the coin decides what happened.
        trial(True, True, fault_outcome=outcome(coin=True), **ambiguous),
        trial(True, True, fault_outcome=outcome(coin=False), **ambiguous),
        trial(True, False, fault_outcome=outcome(False, "refused")),
        legacy(trial(True, True)),
    ]
    s = summarize(pairs)
    mech = s["by"]["mechanism"]
    assert {k: m["N"] for k, m in mech.items()} == {
        "crash_mid_mutation": 1,
        "not_as_planned": 1,
        "not_recorded": 1,
        "reply_dropped_after_commit": 2,
        "request_dropped": 2,
    }
    # The declared boundary is kept beside it: 3 pairs declared PRE_MUTATION, one of which
    # ran as a lost acknowledgement.
    assert s["by"]["boundary"]["PRE_MUTATION"]["N"] == 3
    assert {k: m["N"] for k, m in s["by"]["coin"].items()} == {
        "committed": 1,
        "not_committed": 1,
    }
    assert mech["not_as_planned"]["excluded"]["refused"] == 1
    assert mech["not_as_planned"]["rsr"]["reason"] == "empty denominator"
    assert mech["not_as_planned"]["unconditioned"]["rsr"]["value"] == 0.0


def test_conditioning_is_decided_once_for_the_run() -> None:
    # One method's records lack fault_outcome: its recovery metrics are unsupported, not
    # silently unconditioned while the other method's are conditioned.
    new = method_arm("B0", [4, 3], 5)
    old = [legacy(p) for p in method_arm("ref", [4, 3], 5)]
    s = summarize(new + old)
    ref = s["by"]["method"]["ref"]
    assert ref["conditioning"]["applied"] is True and ref["conditioning"]["unknown"] == 10
    assert ref["rsr"]["value"] is None and "fault_outcome" in ref["rsr"]["reason"]
    assert ref["unconditioned"]["rsr"]["value"] == pytest.approx(0.7)
    assert s["by"]["method"]["B0"]["rsr"]["value"] == pytest.approx(0.7)
    assert any("10 pairs do not record fault_outcome" in n for n in s["notes"])
    # Contrasts on conditioned metrics cannot use the unsupported arm.
    assert not [c for c in s["contrasts"] if c["metric"] == "rsr"]
    only_old = summarize(old)
    assert only_old["overall"]["rsr"]["value"] == pytest.approx(0.7)
    assert only_old["notes"] and "not applied" in only_old["notes"][0]


def test_contrasts_use_only_faults_that_happened_as_planned() -> None:
    a = method_arm("B0", [5, 5, 5, 5], 5)
    b = method_arm("B2", [5, 5, 5, 5], 5)
    for p in a[:5]:  # wf0 under B0: the fault never reached its target, and the run failed
        p["fault"] = {**episode(False), "fault_outcome": outcome(False, "not_reached")}
    c = _contrast(contrasts(a + b), "rsr", "B0", "B2")
    assert c["diff"] == pytest.approx(0.0)
    unconditioned = _contrast(contrasts(a + b, condition=False), "rsr", "B0", "B2")
    assert unconditioned["diff"] == pytest.approx(-0.25)


def test_contrasts_drop_cells_where_a_method_is_not_applicable() -> None:
    # B2 has no keyed endpoint on wf3's targeted tool: there it behaves as B0 and would
    # dilute the contrast.
    a = method_arm("B0", [0, 0, 0, 5], 5)
    b = method_arm("B2", [5, 5, 5, 5], 5)
    for p in b[15:]:
        p["method_applicable"] = False
    c = _contrast(contrasts(a + b), "rsr", "B0", "B2")
    assert c["dropped_inapplicable"] == {"a": 5, "b": 5}
    assert c["diff"] == pytest.approx(-1.0)
    assert c["mcnemar"]["matched"] == 15 and c["clusters"] == 3
    keep = [p for p in a + b if p["workflow"] != "wf3"]
    same = _contrast(contrasts(keep), "rsr", "B0", "B2")
    assert {k: v for k, v in same.items() if k != "dropped_inapplicable"} == {
        k: v for k, v in c.items() if k != "dropped_inapplicable"
    }
    everything = [dict(p, method_applicable=True) for p in a + b]
    diluted = _contrast(contrasts(everything), "rsr", "B0", "B2")
    assert diluted["diff"] == pytest.approx(-0.75)
    assert diluted["dropped_inapplicable"] == {"a": 0, "b": 0}


# --- TOST: paired over matched pairs, clustered by task -------------------------------------


def test_tost_is_paired() -> None:
    # Competence varies between tasks (all or nothing) but barely between methods on the
    # same task and seed: one discordant pair in 80. Paired, that is equivalent within
    # ±10 pp; two independent proportions (0.5 vs 0.4875, n = 80) are not.
    ctrl = [10, 0, 10, 0, 10, 0, 10, 0]
    a = method_arm("B0", [5] * 8, 10, control_successes_per_workflow=ctrl)
    b = method_arm("B5", [5] * 8, 10, control_successes_per_workflow=[9, *ctrl[1:]])
    (cmp,) = tost(a + b)["comparisons"]
    assert cmp["diff"] == pytest.approx(-1 / 80)
    assert cmp["matched"] == 80 and cmp["clusters"] == 8 and cmp["unmatched"] == 0
    assert (cmp["unit"], cmp["units"]) == ("pair", 80)
    assert cmp["test"] == "cluster-robust t" and cmp["df"] == 7
    assert cmp["equivalent"] is True and cmp["p"] < 0.001
    lo, hi = cmp["ci90"]
    assert -0.1 < lo < cmp["diff"] < hi < 0.1
    independent = tost_proportions_2indep(39, 80, 40, 80, -0.1, 0.1, method="agresti-caffo")
    assert independent.pvalue > 0.05


def test_tost_is_clustered_by_task() -> None:
    # Half the tasks favour B5 by 30 pp, half B0: the mean difference is 0, but the
    # tasks disagree, so 8 tasks cannot show equivalence within ±10 pp. Independent pairs
    # (400 per method, both 0.6875) would say they do.
    ctrl_a = [20] * 4 + [35] * 4
    ctrl_b = [35] * 4 + [20] * 4
    a = method_arm("B0", [5] * 8, 50, control_successes_per_workflow=ctrl_a)
    b = method_arm("B5", [5] * 8, 50, control_successes_per_workflow=ctrl_b)
    (cmp,) = tost(a + b)["comparisons"]
    assert cmp["diff"] == pytest.approx(0.0)
    assert cmp["equivalent"] is False and cmp["p"] > 0.1
    # Equal cluster sizes: the cluster-robust SE is the SE of the task means, so the test
    # is statsmodels' paired t-TOST on the 8 task-level control rates.
    per_b5 = np.array(ctrl_b) / 50
    per_b0 = np.array(ctrl_a) / 50
    p_tasks = ttost_paired(per_b5, per_b0, -0.1, 0.1)[0]
    assert cmp["p"] == pytest.approx(p_tasks, rel=1e-5)
    independent = tost_proportions_2indep(275, 400, 275, 400, -0.1, 0.1, method="agresti-caffo")
    assert independent.pvalue < 0.05


def test_tost_exact_bound_when_every_matched_pair_agrees() -> None:
    a = method_arm("B0", [5] * 2, 30, control_successes_per_workflow=[20, 10])
    b = method_arm("B5", [5] * 2, 30, control_successes_per_workflow=[20, 10])
    (cmp,) = tost(a + b)["comparisons"]
    assert cmp["test"] == "exact: no discordant pair"
    assert cmp["p"] == pytest.approx(0.9**60, rel=1e-5)
    assert cmp["equivalent"] is True
    bound = 1 - 0.05 ** (1 / 60)
    assert cmp["ci90"] == pytest.approx([-bound, bound], abs=1e-6)


def test_tost_matches_pairs_and_drops_inapplicable_cells() -> None:
    a = method_arm("B0", [5] * 3, 10, control_successes_per_workflow=[8, 6, 9])
    b = method_arm("B2", [5] * 3, 10, control_successes_per_workflow=[8, 7, 9])
    b.append(trial(True, True, method="B2", workflow="wf0", seed=99))  # no partner
    for p in b:
        if p["workflow"] == "wf2":
            p["method_applicable"] = False
    (cmp,) = tost(a + b)["comparisons"]
    assert cmp["dropped_inapplicable"] == {"a": 10, "b": 10}
    assert cmp["matched"] == 20 and cmp["unmatched"] == 1 and cmp["clusters"] == 2
    assert cmp["diff"] == pytest.approx(1 / 20)


def test_tost_needs_two_matched_pairs() -> None:
    a = [trial(True, True, method="B0", seed=0)]
    b = [trial(True, True, method="B5", seed=1)]
    (cmp,) = tost(a + b)["comparisons"]
    assert cmp["matched"] == 0 and cmp["p"] is None and cmp["equivalent"] is False


def test_summary_has_the_infra_as_failure_row() -> None:
    pairs = method_arm("B0", [5, 4], 5) + method_arm("B2", [5, 5], 5)
    pairs.append(trial(True, episode(False, error="stack died"), method="B2", workflow="wf0"))
    sens = summarize(pairs)["sensitivity"]["infra_as_failure"]
    assert sens["overall"]["infra_errors_counted"] == 1
    assert sens["method"]["B0"]["rsr"] == summarize(pairs)["by"]["method"]["B0"]["rsr"]
    assert (sens["method"]["B2"]["rsr"]["num"], sens["method"]["B2"]["rsr"]["den"]) == (10, 11)
