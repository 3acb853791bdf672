"""Unit tests for the reports (`evaluation.report`) and trial files (`core.trials`), files only."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from undobench_gym.core.trials import TrialWriter, read_trials
from undobench_gym.evaluation.metrics import CONDITIONED, INDICATORS, SENSITIVITY_METRICS
from undobench_gym.evaluation.plots import PLOTS
from undobench_gym.evaluation.report import EXTRA_COLUMNS, LONG_COLUMNS, write_reports
from undobench_gym.evaluation.summary import summarize
from undobench_gym.harness.cli import main

from .factories import episode, legacy, method_arm, outcome, trial

COLUMNS = [
    "N",
    "D",
    "F",
    "C",
    "control_rate",
    "rsr",
    "crsr",
    "rsr_aware",
    "crsr_aware",
    "der",
    "uer",
    "mer",
    "urr",
    "eor",
    "eor_cond",
    "fired_rate",
    "abstention_rate",
    "unknown_outcome_rate",
]
EXCLUDED = ("not_reached", "refused", "no_crash", "prefix_diverged", "infra_error")
#: every metric the package defines, in its order: the contract's COLUMNS and any added since
ALL_COLUMNS = ["N", "D", "F", "C", *INDICATORS]


def _run_pairs() -> list[dict]:
    pairs = method_arm("B0", [5, 4, 3, 5], 5) + method_arm("bare", [1, 0, 2, 0], 5)
    pairs[0]["fault"] = {**episode(False, duplicates=1), "fault_outcome": outcome()}
    pairs[1]["fault"]["fault_outcome"] = outcome(False, "refused")
    pairs[2]["prefix_equivalent"] = False
    pairs.append(trial(episode(False, error="stack down"), False, method="bare", pair_id="x"))
    return pairs


def _write(path: Path, pairs: list[dict]) -> None:
    with TrialWriter(path) as w:
        for p in pairs:
            w.write(p)


def test_write_reports(tmp_path: Path) -> None:
    pairs = _run_pairs()
    _write(tmp_path / "trials.jsonl", pairs)
    returned = write_reports(tmp_path, plots=False)

    summary = json.loads((tmp_path / "summary.json").read_text())
    assert returned == summary
    retries = summary.pop("retries")
    assert retries["pairs"] == len(pairs) and retries["attempts"] >= len(pairs)
    assert summary.pop("agent_behaviour")["pairs"] == len(pairs) - 1
    assert summary.pop("hints") == []  # no hints-off arm in this run
    assert summary == summarize(read_trials(tmp_path / "trials.jsonl"))
    assert summary == summarize(pairs)
    assert summary["overall"]["N"] == len(pairs) - 1
    assert summary["overall"]["infra_errors"] == 1

    report = (tmp_path / "report.md").read_text()
    assert set(COLUMNS) <= set(ALL_COLUMNS)
    header = "| group | value | " + " | ".join(ALL_COLUMNS) + " |"
    assert header in report.splitlines()
    assert f"{len(pairs)} paired trials." in report
    assert "## Method contrasts" in report
    assert "| overall | all | 40 |" in report

    with (tmp_path / "metrics.csv").open(newline="") as fh:
        rows = list(csv.reader(fh))
    header = ["group", "value", *ALL_COLUMNS, *EXTRA_COLUMNS]
    assert rows[0] == header
    assert EXTRA_COLUMNS[:6] == ("as_planned", *(f"excluded.{r}" for r in EXCLUDED))
    assert "unconditioned.crsr_aware" in EXTRA_COLUMNS
    body = rows[1:]
    expected_keys = [("overall", "all")] + [
        (group, name) for group, values in summary["by"].items() for name in values
    ]
    assert [(r[0], r[1]) for r in body] == expected_keys
    assert all(len(r) == len(header) for r in body)
    overall = dict(zip(header[2:], body[0][2:], strict=True))
    assert overall["N"] == str(summary["overall"]["N"])
    assert float(overall["rsr"]) == round(summary["overall"]["rsr"]["value"], 3)
    o = summary["overall"]
    assert o["conditioning"]["as_planned"] == 38 and overall["as_planned"] == "38"
    assert (overall["excluded.refused"], overall["excluded.prefix_diverged"]) == ("1", "1")
    assert overall["excluded.infra_error"] == "1" and overall["excluded.other"] == "0"
    assert float(overall["unconditioned.rsr"]) == round(o["unconditioned"]["rsr"]["value"], 3)
    assert o["rsr"]["den"] == 38 and o["unconditioned"]["rsr"]["den"] == 40
    by_method = {r[1]: r for r in body if r[0] == "method"}
    assert set(by_method) == {"B0", "bare"}


def test_write_reports_renders_null_rates(tmp_path: Path) -> None:
    pairs = [trial(False, True, pair_id=f"p{i}", workflow=f"wf{i % 2}") for i in range(4)]
    _write(tmp_path / "trials.jsonl", pairs)
    summary = write_reports(tmp_path, plots=False)
    assert summary["overall"]["crsr"]["value"] is None
    assert json.loads((tmp_path / "summary.json").read_text())["overall"]["crsr"]["value"] is None
    with (tmp_path / "metrics.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert rows[0]["crsr"] == "null"
    assert "## Method contrasts" not in (tmp_path / "report.md").read_text()


def test_summary_csv_is_the_long_table(tmp_path: Path) -> None:
    _write(tmp_path / "trials.jsonl", _run_pairs())
    summary = write_reports(tmp_path, plots=False)
    with (tmp_path / "summary.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == list(LONG_COLUMNS)
    groups = 1 + sum(len(v) for v in summary["by"].values())
    methods = len(summary["by"]["method"])
    sensitivity = (1 + methods) * len(SENSITIVITY_METRICS)
    assert len(rows) == groups * (len(INDICATORS) + len(CONDITIONED)) + sensitivity

    def row(metric: str, scope: str) -> dict[str, str]:
        return next(
            r
            for r in rows
            if r["group"] == "method"
            and r["value"] == "B0"
            and r["metric"] == metric
            and r["scope"] == scope
        )

    crsr, crsr_all = row("crsr", "as_planned"), row("crsr", "all")
    m = summary["by"]["method"]["B0"]
    assert float(crsr["estimate"]) == m["crsr"]["value"]
    # 4 workflows: no bootstrap interval, the reason instead, and the effective N beside
    assert m["crsr"]["bootstrap"] is None and m["crsr"]["bca"] is None
    assert (crsr["bootstrap_lo"], crsr["bca_lo"]) == ("", "")
    assert crsr["bootstrap_reason"] == m["crsr"]["bootstrap_reason"] == "fewer than 5 clusters (4)"
    assert crsr["effective.clusters"] == "4" and crsr["effective.unit"] == "pair"
    assert int(crsr["effective.units"]) == m["crsr"]["effective"]["units"] == int(crsr["den"])
    assert float(crsr_all["estimate"]) == m["unconditioned"]["crsr"]["value"]
    assert int(crsr_all["den"]) == int(crsr["den"]) + 2
    assert row("control_rate", "all")["den"] == "20"
    sens = [r for r in rows if r["scope"] == "infra_as_failure" and r["value"] == "all"]
    assert [r["metric"] for r in sens] == list(SENSITIVITY_METRICS)
    assert sens[1]["den"] == "39"  # rsr: 38 pairs as planned + the infrastructure error


def test_report_md_sections(tmp_path: Path) -> None:
    _write(tmp_path / "trials.jsonl", _run_pairs())
    write_reports(tmp_path, plots=False)
    report = (tmp_path / "report.md").read_text()
    for heading in (
        "## Intervals (95%) by method",
        "## Conditioning: pairs whose fault happened as planned vs all pairs",
        "## Sensitivity: infrastructure errors counted as fault failures",
        "## By method and boundary",
        "## By method and mechanism",
        "## Assumptions",
        "## Method contrasts",
        "## Equivalence of competence (TOST, margin ±0.10)",
        "## pass^k over seeds",
    ):
        assert heading in report, heading
    assert "## Plots" not in report
    assert (
        f"Recovery metrics ({', '.join(CONDITIONED)}) are over the 38 pairs whose fault "
        "happened as planned" in report
    )
    assert "excluded: not_reached 0, refused 1, no_crash 0, prefix_diverged 1, infra_error 1" in (
        report
    )
    assert "| B0 | crsr | as planned |" in report and "| B0 | crsr | all |" in report
    assert "- `tost`: paired over matched units" in report
    # no interval from 4 workflows, said so; the effective N beside every rate
    row = "| B0 | crsr | as planned | 0.778 | 14/18 | [0.548, 0.910] | — (<5 clusters) "
    assert row + "| — (<5 clusters) | 4 workflows, 4 cells; 7 distinct; 18 pairs |" in report


def test_summary_csv_has_intervals_from_five_workflows(tmp_path: Path) -> None:
    _write(tmp_path / "trials.jsonl", method_arm("B0", [5, 4, 3, 5, 1], 5))
    summary = write_reports(tmp_path, plots=False)
    with (tmp_path / "summary.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    rsr = next(r for r in rows if r["group"] == "overall" and r["metric"] == "rsr")
    m = summary["overall"]["rsr"]
    assert [float(rsr["bootstrap_lo"]), float(rsr["bootstrap_hi"])] == m["bootstrap"]
    assert [float(rsr["bca_lo"]), float(rsr["bca_hi"])] == m["bca"]
    assert rsr["bootstrap_reason"] == "" and rsr["effective.clusters"] == "5"


def test_report_of_records_without_the_new_fields(tmp_path: Path) -> None:
    # Older records (and imported rows) still report; conditioning says it did not apply.
    _write(tmp_path / "trials.jsonl", [legacy(p) for p in _run_pairs()])
    summary = write_reports(tmp_path)
    report = (tmp_path / "report.md").read_text()
    assert "Conditioning not applied: no pair records fault_outcome" in report
    assert "| B0 | crsr | all |" in report and "| B0 | crsr | as planned |" not in report
    assert summary["overall"]["rsr"] == summary["overall"]["unconditioned"]["rsr"]
    with (tmp_path / "metrics.csv").open(newline="") as fh:
        overall = next(csv.DictReader(fh))
    assert overall["as_planned"] == "null" and overall["excluded.refused"] == "null"
    assert overall["uer"] == "null" and overall["excluded.infra_error"] == "1"


def test_plots_are_pngs(tmp_path: Path) -> None:
    _write(tmp_path / "trials.jsonl", _run_pairs())
    write_reports(tmp_path)
    for name in PLOTS:
        data = (tmp_path / name).read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 5000, name
        assert f"]({name})" in (tmp_path / "report.md").read_text()


def test_cli_report_json_and_tost_margin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(tmp_path / "trials.jsonl", _run_pairs())
    assert main(["report", str(tmp_path), "--json", "--no-plots", "--tost-margin", "0.05"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads((tmp_path / "summary.json").read_text())
    assert printed["tost"]["margin"] == 0.05
    with pytest.raises(SystemExit):
        main(["report", str(tmp_path), "--tost-margin", "2"])
    assert "proportion" in capsys.readouterr().err


# --- TrialWriter / read_trials -------------------------------------------------------------


def test_writer_skips_duplicate_pair_ids(tmp_path: Path) -> None:
    path = tmp_path / "trials.jsonl"
    a, b = trial(pair_id="a"), trial(pair_id="b")
    with TrialWriter(path) as w:
        w.write(a)
        w.write(a)
        w.write(b)
        w.write(dict(a, method="other"))
    assert [t["pair_id"] for t in read_trials(path)] == ["a", "b"]
    assert len(path.read_text().splitlines()) == 2
    assert read_trials(path)[0] == a


def test_read_trials_missing_file(tmp_path: Path) -> None:
    assert read_trials(tmp_path / "nope.jsonl") == []


def test_writer_creates_parent_dirs(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "run" / "trials.jsonl"
    _write(path, [trial(pair_id="a")])
    assert [t["pair_id"] for t in read_trials(path)] == ["a"]


def test_truncated_last_line_is_dropped_and_repaired(tmp_path: Path) -> None:
    path = tmp_path / "trials.jsonl"
    _write(path, [trial(pair_id="a"), trial(pair_id="b")])
    partial = json.dumps(trial(pair_id="c"))[:40]
    with path.open("a", encoding="utf-8") as fh:
        fh.write(partial)  # a crash mid-line: no newline
    assert [t["pair_id"] for t in read_trials(path)] == ["a", "b"]

    with TrialWriter(path) as w:
        assert path.read_text().endswith("}\n")
        assert partial not in path.read_text()
        assert w.done == {"a", "b"}
        w.write(trial(pair_id="c"))
    lines = path.read_text().splitlines()
    assert len(lines) == 3
    assert [json.loads(line)["pair_id"] for line in lines] == ["a", "b", "c"]


def test_only_a_truncated_line_is_repaired_to_empty(tmp_path: Path) -> None:
    path = tmp_path / "trials.jsonl"
    path.write_text('{"pair_id": "a", "work')
    assert read_trials(path) == []
    with TrialWriter(path) as w:
        assert w.done == set()
        assert path.read_bytes() == b""
        w.write(trial(pair_id="a"))
    assert [t["pair_id"] for t in read_trials(path)] == ["a"]


def test_resume_knows_done_pairs(tmp_path: Path) -> None:
    path = tmp_path / "trials.jsonl"
    _write(path, [trial(pair_id="a"), trial(pair_id="b")])
    with TrialWriter(path) as w:
        assert w.done == {"a", "b"}
        w.write(trial(pair_id="b"))  # already recorded: skipped
        w.write(trial(pair_id="c"))
    with TrialWriter(path) as w:
        assert w.done == {"a", "b", "c"}
    assert [t["pair_id"] for t in read_trials(path)] == ["a", "b", "c"]


def test_agent_behaviour_counts_valid_actions_and_tolerates_imported_records() -> None:
    from undobench_gym.evaluation.agent_behaviour import agent_behaviour

    bad = {"error": {"type": "invalid_action", "message": "x"}}
    steps = [{"observation": bad}, {"observation": {"status": 200}}]
    pair = trial(episode(True, transcript=steps), episode(False, transcript=list(steps)))
    pair["wall_ms"] = 2000.0
    imported = trial(False, False)  # an imported record: no transcripts, no wall time
    imported["control"]["transcript"] = imported["fault"]["transcript"] = None
    out = agent_behaviour([pair, imported])
    assert (out["actions"], out["valid_actions"], out["valid_action_rate"]) == (4, 2, 0.5)
    assert out["control_success"] == 1 and out["seconds_per_pair_median"] == 2.0
    assert "requests" not in out  # no agent counted tokens
    pair["agent_stats"] = {"requests": 3, "completion_tokens": 40, "replayed_replies": 2}
    out = agent_behaviour([pair, imported])
    assert (out["requests"], out["completion_tokens"], out["replayed_replies"]) == (3, 40, 2)
    assert agent_behaviour([])["valid_action_rate"] is None
