"""The study beside the paper: the paper's figures as published and adjusted for its data's
known defects (checked against values computed here, independently, from the reference
files), its H1-H3 over every cell and over the cells where both methods apply, methods
identical on every pair, and the rendered sections (synthetic runs, no services)."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from undobench_gym.core.trials import TrialWriter
from undobench_gym.evaluation.reference import headline
from undobench_gym.evaluation.study import comparison
from undobench_gym.evaluation.study.document import render_study
from undobench_gym.evaluation.study.model_part import beside_scripted
from undobench_gym.evaluation.study.paper import paper_figures
from undobench_gym.evaluation.study.spec import load_study
from undobench_gym.evaluation.study.tables import rate_text

from .factories import episode, outcome, trial

REFERENCE = (
    Path(__file__).resolve().parents[2] / "studies" / "paper-rerun" / "reference" / "undobench-v1"
)
needs_reference = pytest.mark.skipif(
    not REFERENCE.is_dir(), reason="the published reference data is not here"
)


def _rows(study: str) -> list[dict[str, str]]:
    with (REFERENCE / study / "raw" / "matrix.csv").open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _defective(r: dict[str, str]) -> bool:
    """The two known defects, read straight off a CSV row (the lost-ack, pre-mutation and
    keys-everywhere studies, where RB-CLOUD-004's fault runs all end as their controls)."""
    failed_control = r["task_id"] == "RB-STOR-005" and r["ctrl_success"] != "True"
    return r["task_id"] == "RB-CLOUD-004" or failed_control


# --- the paper's figures, as published and adjusted ----------------------------------------


@needs_reference
def test_the_headline_as_published_and_adjusted() -> None:
    by_task = json.loads((REFERENCE / "rb3c_test_summary.json").read_text())["by_task"]
    h = headline(REFERENCE)
    assert h is not None
    # Published: the pooled counts over every task, as its summary printed them.
    capable = sum(t["ctrl_success"] for t in by_task.values())
    recovered = sum(t["crsr_success"] for t in by_task.values())
    assert (capable, recovered) == (2406, 1124)
    assert (h["published"]["crsr"]["num"], h["published"]["crsr"]["den"]) == (1124, 2406)
    for metric, printed in h["printed"].items():
        assert h["published"][metric]["value"] == pytest.approx(printed, abs=1e-4), metric
    # Adjusted: RB-CLOUD-004 out (its fault never fired: 240 of 240 capable pairs "recovered")
    # and RB-STOR-005's failed controls out (its control never succeeded).
    cloud, stor = by_task["RB-CLOUD-004"], by_task["RB-STOR-005"]
    assert cloud["crsr_success"] == cloud["ctrl_success"] == cloud["pairs"] == 240
    assert stor["ctrl_success"] == 0
    cap = capable - cloud["ctrl_success"]
    rec = recovered - cloud["crsr_success"]
    assert (h["adjusted"]["crsr"]["num"], h["adjusted"]["crsr"]["den"]) == (rec, cap)
    assert h["adjusted"]["crsr"]["value"] == pytest.approx(884 / 2166, abs=1e-6)
    assert round(h["adjusted"]["crsr"]["value"], 3) == 0.408  # not 0.467
    pairs = 2880 - cloud["pairs"] - (stor["pairs"] - stor["ctrl_success"])
    assert (h["adjusted"]["control_rate"]["num"], h["adjusted"]["control_rate"]["den"]) == (
        cap,
        pairs,
    )
    assert h["dropped"] == {
        "RB-CLOUD-004: fault never fired": 240,
        "RB-STOR-005: control failed": 240,
    }


@needs_reference
def test_the_raw_studies_adjusted_against_the_csv_rows() -> None:
    figs = {(f.source, f.method, f.metric): f for f in paper_figures(REFERENCE)}
    for method in ("B0", "B2", "B5"):
        rows = [r for r in _rows("contemporary_models") if r["recovery_code"] == method]
        kept = [r for r in rows if not _defective(r)]
        capable = [r for r in kept if r["ctrl_success"] == "True"]
        crsr = sum(r["fault_success"] == "True" for r in capable) / len(capable)
        der = sum(int(r["duplicate_effects"]) > 0 for r in kept) / len(kept)
        f = figs[("contemporary_models", method, "crsr")]
        assert f.adjusted is not None and f.dropped == len(rows) - len(kept) == 160
        assert f.adjusted["value"] == pytest.approx(crsr, abs=1e-6)
        assert figs[("contemporary_models", method, "der")].adjusted["value"] == pytest.approx(
            der, abs=1e-6
        )
    # Keys everywhere: all 40 published duplicates are rows of the two defects.
    keys = _rows("rb7n10_keys_everywhere")
    dups = sum(int(r["duplicate_effects"]) > 0 for r in keys)
    clean = [r for r in keys if not _defective(r)]
    assert (dups, len(keys), len(clean)) == (40, 960, 800)
    assert sum(int(r["duplicate_effects"]) > 0 for r in clean) == 0
    der = figs[("rb7n10_keys_everywhere", "B2-K", "der")]
    assert (der.num, der.den, round(der.value, 3)) == (40, 960, 0.042)
    assert der.adjusted is not None
    assert (der.adjusted["num"], der.adjusted["den"], der.adjusted["value"]) == (0, 800, 0.0)


@needs_reference
def test_rb_cloud_004_is_kept_where_its_fault_fired() -> None:
    # During the mutation its fault runs duplicated: the fault fired there.
    rows = [r for r in _rows("rb7n10_during_mutation") if r["task_id"] == "RB-CLOUD-004"]
    assert sum(int(r["duplicate_effects"]) > 0 for r in rows) > 0
    figs = [f for f in paper_figures(REFERENCE) if f.source == "rb7n10_during_mutation"]
    assert figs and all(f.dropped == 0 for f in figs)
    # 4 tasks: the paper's figure gets no bootstrap interval either, and says why.
    assert all(f.ci is None and f.ci_reason for f in figs)


# --- H1 both ways, and methods identical on every pair -------------------------------------


def _keyed_run(seeds: int = 3, workflows: int = 6, keyed: int = 2) -> list[dict]:
    """A deterministic agent after a lost acknowledgement: B0 re-sends and duplicates;
    B2 and B5 send a key, which the service honours on the first `keyed` workflows only
    (elsewhere B2 is not applicable and behaves as B0). B5 ends as B2 on every pair."""
    out = []
    for w in range(workflows):
        for m in ("B0", "B2", "B5"):
            for s in range(seeds):
                ok = m != "B0" and w < keyed
                out.append(
                    trial(
                        True,
                        episode(ok, duplicates=0 if ok else 1),
                        method=m,
                        workflow=f"wf{w}",
                        domain="payments",
                        seed=s,
                        pair_id=f"{m}-wf{w}-{s}",
                        method_applicable=(w < keyed) if m == "B2" else True,
                    )
                    | {"runtime": "process"}
                )
    return out


def test_h1_over_every_cell_and_over_the_cells_where_b2_applies() -> None:
    found = comparison.hypotheses(_keyed_run(), applied=True)
    all_cells, sign = found[("H1", "all")]
    # Over every cell: B2 recovers 2 x 3 of 18 pairs, B0 none.
    assert sign * all_cells["diff"] == pytest.approx(6 / 18, abs=1e-6)
    assert all_cells["dropped_inapplicable"] == {"a": 0, "b": 0}
    assert all_cells["clusters"] == 6 and all_cells["ci"] is not None
    # Where B2 applies (2 workflows): every pair, and no interval from 2 clusters.
    applicable, sign = found[("H1", "applicable")]
    assert sign * applicable["diff"] == pytest.approx(1.0)
    assert applicable["dropped_inapplicable"] == {"a": 12, "b": 12}
    assert applicable["ci"] is None and applicable["ci_reason"] == "fewer than 5 clusters (2)"
    assert applicable["p"] == pytest.approx(0.5)  # 2 differing tasks: 2 / 2**2
    # McNemar counts cells, not the seeds that copy them: 2 discordant cells, not 6 pairs.
    assert applicable["mcnemar"]["unit"] == "cell"
    assert applicable["mcnemar"]["unit_b_only"] + applicable["mcnemar"]["unit_a_only"] == 2
    h3, _ = found[("H3", "all")]
    assert h3["diff"] == 0.0
    facts = comparison.facts(None, [], found)
    assert (facts["h1:all"], facts["h1:applicable"], facts["h3:all"]) == (
        "+0.333",
        "+1.000",
        "+0.000",
    )


def test_methods_identical_on_every_pair_are_named() -> None:
    pairs = _keyed_run()
    assert comparison.identical_on_every_pair(pairs) == [("B2", "B5", 18)]
    # One pair that ends otherwise, or one pair without a partner, and they are two methods.
    changed = [dict(p) for p in pairs]
    i = next(i for i, p in enumerate(changed) if p["method"] == "B5")
    changed[i] = {**changed[i], "fault": {**changed[i]["fault"], "finish_status": "escalated"}}
    assert comparison.identical_on_every_pair(changed) == []
    assert comparison.identical_on_every_pair(pairs[:-1]) == []
    lines = comparison.hypotheses_lines(
        comparison.hypotheses(pairs, applied=True), {}, [("B2", "B5", 18)]
    )
    text = "\n".join(lines)
    assert "so H3 (B2 - B5) is 0 by construction" in text
    assert "over every cell H1 and H2 are the same contrast" in text


# --- the rendered study ---------------------------------------------------------------------

READING = """## Reading

H1 {{h1:all}} over every cell, {{h1:applicable}} where B2 applies; H3 {{h3:all}}. The paper's
CRSR {{crsr:paper}}, adjusted {{crsr:paper-adjusted}}; its keys-everywhere duplicates
{{der:paper-keys}}, adjusted {{der:paper-keys-adjusted}}.
"""


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> str:
    if not REFERENCE.is_dir():
        pytest.skip("the published reference data is not here")
    root = tmp_path_factory.mktemp("paper")
    sdir = root / "def"
    sdir.mkdir()
    (sdir / "study.toml").write_text(
        'title = "t"\n[[parts]]\nname = "main"\nsweep = "m.toml"\nrole = "scripted"\n'
        'title = "synthetic scripted pairs"\n'
    )
    (sdir / "m.toml").write_text('split = "test"\n')
    (sdir / "reading.md").write_text(READING)
    pairs = _keyed_run(seeds=2)
    # one more boundary on one workflow: a slice of a single workflow
    for m in ("B0", "B2", "B5"):
        for s in range(2):
            pairs.append(
                trial(
                    True,
                    True,
                    method=m,
                    workflow="wf0",
                    domain="payments",
                    seed=s,
                    scenario="comp",
                    boundary="DURING_COMPENSATION",
                    fault_outcome=outcome(boundary="DURING_COMPENSATION"),
                    pair_id=f"{m}-comp-{s}",
                )
                | {"runtime": "process"}
            )
    runs = root / "runs"
    (runs / "main").mkdir(parents=True)
    with TrialWriter(runs / "main" / "trials.jsonl") as w:
        for p in pairs:
            w.write(p)
    study, _ = load_study(sdir)
    doc = root / "docs" / "study.md"
    render_study(study, sdir, runs, doc=doc, reference=REFERENCE, command="undobench study run")
    return doc.read_text()


def test_the_document_says_how_the_tasks_and_pairs_differ(rendered: str) -> None:
    assert "### How our tasks and pairs differ from the paper's" in rendered
    assert "| cloud | - | RB-CLOUD-004 (Blue-Green Service Deployment Cutover) |" in rendered
    assert "**Not the same tasks.**" in rendered and "**Not the same pairs.**" in rendered
    assert "B2 8." in rendered  # the pairs where B2 cannot act (4 workflows x 2 seeds)


def test_the_document_shows_the_headline_published_and_adjusted(rendered: str) -> None:
    assert "| crsr | 0.467 (1124/2406) | 0.408 (884/2166) |" in rendered
    assert "| control_rate | 0.835 (2406/2880) | 0.902 (2166/2400) |" in rendered
    assert "RB-CLOUD-004: 240 pairs; 240 of its 240 capable pairs counted as recovered" in rendered
    # every raw figure beside its adjusted value (rows left out in parentheses)
    row = next(
        line
        for line in rendered.splitlines()
        if line.startswith("| contemporary_models | POST_MUTATION_PRE_ACK | B0 | crsr |")
    )
    assert "| 0.215 [" in row and "| 0.122 (160) |" in row


def test_the_document_shows_h1_both_ways_and_b5_as_b2(rendered: str) -> None:
    # every cell: B2 recovers 6 of 14 pairs, B0 the 2 at the compensation boundary
    assert "| H1 | B2 - B0 | every cell | 0/0 | +0.286 |" in rendered
    # where B2 applies (two workflows): 6 of 6 against 2 of 6, and no interval
    assert "| H1 | B2 - B0 | cells where both apply | 8/8 | +0.667 | — (<5 clusters) |" in rendered
    assert "B2 and B5 end identically on every one of their 14 matched pairs" in rendered
    assert "B2 = B5 (14 pairs)" in rendered  # under "By method" too
    reading = rendered.split("## Reading", 1)[1]
    assert "H1 +0.286 over every cell, +0.667 where B2 applies; H3 +0.000." in reading
    assert "CRSR 0.467, adjusted 0.408" in reading
    assert "duplicates\n0.042, adjusted 0.000" in reading


def test_the_document_shows_effective_n_and_no_interval_from_few_clusters(rendered: str) -> None:
    assert "Effective N: the 42 pairs are 21 cells" in rendered
    assert "the seeds copy each other" in rendered
    grid = rendered.split("### Method x boundary", 1)[1].split("![", 1)[0]
    rows = [r for r in grid.splitlines() if r.startswith("| B")]
    assert rows
    for r in rows:
        cells = [c.strip() for c in r.strip("|").split("|")]
        few = re.match(r"(\d+) workflows?,", cells[4])
        assert few, r
        if int(few.group(1)) < 5:  # every rate without an interval, and saying why
            assert all("— (<5 clusters)" in c for c in cells[5:]), r
            assert all(re.search(r"\(\d+ cells?\)", c) for c in cells[5:]), r
        else:
            assert not any("<5 clusters" in c for c in cells[5:]), r
    comp = next(r for r in rows if r.startswith("| B0 | DURING_COMPENSATION |"))
    assert "| 1 workflow, 1 cell; seeds copy: 1 unit |" in comp


def test_rate_text_without_an_interval() -> None:
    r = {
        "value": 0.5,
        "bootstrap": None,
        "bootstrap_reason": "fewer than 5 clusters (2)",
        "wilson": [0.3, 0.7],
        "effective": {"unit": "pair", "units": 20, "wilson": [0.3, 0.7]},
    }
    assert rate_text(r) == "0.500 — (<5 clusters), Wilson [0.300, 0.700]"
    cells = {**r, "effective": {"unit": "cell", "units": 2, "wilson": [0.09, 0.91]}}
    assert rate_text(cells) == "0.500 — (<5 clusters), Wilson [0.090, 0.910] (2 cells)"


@needs_reference
def test_the_model_part_sets_the_paper_headline_from_the_reference_data() -> None:
    pairs = _keyed_run(seeds=1)
    rows = beside_scripted(pairs, pairs, ["B0"], headline(REFERENCE))
    text = "\n".join(rows)
    assert "| the paper (published; TEST, methods pooled) | 0.835 | 0.467 | - | - | 0.368 |" in text
    assert "| the paper (adjusted; TEST, methods pooled) | 0.902 | 0.408 | - | - | 0.494 |" in text
    assert "RB-CLOUD-004: fault never fired (240 pairs)" in text
    assert "the paper" not in "\n".join(beside_scripted(pairs, pairs, ["B0"]))
