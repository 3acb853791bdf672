"""Write summary.json, summary.csv, metrics.csv, report.md and plots from trials.jsonl.

summary.csv is the long table the contract names (one row per group, metric and scope,
with all intervals: scope `as_planned` for a recovery metric over the pairs whose fault
happened as planned, `all` for all valid pairs, `infra_as_failure` for the sensitivity
row); metrics.csv keeps the wide table (one row per group, point estimates), with the
unconditioned figures (`unconditioned.<metric>`) and the excluded counts beside them.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from undobench_gym.evaluation.agent_behaviour import agent_behaviour
from undobench_gym.evaluation.hints import hint_contrasts, hint_lines
from undobench_gym.evaluation.html import write_html
from undobench_gym.evaluation.indicators import (
    CONDITIONED,
    EXCLUSION_REASONS,
    INDICATORS,
    Pair,
    is_infra_error,
)
from undobench_gym.evaluation.metrics import SENSITIVITY_METRICS, rate
from undobench_gym.evaluation.plots import write_plots
from undobench_gym.evaluation.records import PairLike, as_records, load_records
from undobench_gym.evaluation.report_sections import (
    boot_text,
    cell_text,
    ci_text,
    contrast_lines,
    pass_k_lines,
    sensitivity_lines,
    tost_lines,
)
from undobench_gym.evaluation.run_meta import META_FILE, retry_counts
from undobench_gym.evaluation.schedules import fault_lines
from undobench_gym.evaluation.summary import TOST_MARGIN, coin, mechanism, summarize
from undobench_gym.evaluation.units import effective_text

COLUMNS = ("N", "D", "F", "C", *INDICATORS)
#: a rate's effective N (units.py), as summary.csv columns `effective.<key>`
EFFECTIVE = ("clusters", "cells", "distinct_outcomes", "deterministic", "unit", "units")
EXTRA_COLUMNS = (
    "as_planned",
    *(f"excluded.{r}" for r in EXCLUSION_REASONS),
    "excluded.other",
    *(f"unconditioned.{m}" for m in CONDITIONED),
)
LONG_COLUMNS = (
    "group",
    "value",
    "metric",
    "scope",
    "estimate",
    "num",
    "den",
    "wilson_lo",
    "wilson_hi",
    "bootstrap_lo",
    "bootstrap_hi",
    "bca_lo",
    "bca_hi",
    "empty_resamples",
    "reason",
    "bootstrap_reason",
    *(f"effective.{k}" for k in EFFECTIVE),
)
HEADLINE = (
    "control_rate",
    "rsr",
    "crsr",
    "rsr_aware",
    "crsr_aware",
    "der",
    "uer",
    "mer",
    "eor",
    "abstention_rate",
    "unknown_outcome_rate",
)
#: Shown as planned and over all pairs side by side in the conditioning table.
SIDE_BY_SIDE = ("rsr", "crsr", "crsr_aware", "der", "uer", "abstention_rate")
CROSS = ("control_rate", "crsr", "crsr_aware", "der", "uer")
CROSS_KEYS: dict[str, Callable[[Pair], Any]] = {
    "model": lambda p: p.model,
    "boundary": lambda p: p.boundary,
    "mechanism": mechanism,
    "coin": coin,
}


def _rows(summary: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    rows = [("overall", "all", summary["overall"])]
    for group, values in summary["by"].items():
        rows.extend((group, name, m) for name, m in values.items())
    return rows


def _other(excluded: dict[str, Any]) -> int:
    return sum(v or 0 for k, v in excluded.items() if k not in EXCLUSION_REASONS)


def _extra(m: dict[str, Any]) -> list[str]:
    ex = m["excluded"]
    return [
        cell_text(m["conditioning"]["as_planned"]),
        *(cell_text(ex.get(r)) for r in EXCLUSION_REASONS),
        str(_other(ex)),
        *(cell_text(m["unconditioned"][k]) for k in CONDITIONED),
    ]


def _long(group: str, name: str, metric: str, scope: str, r: dict[str, Any]) -> list[Any]:
    cis = [r.get(k) or [None, None] for k in ("wilson", "bootstrap", "bca")]
    return (
        [group, name, metric, scope, r["value"], r["num"], r["den"]]
        + [x for ci in cis for x in ci]
        + [r.get("empty_resamples"), r.get("reason"), r.get("bootstrap_reason")]
        + [(r.get("effective") or {}).get(k) for k in EFFECTIVE]
    )


def _write_csvs(out: Path, summary: dict[str, Any]) -> None:
    with (out / "metrics.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["group", "value", *COLUMNS, *EXTRA_COLUMNS])
        for group, name, m in _rows(summary):
            w.writerow([group, name, *(cell_text(m[c]) for c in COLUMNS), *_extra(m)])
    with (out / "summary.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(LONG_COLUMNS)
        for group, name, m in _rows(summary):
            applied = m["conditioning"]["applied"]
            for metric in INDICATORS:
                conditioned = applied and metric in CONDITIONED
                scope = "as_planned" if conditioned else "all"
                w.writerow(_long(group, name, metric, scope, m[metric]))
                if conditioned:
                    w.writerow(_long(group, name, metric, "all", m["unconditioned"][metric]))
        sens = summary["sensitivity"]["infra_as_failure"]
        for name, s in [("all", sens["overall"]), *sens["method"].items()]:
            for metric in SENSITIVITY_METRICS:
                row = _long("sensitivity", name, metric, "infra_as_failure", s[metric])
                w.writerow(row)


def _cross(pairs: list[Pair], key: str, condition: bool) -> list[str]:
    """Competence, recovery and harm by method and `key`, with intervals."""
    cells: dict[tuple[str, str], list[Pair]] = {}
    for p in pairs:
        value = CROSS_KEYS[key](p)
        if value is not None:
            cells.setdefault((str(p.method), str(value)), []).append(p)
    lines = [
        f"| method | {key} | metric | value | num/den | Wilson | cluster bootstrap | BCa "
        "| effective N |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (method, value), cell in sorted(cells.items()):
        for metric in CROSS:
            r = rate(cell, metric, condition=condition)
            lines.append(
                f"| {method} | {value} | {metric} | {cell_text(r)} | {r['num']}/{r['den']} "
                f"| {ci_text(r['wilson'])} | {boot_text(r)} | {boot_text(r, 'bca')} "
                f"| {effective_text(r['effective'])} |"
            )
    return lines


def _excluded_text(m: dict[str, Any]) -> str:
    ex = m["excluded"]
    return ", ".join(f"{k} {cell_text(v)}" for k, v in ex.items())


def _conditioning_lines(summary: dict[str, Any]) -> list[str]:
    o = summary["overall"]
    cond = o["conditioning"]
    if cond["applied"]:
        head = (
            f"Recovery metrics ({', '.join(CONDITIONED)}) are over the {cond['as_planned']} "
            f"pairs whose fault happened as planned (D = {cond['D']}, F = {cond['F']}, "
            f"C = {cond['C']}); excluded: {_excluded_text(o)}."
        )
    else:
        head = f"Conditioning {cond['reason']}; excluded: {_excluded_text(o)}."
    if cond["applied"] and cond["reason"]:
        head += f" Note: {cond['reason']}."
    cols = [f"{m} | {m} (all)" for m in SIDE_BY_SIDE]
    reasons = [*EXCLUSION_REASONS, "other"]
    lines = [
        head,
        "",
        "## Conditioning: pairs whose fault happened as planned vs all pairs",
        "",
        "| group | value | N | as planned | "
        + " | ".join(reasons)
        + " | "
        + " | ".join(cols)
        + " |",
        "|" + "---|" * (4 + len(reasons) + 2 * len(SIDE_BY_SIDE)),
    ]
    for group, name, m in _rows(summary):
        ex = m["excluded"]
        counts = [cell_text(ex.get(r)) for r in EXCLUSION_REASONS] + [str(_other(ex))]
        values = [f"{cell_text(m[k])} | {cell_text(m['unconditioned'][k])}" for k in SIDE_BY_SIDE]
        lines.append(
            f"| {group} | {name} | {m['N']} | {cell_text(m['conditioning']['as_planned'])} | "
            + " | ".join(counts)
            + " | "
            + " | ".join(values)
            + " |"
        )
    return lines


def _markdown(trials: list[Pair], summary: dict[str, Any], plots: list[Path]) -> str:
    valid = [p for p in trials if not is_infra_error(p)]
    o = summary["overall"]
    applied = bool(o["conditioning"]["applied"])
    lines = [
        "# UndoBench run report",
        "",
        f"{len(trials)} paired trials.",
        "",
        f"N = {o['N']} pairs ({o['infra_errors']} infrastructure errors left out), "
        f"D = {o['D']}, F = {o['F']}, C = {o['C']}; truncated episodes (agent failures, "
        f"kept in N): control {o['truncated']['control']}, fault {o['truncated']['fault']}.",
        "",
        *_conditioning_lines(summary),
        "",
        "## Metrics (recovery metrics as planned)",
        "",
        "| group | value | " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * (len(COLUMNS) + 2),
    ]
    for group, name, m in _rows(summary):
        lines.append(f"| {group} | {name} | " + " | ".join(cell_text(m[c]) for c in COLUMNS) + " |")
    lines += ["", "## Intervals (95%) by method", ""]
    lines += [
        "Cluster bootstrap: whole workflows resampled, none from fewer than 5 (`— (<5 "
        "clusters)`; Wilson beside it). Effective N: workflows, cells (workflow x scenario x "
        "method x model x framework x agent x coin) and the independent units: cells when "
        "every cell's seeds end alike (they copy, not replicate), else pairs.",
        "",
        "| method | metric | scope | value | num/den | Wilson | cluster bootstrap | BCa "
        "| effective N |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, m in [("all", o), *summary["by"]["method"].items()]:
        for metric in HEADLINE:
            shown = [("as planned" if applied and metric in CONDITIONED else "all", m[metric])]
            if applied and metric in CONDITIONED:
                shown.append(("all", m["unconditioned"][metric]))
            for scope, r in shown:
                lines.append(
                    f"| {name} | {metric} | {scope} | {cell_text(r)} | {r['num']}/{r['den']} "
                    f"| {ci_text(r['wilson'])} | {boot_text(r)} | {boot_text(r, 'bca')} "
                    f"| {effective_text(r['effective'])} |"
                )
    nulls = sorted({(k, o[k]["reason"]) for k in INDICATORS if o[k]["reason"]})
    if nulls:
        lines += ["", "Null overall: " + "; ".join(f"`{k}` ({why})" for k, why in nulls) + "."]
    for key in CROSS_KEYS:
        values = {str(CROSS_KEYS[key](p)) for p in valid if CROSS_KEYS[key](p) is not None}
        if len(values) > 1 or key in ("boundary", "mechanism"):
            lines += ["", f"## By method and {key}", "", *_cross(valid, key, applied)]
    lines += sensitivity_lines(summary)
    if summary["contrasts"]:
        lines += contrast_lines(summary)
    if summary["tost"]["comparisons"]:
        lines += tost_lines(summary["tost"])
    lines += hint_lines(summary)
    lines += fault_lines(summary)
    lines += pass_k_lines(summary)
    lines += ["", "## Assumptions", ""]
    lines += [f"- `{k}`: {v}" for k, v in summary["assumptions"].items()]
    if summary["notes"]:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in summary["notes"]]
    if plots:
        lines += ["", "## Plots", ""] + [f"![{p.stem}]({p.name})" for p in plots]
    return "\n".join(lines) + "\n"


def retries(out: Path, trials: Sequence[PairLike]) -> dict[str, Any]:
    """The retry policy the sweep ran under (from run_meta.json, when the runner wrote
    one) and what it did, counted over the recorded pairs."""
    try:
        policy = json.loads((out / META_FILE).read_text(encoding="utf-8")).get("retry_policy")
    except (OSError, ValueError):
        policy = None
    return {"policy": policy, **retry_counts(trials)}


def write_reports(
    out: Path,
    *,
    tost_margin: float = TOST_MARGIN,
    plots: bool = True,
    html: bool = False,
    trials: Sequence[PairLike] | None = None,
) -> dict[str, Any]:
    """Every report of the run directory; with `html`, report.html too (`evaluation.html`).
    `trials`: its trials.jsonl as already read (the sweep's driver has just read it)."""
    records = load_records(out / "trials.jsonl") if trials is None else as_records(trials)
    summary = summarize(records, tost_margin=tost_margin)
    summary["retries"] = retries(out, records)
    summary["agent_behaviour"] = agent_behaviour(records)
    summary["hints"] = hint_contrasts(records)  # the MCP hint ablation, when the run has one
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    _write_csvs(out, summary)
    written: list[Path] = []
    if plots:
        written = write_plots(records, out)
    (out / "report.md").write_text(_markdown(records, summary, written))
    if html:
        write_html(out, records, summary, written)
    return summary
