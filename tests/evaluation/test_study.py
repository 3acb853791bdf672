"""`undobench study`: a small study run twice gives the same document above the measured
section (determinism), its numbers are the ones `undobench report` prints for the same
runs, and `study verify` accepts the re-run and catches a changed verdict."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from undobench_gym.contract.errors import UndoBenchError
from undobench_gym.evaluation.study.document import fill
from undobench_gym.evaluation.study.paper import paper_figures
from undobench_gym.evaluation.study.render import MEASURED, PartRun
from undobench_gym.evaluation.study.spec import load_study
from undobench_gym.evaluation.study.tables import num, rate_text
from undobench_gym.evaluation.units import effective_text
from undobench_gym.harness.cli import main

pytestmark = pytest.mark.xdist_group("study")

REFERENCE = (
    Path(__file__).resolve().parents[2] / "studies" / "paper-rerun" / "reference" / "undobench-v1"
)
SWEEP = """
workflows = ["pay-split-payout", "st-publish-build-artifact"]
methods = ["bare", "B2"]
seeds = "1-2"
agent = "scripted"
runtime = "process"
max_steps = 20
"""
STUDY = """
title = "A small study"

[[parts]]
name = "main"
sweep = "main.toml"
role = "scripted"
title = "two TEST workflows, bare and B2, seeds 1-2"

[[parts]]
name = "again"
sweep = "main.toml"
role = "runtime"
compare_with = "main"
title = "the same pairs again"
"""
READING = (
    "B2's CRSR is {{crsr:B2}}; at the lost acknowledgement {{der:B2:POST_MUTATION_PRE_ACK}}.\n"
)


# One worker and one build for the module (see tests/test_adversarial.py).
@pytest.fixture(scope="session")
def study(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("study")
    sdir = root / "def"
    sdir.mkdir()
    (sdir / "study.toml").write_text(STUDY)
    (sdir / "main.toml").write_text(SWEEP)
    (sdir / "reading.md").write_text(READING)
    runs, doc = root / "runs", root / "docs" / "study.md"
    argv = ["study", "run", "--study", str(sdir), "--runs", str(runs), "--doc", str(doc)]
    argv += ["--reference", "", "--quiet"]
    assert main(argv) == 0
    (root / "first.md").write_text(doc.read_text())
    shutil.move(runs, root / "runs1")
    assert main(argv) == 0  # the same study again, into the same paths
    return {
        "study": sdir,
        "runs": runs,
        "runs1": root / "runs1",
        "doc": doc,
        "first": root / "first.md",
    }


def _table(doc: str, heading: str) -> list[list[str]]:
    """The rows (cells) of the first table under `heading`."""
    after = doc.split(heading, 1)[1]
    rows = []
    for line in after.splitlines()[2:]:
        if not line.startswith("|"):
            if rows:
                break
            continue
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return [r for r in rows[2:]] if rows and rows[1][0].startswith("---") else rows


def test_a_rerun_regenerates_the_scripted_part_byte_for_byte(study: dict[str, Path]) -> None:
    first, second = study["first"].read_text(), study["doc"].read_text()
    assert MEASURED in first and MEASURED in second
    assert first.split(MEASURED)[0] == second.split(MEASURED)[0]
    assert "**20 of 20 identical**" in second  # the runtime part matched pair by pair
    assert "B2's CRSR is " in second and "{{" not in second


def test_the_document_shows_what_undobench_report_prints(study: dict[str, Path]) -> None:
    run = study["runs"] / "main"
    assert main(["report", str(run), "--no-plots"]) == 0
    summary = json.loads((run / "summary.json").read_text())
    doc = study["doc"].read_text()
    rows = _table(doc, "### By method")
    assert {r[0] for r in rows} == set(summary["by"]["method"])
    header = [
        c.strip() for c in doc.split("### By method", 1)[1].splitlines()[2].strip("|").split("|")
    ]
    for r in rows:
        m = summary["by"]["method"][r[0]]
        assert r[1] == str(m["N"])
        assert header[3] == "effective N (crsr)"
        assert r[3] == effective_text(m["crsr"]["effective"])
        for name, cell in zip(header[4:], r[4:], strict=True):
            assert cell == rate_text(m[name]), (r[0], name)
    # method x boundary: the report's cross table has the same value and interval
    report = (run / "report.md").read_text()
    cross = {}
    for line in report.splitlines():
        parts = [c.strip() for c in line.strip("|").split("|")]
        if len(parts) == 9 and parts[2] in {"crsr", "crsr_aware", "der"}:
            # value, then the bootstrap interval; from fewer than 5 workflows (this study
            # has 2) `— (<5 clusters)` and the Wilson interval beside it
            cross[(parts[0], parts[1], parts[2])] = f"{parts[3]} {parts[6]}"
            if parts[6].startswith("—"):
                cross[(parts[0], parts[1], parts[2])] += f", Wilson {parts[5]}"
    grid = _table(doc, "### Method x boundary")
    bheader = [
        c.strip()
        for c in doc.split("### Method x boundary", 1)[1].splitlines()[2].strip("|").split("|")
    ]
    checked = 0
    for r in grid:
        for name, cell in zip(bheader[5:], r[5:], strict=True):
            if (r[0], r[1], name) in cross:
                # the document's Wilson interval is over the independent units: over cells
                # when the seeds copy each other, which the report shows as effective N
                shown = cross[(r[0], r[1], name)]
                assert cell.split(", Wilson")[0] == shown.split(", Wilson")[0], (r[0], r[1])
                if "(" not in cell.split(", Wilson")[-1]:  # over pairs: the report's own
                    assert cell == shown, (r[0], r[1], name)
                checked += 1
    assert checked >= 6


def test_verify_accepts_the_rerun_and_catches_a_changed_verdict(study: dict[str, Path]) -> None:
    assert main(["study", "verify", str(study["runs1"]), "--study", str(study["study"])]) == 0
    trials = study["runs1"] / "main" / "trials.jsonl"
    lines = trials.read_text().splitlines()
    record = json.loads(lines[0])
    record["fault"]["success"] = not record["fault"]["success"]
    trials.write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n")
    assert main(["study", "verify", str(study["runs1"]), "--study", str(study["study"])]) == 1


def test_the_reading_cannot_name_a_figure_that_does_not_exist(study: dict[str, Path]) -> None:
    s, _ = load_study(study["study"])
    pairs = [
        json.loads(x) for x in (study["runs"] / "main" / "trials.jsonl").read_text().splitlines()
    ]
    summary = json.loads((study["runs"] / "main" / "summary.json").read_text())
    run = PartRun(s.main, pairs, summary, {})
    assert fill("{{crsr:B2}}", run) == num(summary["by"]["method"]["B2"]["crsr"]["value"])
    with pytest.raises(UndoBenchError, match="no figure"):
        fill("{{crsr:B9}}", run)
    with pytest.raises(UndoBenchError, match="no figure"):
        fill("{{crsr:B2:NOWHERE}}", run)


def test_a_study_definition_is_checked(tmp_path: Path) -> None:
    (tmp_path / "study.toml").write_text(
        STUDY.replace('compare_with = "main"', 'compare_with = "nope"')
    )
    (tmp_path / "main.toml").write_text(SWEEP)
    with pytest.raises(UndoBenchError, match="compare_with"):
        load_study(tmp_path)
    assert main(["study", "run", "--study", str(tmp_path / "missing")]) == 2


@pytest.mark.skipif(not REFERENCE.is_dir(), reason="the published reference data is not here")
def test_the_papers_figures_reproduce_its_published_counts() -> None:
    figs = {(f.source, f.method, f.metric): f for f in paper_figures(REFERENCE)}
    # contemporary_models, B0: 759 of 960 controls succeeded (docs/evaluation.md)
    assert (
        figs[("contemporary_models", "B0", "control_rate")].num,
        figs[("contemporary_models", "B0", "control_rate")].den,
    ) == (759, 960)
    assert figs[("rb3c (headline)", "B2", "crsr")].value == pytest.approx(0.5349)
    assert figs[("rb7n10_keys_everywhere", "B2-K", "crsr")].den == 762


def test_a_part_lost_to_infrastructure_errors_is_not_rendered(
    study: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every pair recorded, every one an infrastructure error (a stack that cannot start):
    the study stops with the cause instead of rendering figures over nothing."""
    runs = tmp_path / "runs"
    (runs / "main").mkdir(parents=True)
    lines = (study["runs"] / "main" / "trials.jsonl").read_text().splitlines()
    broken = []
    for line in lines:
        record = json.loads(line)
        record["control"]["error"] = "stack_start: StackStartError: service exited with 1"
        broken.append(json.dumps(record))
    (runs / "main" / "trials.jsonl").write_text("\n".join(broken) + "\n")
    doc = tmp_path / "study.md"
    argv = ["study", "run", "--study", str(study["study"]), "--runs", str(runs)]
    argv += ["--doc", str(doc), "--reference", "", "--parts", "main", "--quiet"]
    assert main(argv) == 2
    assert "20 of 20 pairs ended in an infrastructure error" in capsys.readouterr().err
    assert not doc.exists()
