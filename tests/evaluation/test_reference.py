"""Import of the reference implementation's paired-trial CSVs (small fixtures)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from undobench_gym.contract.errors import UndoBenchError
from undobench_gym.core.trials import read_trials
from undobench_gym.evaluation.metrics import metrics
from undobench_gym.evaluation.reference import import_reference, iter_records
from undobench_gym.evaluation.summary import summarize
from undobench_gym.harness.cli import main

FIXTURES = Path(__file__).parent / "fixtures"
STUDY = FIXTURES / "reference" / "mini_study"
# 2 tasks x 2 methods x 3 trials; see the CSV: D=10, F=7, C=7, 3 runs with duplicates,
# 2 with missing effects.
NULL_METRICS = ("fired_rate", "unknown_outcome_rate")
PUBLISHED = ("control_rate", "rsr", "crsr", "der", "mer")


def test_rows_become_trial_records() -> None:
    records = list(iter_records(STUDY / "raw" / "matrix.csv"))
    assert len(records) == 12
    r = records[1]
    assert r["pair_id"] == "pair_RB-T1_M9_F1_B0_t1_abc1"
    assert (r["workflow"], r["domain"], r["seed"]) == ("RB-T1", "payments", 1)
    # The reference's own codes are kept.
    assert (r["method"], r["model"], r["framework"]) == ("B0", "M9", "F1")
    assert r["scenario"] == "mini_study" and r["boundary"] is None  # not in the study list
    assert r["control"]["success"] is True and r["fault"]["success"] is False
    fx = r["fault"]["effects"]
    assert fx["duplicates"] == 1 and fx["missing"] == 0
    # What the rows cannot support is null, not 0.
    for key in (
        "physical",
        "committed",
        "semantic",
        "forbidden",
        "unrequired",
        "partial",
        "reissued_after_commit",
    ):
        assert fx[key] is None, key
    assert r["fault"]["fault_fired"] is None and r["fault"]["transcript"] is None
    # Not in the rows, and left out rather than null (a null finish status means truncated).
    assert "finish_status" not in r["fault"] and "fault_outcome" not in r["fault"]
    assert r["reference"]["model_id"] == "test/model-9"
    assert r["reference"]["recovery_outcome"] == "UNSAFE_RETRY"


def test_metrics_from_reference_rows() -> None:
    m = metrics(iter_records(STUDY))
    assert (m["N"], m["D"], m["F"], m["C"]) == (12, 10, 7, 7)
    assert (m["der"]["num"], m["der"]["den"]) == (3, 12)
    assert (m["mer"]["num"], m["mer"]["den"]) == (2, 12)
    assert m["crsr"]["value"] == pytest.approx(0.7)
    for name in PUBLISHED:
        assert m[name]["value"] is not None and m[name]["reason"] is None
        # 2 tasks: no bootstrap interval (fewer than 5 clusters), the Wilson one beside it
        assert m[name]["bootstrap"] is None and m[name]["wilson"] is not None
        assert m[name]["bootstrap_reason"] == "fewer than 5 clusters (2)"
    nulls = ("urr", "eor", "eor_cond", "abstention_rate", "uer", "rsr_aware", "crsr_aware")
    for name in (*NULL_METRICS, *nulls):
        r = m[name]
        assert r["value"] is None and r["wilson"] is None and r["bootstrap"] is None, name
        assert r["unsupported"] > 0 and r["reason"].startswith("not recorded"), name
    assert "fault_outcome" in m["fired_rate"]["reason"]
    assert "transcript" in m["unknown_outcome_rate"]["reason"]
    assert "finish_status" in m["rsr_aware"]["reason"]
    assert m["uer"]["reason"] == "not recorded: effects.unrequired (12 pairs)"


def test_conditioning_does_not_apply_to_reference_rows_and_says_so() -> None:
    # The published point estimates are plain counts over all pairs: with no fault_outcome
    # in the rows, the recovery metrics stay those counts and the summary says why.
    records = list(iter_records(STUDY))
    s = summarize(records)
    for m in (s["overall"], *s["by"]["method"].values()):
        assert m["conditioning"]["applied"] is False
        assert m["conditioning"]["reason"].startswith("not applied")
        assert m["conditioning"]["unknown"] == m["N"]
        assert m["excluded"]["not_reached"] is None and m["excluded"]["infra_error"] == 0
        for name in PUBLISHED[1:]:
            assert m["unconditioned"][name] == m[name], name
    assert len(s["notes"]) == 1 and "fault_outcome" in s["notes"][0]
    b2 = s["by"]["method"]["B2"]
    assert (b2["crsr"]["num"], b2["crsr"]["den"]) == (5, 5)  # C and D of the B2 rows


def test_a_directory_is_searched_for_paired_trial_csvs() -> None:
    # final/task_level.csv lacks the paired-trial columns and is skipped; loose.csv has
    # no pair_id column, so its id is derived from the identity columns.
    records = list(iter_records(FIXTURES / "reference"))
    assert len(records) == 13
    loose = [r for r in records if r["scenario"] == "loose"]
    assert len(loose) == 1 and loose[0]["pair_id"].startswith("ref_")
    assert (
        loose[0]["pair_id"] == next(iter_records(FIXTURES / "reference" / "loose.csv"))["pair_id"]
    )


def test_bad_values_are_refused_with_the_line() -> None:
    with pytest.raises(UndoBenchError, match=r"bad_value.csv:2 ctrl_success"):
        list(iter_records(FIXTURES / "reference_bad" / "bad_value.csv"))
    with pytest.raises(UndoBenchError, match="no paired-trial CSV"):
        list(iter_records(STUDY / "final"))


def test_import_is_idempotent(tmp_path: Path) -> None:
    first = import_reference(STUDY, tmp_path)
    assert first == {"rows": 12, "written": 12, "files": 1}
    again = import_reference(STUDY, tmp_path)
    assert again["written"] == 0
    assert len(read_trials(tmp_path / "trials.jsonl")) == 12


def test_cli_import_then_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ref"
    assert main(["import-reference", str(STUDY), "--out", str(out), "--no-plots"]) == 0
    assert "wrote 12 new pairs" in capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    trials = read_trials(out / "trials.jsonl")
    retries = summary.pop("retries")
    assert summary.pop("agent_behaviour")["actions"] == 0  # published records: no transcripts
    assert summary.pop("hints") == []  # no MCP hint ablation in the published study
    assert summary == summarize(trials)
    assert retries["policy"] is None and retries["pairs"] == 12  # imported: no run_meta.json
    assert set(summary["by"]["method"]) == {"B0", "B2"}
    assert set(summary["by"]["model"]) == {"M9"}
    # pass^k over the 3 trials of each (task, model, framework) cell.
    b2 = summary["pass_k"]["by_method"]["B2"]
    assert b2["max_k"] == 3 and b2["tasks"] == 2
    # T1/B2 fault successes 2 of 3, T2/B2 3 of 3: pass^3 = (0 + 1) / 2.
    assert b2["k"]["3"]["fault"] == pytest.approx(0.5)
    assert b2["k"]["1"]["fault"] == pytest.approx((2 / 3 + 1) / 2, abs=1e-6)
    report = (out / "report.md").read_text()
    assert "`fired_rate` (not recorded: fault_outcome (12 pairs))" in report
    assert "Conditioning not applied: no pair records fault_outcome" in report
    assert main(["audit", "fired", str(out)]) == 0  # nothing to judge: all unknown
    assert "unknown=12" in capsys.readouterr().out
