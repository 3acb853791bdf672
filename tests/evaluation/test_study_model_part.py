"""The real-model part of the study: competence per workflow, recovery by factor, and the
competence-recovery gap with a paired, task-clustered interval (none under 5 workflows)."""

from __future__ import annotations

from pathlib import Path

import pytest

from undobench_gym.evaluation.study import model_part
from undobench_gym.evaluation.study.spec import Part

from .factories import trial


def _pairs(workflows: int) -> list[dict]:
    """Per workflow: 4 pairs, control succeeds in 3, the fault run in 1 of those 3."""
    out = []
    for w in range(workflows):
        for i in range(4):
            out.append(
                trial(
                    control=i < 3,
                    fault=i == 0,
                    workflow=f"wf-{w}",
                    seed=i,
                    framework="F1" if i % 2 else "F2",
                )
            )
    return out


def test_the_gap_is_control_rate_minus_crsr_over_the_scored_pairs() -> None:
    g = model_part.gap(_pairs(6))
    # control_rate 18/24 = 0.75; crsr = 6/18 = 1/3; gap = 0.75 - 0.333 = 0.4167
    assert g["value"] == pytest.approx(0.75 - 1 / 3, abs=1e-6)
    assert g["clusters"] == 6 and g["pairs"] == 24
    lo, hi = g["interval"]
    # every workflow is alike, so resampling workflows cannot move the estimate
    assert lo == pytest.approx(g["value"], abs=1e-6) and hi == pytest.approx(g["value"], abs=1e-6)


def test_no_bootstrap_interval_from_fewer_than_five_workflows() -> None:
    pairs = _pairs(4)
    assert model_part.gap(pairs)["interval"] is None
    rows = model_part.recovery_by(pairs, "method")
    assert "no interval" in rows[-1] and "]w" in rows[-1]


def test_excluded_pairs_do_not_count_in_the_gap() -> None:
    pairs = _pairs(5)
    pairs.append(trial(control=True, fault=False, workflow="wf-0", prefix_equivalent=False))
    assert model_part.gap(pairs)["pairs"] == 20


def test_competence_counts_controls_per_workflow_and_framework() -> None:
    rows = model_part.competence(_pairs(2))
    assert rows[0].endswith("| F1 | F2 |")
    assert any("wf-0" in r and "| 1/2 | 2/2 |" in r for r in rows)
    assert rows[-1].startswith("| all | | | **2/4**") and "| **4/4**" in rows[-1]
    assert model_part.able_workflows(_pairs(2)) == ["wf-0", "wf-1"]


def test_a_part_runs_with_its_llm_and_server_settings(tmp_path: Path) -> None:
    part = Part(
        name="qwen",
        sweep="q.toml",
        role="model",
        title="t",
        llm={"temperature": 0.7},
        model_server={"server": "llama-server", "context": 8192},
        runs_dir="runs/qwen",
    )
    assert part.environment() == {
        "UNDOBENCH_LLM_TEMPERATURE": "0.7",
        "UNDOBENCH_MODEL_SERVER": "llama-server",
        "UNDOBENCH_MODEL_CONTEXT": "8192",
    }
    assert part.out(tmp_path, tmp_path / "runs") == tmp_path / "runs" / "qwen"
    plain = Part(name="p", sweep="p.toml", role="scripted", title="t")
    assert plain.out(tmp_path, tmp_path / "r") == tmp_path / "r" / "p"
