"""docs/study.md from the study's runs: every number comes from the runs through the code
that `undobench report` uses, so the document cannot drift from the data.

Everything above the MEASURED marker depends only on the seeds and the code (the scripted
parts): re-running the study regenerates it byte for byte. Below it is what a re-run
changes: wall times, the machine, the raw files' hashes and the real-model smoke test.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from undobench_gym.evaluation.indicators import Pair, is_infra_error
from undobench_gym.evaluation.metrics import BOOTSTRAP_RESAMPLES
from undobench_gym.evaluation.records import as_records, load_records
from undobench_gym.evaluation.reference import headline
from undobench_gym.evaluation.report import write_reports
from undobench_gym.evaluation.report_sections import FEW, contrast_lines, pass_k_lines, tost_lines
from undobench_gym.evaluation.run_meta import META_FILE
from undobench_gym.evaluation.stats import MIN_CLUSTERS
from undobench_gym.evaluation.study import comparison, tables
from undobench_gym.evaluation.study.paper import paper_figures
from undobench_gym.evaluation.study.plots import paper_plot
from undobench_gym.evaluation.study.spec import Part, Study
from undobench_gym.evaluation.study.verdicts import compare
from undobench_gym.evaluation.summary import summarize

MEASURED = "<!-- measured: everything below changes from one run of the study to the next -->"
PLOTS = ("crsr_by_method_boundary.png", "recovery_as_planned.png")
BY_METHOD = ("control_rate", "crsr", "crsr_aware", "der", "uer", "mer", "urr", "eor")
CONTRASTS = ("crsr_aware", "der")
BY_MECHANISM = ("crsr", "crsr_aware", "der", "uer", "mer")
PLACEHOLDER = re.compile(r"\{\{\s*([a-z0-9_]+):([A-Za-z0-9-]+)(?::([A-Z_]+))?\s*\}\}")


@dataclass
class PartRun:
    part: Part
    pairs: list[Pair]
    summary: dict[str, Any]
    meta: dict[str, Any]

    def __post_init__(self) -> None:
        self.pairs = as_records(self.pairs)  # the records as models, however they came


def load_part(out: Path, part: Part, *, html: bool) -> PartRun | None:
    """The part's pairs (from its run directory `out`) and its reports (written afresh, as
    `undobench report` would)."""
    if not (out / "trials.jsonl").is_file():
        return None
    pairs = load_records(out / "trials.jsonl")  # read once, for the reports and the document
    summary = write_reports(out, html=html, trials=pairs)
    meta_path = out / META_FILE
    meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
    return PartRun(part, pairs, summary, meta)


def _factorial(run: PartRun) -> str:
    ps = run.pairs
    seeds = sorted({p.seed for p in ps})
    span = f"{seeds[0]}-{seeds[-1]}" if seeds == list(range(seeds[0], seeds[-1] + 1)) else seeds
    return (
        f"{len({p.workflow for p in ps})} workflows, "
        f"{len({(p.workflow, p.scenario) for p in ps})} scenarios, "
        f"methods {', '.join(sorted({str(p.method) for p in ps}))}, seeds {span}, "
        f"agents {', '.join(sorted({str(p.agent) for p in ps}))}, "
        f"runtime {', '.join(sorted({str(p.runtime) for p in ps}))}"
    )


def _design(study: Study, runs: dict[str, PartRun | None], command: str) -> list[str]:
    lines = [
        f"# {study.title}",
        "",
        "Generated from the runs by `undobench study render` (do not edit by hand: edit the",
        "study's `reading.md` or the code, and regenerate). Re-run everything with",
        "",
        "```bash",
        command,
        "```",
        "",
        "| part | role | what ran | pairs | infrastructure errors |",
        "|---|---|---|---|---|",
    ]
    for p in study.parts:
        run = runs.get(p.name)
        if run is None:
            lines.append(f"| {p.name} | {p.role} | not run | 0 | - |")
            continue
        errors = sum(1 for x in run.pairs if is_infra_error(x))
        lines.append(
            f"| {p.name} | {p.role}: {p.title} | {_factorial(run)} | {len(run.pairs)} | {errors} |"
        )
    return lines


def _main_sections(run: PartRun, figures_rel: str) -> list[str]:
    s, pairs = run.summary, run.pairs
    o = s["overall"]
    applied = bool(o["conditioning"]["applied"])
    same = tables.identical_methods(s, BY_METHOD)
    twins = comparison.identical_on_every_pair(pairs)
    lines = [
        "",
        f"## Results: {run.part.title}",
        "",
        f"N = {o['N']} valid pairs; the control succeeded in D = {o['D']}; the fault happened "
        f"as planned in {o['conditioning']['as_planned']} (the recovery metrics are computed "
        "over those: docs/evaluation.md). Intervals: 95 % task-clustered bootstrap (tasks = "
        f"workflows, {BOOTSTRAP_RESAMPLES:,} resamples), none from fewer than {MIN_CLUSTERS} "
        f"workflows: `{FEW}`, with the Wilson interval beside it (over the independent "
        "units); Wilson intervals and BCa for every rate are in the run's report.",
        "",
        tables.effective_note(s, BY_METHOD),
        "",
        "### By method",
        "",
        *tables.by_group(s, "method", BY_METHOD),
        "",
        "Methods indistinguishable on every metric above (same counts): "
        + (", ".join(f"{a} = {b}" for a, b in same) if same else "none")
        + ". Identical on every matched pair (both outcomes, finish status, effect counts): "
        + (", ".join(f"{a} = {b} ({n} pairs)" for a, b, n in twins) if twins else "none")
        + ".",
        "",
        "### Method x boundary",
        "",
        *tables.method_boundary(pairs, applied),
        "",
        f"![CRSR by method and boundary]({figures_rel}/crsr_by_method_boundary.png)",
        "",
        f"![Recovery as planned]({figures_rel}/recovery_as_planned.png)",
        "",
        "### By mechanism (what actually happened on the wire)",
        "",
        *tables.by_group(s, "mechanism", BY_MECHANISM),
        "",
        "### Pairs left out of the recovery metrics, and why",
        "",
        *tables.excluded(s),
        *contrast_lines({"contrasts": [c for c in s["contrasts"] if c["metric"] in CONTRASTS]}),
        "",
        f"Shown: {', '.join(CONTRASTS)}; the other metrics' contrasts are in the run's "
        "report.md, and Holm's adjustment is over all of them.",
        *tost_lines(s["tost"]),
        *pass_k_lines(s),
    ]
    return lines


def _paper_sections(
    run: PartRun, reference: Path | None, figures: Path, rel: str
) -> tuple[list[str], dict[str, str]]:
    """The section beside the paper, and the figures the reading may quote from it."""
    if reference is None or not reference.is_dir():
        return ["", "## Beside the paper", "", "No reference data given: section left out."], {}
    figs = paper_figures(reference)
    valid = [p for p in run.pairs if not is_infra_error(p)]
    applied = bool(run.summary["overall"]["conditioning"]["applied"])
    grids = {m: tables.grid_values(valid, applied, m) for m in {f.metric for f in figs}}

    def ours(boundary: str, method: str, metric: str) -> dict[str, Any] | None:
        return grids[metric].get((method, boundary))

    paper_plot(figs, ours, figures / "paper_vs_ours.png")
    published = json.loads((reference / "rb3c_test_summary.json").read_text(encoding="utf-8"))
    head = headline(reference)
    found = comparison.hypotheses(valid, applied)
    lines = [
        "",
        "## Beside the paper",
        "",
        "The paper's agents were hosted language models (M1-M4, frameworks F1/F2) against an",
        "in-process simulation; ours is the scripted agent under each recovery method against",
        "real services. Its figures are recomputed from its published rows with our metric code",
        "(point estimates reproduce exactly; intervals: task-clustered bootstrap over its 12",
        f"tasks; none over the 4 of its during-mutation study, fewer than {MIN_CLUSTERS}); the",
        "headline study (rb3c) published no rows, so its per-method figures are printed as",
        "published, without intervals. Ours are as planned (faults that did not happen as",
        "planned are left out), the paper's over all pairs.",
        "",
        "### How our tasks and pairs differ from the paper's",
        "",
        *comparison.tasks_lines(valid, run.summary, reference, head),
    ]
    if head is not None:
        lines += [
            "",
            "### The paper's headline, as published and adjusted",
            "",
            "Its TEST split, all methods pooled, from its per-task counts (reference data). "
            "Adjusted: without RB-CLOUD-004, whose fault never fired (its fault runs ended "
            "exactly as its controls), and without RB-STOR-005's failed controls.",
            "",
            *comparison.headline_lines(head),
        ]
    lines += [
        "",
        "### The paper's contrasts (CRSR), re-tested",
        "",
        "Over every cell (as the paper ran them) and over the cells where both methods apply "
        "(where B2 takes a key on the call the fault hits); Holm over the three contrasts of "
        "each scope.",
        "",
        *comparison.hypotheses_lines(
            found, published["method_contrasts_holm"], comparison.identical_on_every_pair(valid)
        ),
        "",
        "### Every published figure beside ours",
        "",
        *comparison.side_by_side(figs, ours),
        "",
        f"![Ours beside the paper]({rel}/paper_vs_ours.png)",
    ]
    return lines, comparison.facts(head, figs, found)


def _runtime_sections(run: PartRun, base: PartRun) -> list[str]:
    ids = {p.pair_id for p in run.pairs}
    same = [p for p in base.pairs if p.pair_id in ids]
    result = compare(same, run.pairs)
    diffs = result["differences"]
    lines = [
        "",
        f"## Runtimes agree: {run.part.title}",
        "",
        f"The same pairs on `{base.part.name}` and `{run.part.name}`, matched by pair id and "
        "compared on everything a verdict rests on (success, finish status, effects, how the "
        "fault fired, the final state's hash, every action and observation): "
        f"**{result['identical']} of {result['compared']} identical** "
        f"({result['skipped_infra_errors']} skipped for an infrastructure error).",
    ]
    for field, d in diffs.items():
        lines.append(f"- `{field}` differs in {d['pairs']} pairs, e.g. {', '.join(d['examples'])}")
    lines += ["", f"| method | metric | {base.part.name} | {run.part.name} |", "|---|---|---|---|"]
    a, b = summarize(same)["by"]["method"], run.summary["by"]["method"]
    for method in sorted(a.keys() & b.keys()):
        for metric in ("control_rate", "crsr", "crsr_aware", "der"):
            lines.append(
                f"| {method} | {metric} | {tables.rate_text(a[method][metric])} "
                f"| {tables.rate_text(b[method][metric])} |"
            )
    return lines
