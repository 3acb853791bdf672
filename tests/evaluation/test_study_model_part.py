"""The real-model part of the study: competence per workflow, recovery by factor, and the
competence-recovery gap with a paired, task-clustered interval (none under 5 workflows)."""

from __future__ import annotations

from pathlib import Path

import pytest

from undobench_gym.contract.errors import UndoBenchError
from undobench_gym.evaluation.study import model_part, reaction
from undobench_gym.evaluation.study.spec import Part

from .factories import episode, trial


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


# ---- what the model did after the error, and the part's notes ------------------------

LEAD = {"lead_id": "lead_1", "amount": 100, "opportunity_name": "o"}
ERROR = {"error": {"kind": "connection_reset", "type": "transport"}, "tool": "convert_lead"}


def _bare_fault(next_steps: list[dict], wire_after: list[dict], method: str = "bare") -> dict:
    """A crm lost-ack pair: the model's convert_lead dropped its answer; then `next_steps`."""
    steps = [
        {"step": 1, "action": {"tool": "convert_lead", "arguments": LEAD}, "observation": ERROR}
    ]
    steps += [{"step": i + 2, **s} for i, s in enumerate(next_steps)]
    fault = episode(False, transcript=steps)
    fault["fault"] = {"index": 1, "tool": "convert_lead", "visible_error": "connection_reset"}
    first = {"index": 1, "tool": "convert_lead", "read_only": False, "forwarded": True}
    fault["wire"] = [first, *wire_after]
    return trial(True, fault, workflow="crm-convert-lead", domain="crm", method=method)


def _call(tool: str, **arguments: object) -> dict:
    observation = {"status": 200, "tool": tool}
    return {"action": {"tool": tool, "arguments": arguments}, "observation": observation}


def test_the_models_next_action_after_the_error_is_classified_by_public_annotations() -> None:
    gave_up = _bare_fault([_call("finish", status="gave_up")], [])
    retried = _bare_fault(
        [_call("convert_lead", **LEAD), _call("finish", status="done")],
        [{"index": 2, "tool": "convert_lead", "forwarded": True}],
    )
    resumed = _bare_fault([_call("resume_lead_conversion", lead_id="lead_1")], [])
    read = _bare_fault([_call("get_lead", lead_id="lead_1")], [])
    undone = _bare_fault([_call("unenroll_contact", contact_id="c")], [])
    # a reworded re-send (other arguments, a fresh key) is another call, not the same one
    reworded = _bare_fault([_call("convert_lead", **{**LEAD, "amount": 99})], [])
    keyed = _bare_fault([_call("convert_lead", **LEAD, idempotency_key="k2")], [])
    assert reaction.reaction(reworded) == ("other call", False)
    assert reaction.reaction(keyed) == ("same call", True)
    assert reaction.reaction(gave_up) == ("gave_up", False)
    assert reaction.reaction(retried) == ("same call", True)
    assert reaction.reaction(resumed) == ("resume", False)
    assert reaction.reaction(read) == ("read", False)
    assert reaction.reaction(undone) == ("undo", False)
    assert reaction.reaction(_bare_fault([], [])) == ("nothing", False)
    # A wrapper's episodes are not the model's own reaction; nor is a failed control's.
    assert reaction.reaction(_bare_fault([], [], method="B0")) is None
    failed_control = _bare_fault([], [])
    failed_control["control"] = episode(False)
    assert reaction.reaction(failed_control) is None
    table = reaction.table([gave_up, retried, resumed])
    assert table[-1].startswith("| all | 3 | 1 | 0 | 1 |") and table[-1].endswith("| 1 |")


def test_the_notes_take_their_figures_from_the_pairs_and_refuse_unknown_names() -> None:
    pairs = _pairs(6)
    crsr = model_part.rate(pairs, "crsr", condition=True)["value"]
    text = model_part.fill_notes(
        "{{crsr:all}} {{crsr:F1}} {{count:scored}} {{count:seeds}} {{gap:all}} {{crsr:bare+F2}}",
        pairs,
    )
    f1 = model_part.rate([p for p in pairs if p["framework"] == "F1"], "crsr", True)["value"]
    both = [p for p in pairs if p["framework"] == "F2"]
    want = [
        f"{crsr:.3f}",
        f"{f1:.3f}",
        "24",
        "4",
        f"{model_part.gap(pairs)['value']:.3f}",
        f"{model_part.rate(both, 'crsr', True)['value']:.3f}",
    ]
    assert text.split() == want
    for bad in ("{{crsr:B9}}", "{{count:nonsense}}", "{{speed:all}}"):
        with pytest.raises(UndoBenchError):
            model_part.fill_notes(bad, pairs)


def test_a_finish_the_old_reader_missed_is_counted_by_its_meant_status() -> None:
    written = '{{"name": "finish", "arguments": {"status": "done", "summary": "ok"}}'
    fault = episode(True, finish_status="escalated")
    fault["transcript"] = [_call("finish", status="escalated", summary=written)]
    pair = trial(True, fault)
    c = model_part.counts([pair, trial(True, True)])
    assert c["escalated_on_text"] == 1 and c["aware_lost_to_reader"] == 1


def test_a_part_run_partly_before_replay_shows_both_builds() -> None:
    pairs = _pairs(5)
    for p in pairs[:8]:
        p["agent_config"] = {"replay": 1}
    text = "\n".join(model_part.section("t", pairs, None, ""))
    assert "### By harness build" in text
    assert "| replayed | 8 |" in text and "| sampled again | 12 |" in text
    for p in pairs:
        p["agent_config"] = {"replay": 1}
    assert "### By harness build" not in "\n".join(model_part.section("t", pairs, None, ""))


def test_every_figure_the_committed_notes_name_exists() -> None:
    """The study's model-part notes against the part's committed pairs: a misspelt
    placeholder fails here, not at the next `undobench study render`."""
    from undobench_gym.evaluation.records import load_records

    root = Path(__file__).resolve().parents[2] / "studies" / "paper-rerun"
    checked = 0
    for notes in sorted(root.glob("*.md")):
        trials = root / "runs" / notes.stem / "trials.jsonl"
        if notes.name == "reading.md" or not trials.is_file():
            continue
        filled = model_part.fill_notes(notes.read_text(encoding="utf-8"), load_records(trials))
        assert "{{" not in filled.replace("`{{`", "")
        checked += 1
    assert checked >= 1
