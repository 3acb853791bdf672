"""The CLI end to end: tasks, run (appending, resumable, interruption-safe), report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from undobench_gym.core.trials import read_trials
from undobench_gym.harness.cli import main
from undobench_gym.harness.runner import expand, parse_seeds, run_sweep


def test_tasks_json_matches_the_contract(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) >= 8
    for r in rows:
        assert set(r) >= {"id", "domain", "split", "tools", "scenarios"}
        for t in r["tools"]:
            assert set(t) == {"name", "read_only", "effect_class", "idempotency"}
            assert t["idempotency"] in ("native", "constraint", "none")
        for s in r["scenarios"]:
            assert set(s) == {"id", "boundary", "ambiguous"}
    assert main(["tasks", "--split", "test", "--json"]) == 0
    assert {r["split"] for r in json.loads(capsys.readouterr().out)} == {"test"}


def test_run_then_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    code = main(
        [
            "run",
            "--workflows",
            "pay-charge-customer",
            "--scenarios",
            "lost-ack",
            "--method",
            "B0,B2",
            "--seeds",
            "1-2",
            "--out",
            str(out),
            "--quiet",
        ]
    )
    assert code == 0
    trials = read_trials(out / "trials.jsonl")
    assert len(trials) == 4 and len({t["pair_id"] for t in trials}) == 4
    t = trials[0]
    for key in (
        "pair_id",
        "workflow",
        "domain",
        "split",
        "seed",
        "method",
        "agent",
        "model",
        "framework",
        "runtime",
        "scenario",
        "boundary",
        "prefix_equivalent",
    ):
        assert key in t
    for side in ("control", "fault"):
        assert set(t[side]) >= {
            "success",
            "verdict",
            "steps",
            "transcript",
            "state_hash",
            "effects",
            "fault_fired",
            "wall_ms",
            "error",
        }
    assert all(x["prefix_equivalent"] for x in trials)
    summary = json.loads((out / "summary.json").read_text())
    by = summary["by"]["method"]
    assert by["B0"]["der"]["value"] == 1.0 and by["B2"]["der"]["value"] == 0.0
    capsys.readouterr()
    assert main(["report", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == summary
    assert (out / "report.md").exists() and (out / "metrics.csv").exists()
    # A second run into the same directory without --resume is refused, not appended.
    again = [
        "run",
        "--workflows",
        "pay-charge-customer",
        "--scenarios",
        "lost-ack",
        "--method",
        "B0",
        "--seeds",
        "1",
        "--out",
        str(out),
        "--quiet",
    ]
    assert main(again) == 2
    assert main([*again, "--resume"]) == 0
    assert len(read_trials(out / "trials.jsonl")) == 4


def test_interrupted_sweep_loses_nothing_and_resume_duplicates_nothing(tmp_path: Path) -> None:
    trials = expand(["db-create-order"], None, ["bare"], parse_seeds("1-3"))
    seen: list[str] = []

    def stop_after_two(record: dict[str, Any]) -> None:
        seen.append(record["pair_id"])
        if len(seen) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(
            trials,
            agent_spec="scripted",
            runtime="process",
            out=tmp_path,
            progress=False,
            on_trial=stop_after_two,
        )
    assert [t["pair_id"] for t in read_trials(tmp_path / "trials.jsonl")] == seen
    with (tmp_path / "trials.jsonl").open("a") as fh:
        fh.write('{"pair_id": "half-writ')  # a crash mid-line
    run_sweep(
        trials, agent_spec="scripted", runtime="process", out=tmp_path, resume=True, progress=False
    )
    ids = [t["pair_id"] for t in read_trials(tmp_path / "trials.jsonl")]
    assert len(ids) == len(trials) == len(set(ids)) and ids[:2] == seen


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--workflows", "nope", "--out", "x"],
        ["run", "--workflows", "pay-charge-customer", "--method", "B7", "--out", "x"],
        ["run", "--workflows", "pay-charge-customer", "--seeds", "5-1", "--out", "x"],
        ["run", "--split", "dev", "--workflows", "pay-charge-customer", "--out", "x"],
        ["report", "/nonexistent"],
    ],
)
def test_usage_errors_are_clear(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert "undobench: error:" in capsys.readouterr().err


def test_help_on_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    for cmd in ([], ["tasks"], ["run"], ["report"], ["doctor"]):
        with pytest.raises(SystemExit) as info:
            main([*cmd, "--help"])
        assert info.value.code == 0
    assert "usage" in capsys.readouterr().out
