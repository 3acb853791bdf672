"""Write summary.json, summary.csv, metrics.csv, report.md and plots from trials.jsonl.

summary.csv is the long table the contract names (one row per group and metric, with all
intervals); metrics.csv keeps the earlier wide table (one row per group, point estimates).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from undobench_gym.executors.meta import META_FILE, retry_counts
from undobench_gym.trials import read_trials

from .metrics import INDICATORS, Pair, is_infra_error, rate
from .summary import TOST_MARGIN, summarize

COLUMNS = ("N", "D", "F", "C", *INDICATORS)
LONG_COLUMNS = (
    "group",
    "value",
    "metric",
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
)
HEADLINE = ("control_rate", "rsr", "crsr", "der", "mer", "eor", "unknown_outcome_rate")
PASS_K_SHOWN = (1, 2, 3, 5, 10, 20)
CROSS = ("control_rate", "crsr", "der")


def _cell(value: Any) -> str:
    if isinstance(value, dict):
        v = value["value"]
        return "null" if v is None else f"{v:.3f}"
    return str(value)


def _ci(ci: list[float] | None) -> str:
    return "-" if ci is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def _p(p: float | None) -> str:
    return "-" if p is None else f"{p:.4g}"


def _rows(summary: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    rows = [("overall", "all", summary["overall"])]
    for group, values in summary["by"].items():
        rows.extend((group, name, m) for name, m in values.items())
    return rows


def _write_csvs(out: Path, summary: dict[str, Any]) -> None:
    with (out / "metrics.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["group", "value", *COLUMNS])
        for group, name, m in _rows(summary):
            w.writerow([group, name, *(_cell(m[c]) for c in COLUMNS)])
    with (out / "summary.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(LONG_COLUMNS)
        for group, name, m in _rows(summary):
            for metric in INDICATORS:
                r = m[metric]
                cis = [r.get(k) or [None, None] for k in ("wilson", "bootstrap", "bca")]
                w.writerow(
                    [group, name, metric, r["value"], r["num"], r["den"]]
                    + [x for ci in cis for x in ci]
                    + [r.get("empty_resamples"), r.get("reason")]
                )


def _cross(pairs: list[Pair], key: str) -> list[str]:
    """Competence, recovery and duplicates by method and `key`, with intervals."""
    cells: dict[tuple[str, str], list[Pair]] = {}
    for p in pairs:
        cells.setdefault((str(p.get("method")), str(p.get(key))), []).append(p)
    lines = [
        f"| method | {key} | metric | value | num/den | Wilson | cluster bootstrap | BCa |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (method, value), cell in sorted(cells.items()):
        for metric in CROSS:
            r = rate(cell, metric)
            lines.append(
                f"| {method} | {value} | {metric} | {_cell(r)} | {r['num']}/{r['den']} "
                f"| {_ci(r['wilson'])} | {_ci(r['bootstrap'])} | {_ci(r['bca'])} |"
            )
    return lines


def _markdown(trials: list[Pair], summary: dict[str, Any], plots: list[Path]) -> str:
    valid = [p for p in trials if not is_infra_error(p)]
    o = summary["overall"]
    lines = [
        "# UndoBench run report",
        "",
        f"{len(trials)} paired trials.",
        "",
        f"N = {o['N']} pairs ({o['infra_errors']} infrastructure errors left out), "
        f"D = {o['D']}, F = {o['F']}, C = {o['C']}.",
        "",
        "| group | value | " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * (len(COLUMNS) + 2),
    ]
    for group, name, m in _rows(summary):
        lines.append(f"| {group} | {name} | " + " | ".join(_cell(m[c]) for c in COLUMNS) + " |")
    lines += ["", "## Intervals (95%) by method", ""]
    lines += ["| method | metric | value | num/den | Wilson | cluster bootstrap | BCa |"]
    lines += ["|---|---|---|---|---|---|---|"]
    for name, m in [("all", o), *summary["by"]["method"].items()]:
        for metric in HEADLINE:
            r = m[metric]
            lines.append(
                f"| {name} | {metric} | {_cell(r)} | {r['num']}/{r['den']} | {_ci(r['wilson'])} "
                f"| {_ci(r['bootstrap'])} | {_ci(r['bca'])} |"
            )
    nulls = sorted({(k, r["reason"]) for k, r in o.items() if isinstance(r, dict) and r["reason"]})
    if nulls:
        lines += ["", "Null overall: " + "; ".join(f"`{k}` ({why})" for k, why in nulls) + "."]
    for key in ("model", "boundary"):
        if len({str(p.get(key)) for p in valid}) > 1 or key == "boundary":
            lines += ["", f"## By method and {key}", "", *_cross(valid, key)]
    if summary["contrasts"]:
        lines += [
            "",
            "## Method contrasts",
            "",
            "Paired over tasks: `p` swaps the methods within each task (exact when few tasks",
            "differ), Holm-adjusted over all contrasts; McNemar on matched pairs.",
            "",
            "| metric | a | b | diff | 95% CI | BCa | p | p (Holm) | p (McNemar) | discordant |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for c in summary["contrasts"]:
            mc = c["mcnemar"]
            lines.append(
                f"| {c['metric']} | {c['a']} | {c['b']} | {c['diff']:+.3f} | {_ci(c['ci'])} "
                f"| {_ci(c['ci_bca'])} | {_p(c['p'])} | {_p(c['p_holm'])} "
                f"| {_p(c['p_mcnemar'])} | {mc['a_only']}/{mc['b_only']} |"
            )
    t = summary["tost"]
    if t["comparisons"]:
        lines += ["", f"## Equivalence of competence (TOST, margin ±{t['margin']:.2f})", ""]
        lines += ["| a | b | diff | p | equivalent |", "|---|---|---|---|---|"]
        for c in t["comparisons"]:
            lines.append(
                f"| {c['a']} | {c['b']} | {c['diff']:+.3f} | {_p(c['p'])} | {c['equivalent']} |"
            )
    pk = summary["pass_k"]["by_method"]
    if pk:
        top = max(v["max_k"] for v in pk.values())
        ks = [k for k in PASS_K_SHOWN if k < top] + [top]
        lines += ["", "## pass^k over seeds (fault runs; control in parentheses)", ""]
        lines += ["| method | tasks | " + " | ".join(f"k={k}" for k in ks) + " |"]
        lines += ["|---|---|" + "---|" * len(ks)]
        for method, v in pk.items():
            cells = []
            for k in ks:
                e = v["k"].get(str(k))
                cells.append("-" if e is None else f"{e['fault']:.3f} ({e['control']:.3f})")
            lines.append(f"| {method} | {v['tasks']} | " + " | ".join(cells) + " |")
    if plots:
        lines += ["", "## Plots", ""] + [f"![{p.stem}]({p.name})" for p in plots]
    return "\n".join(lines) + "\n"


def retries(out: Path, trials: list[dict[str, Any]]) -> dict[str, Any]:
    """The retry policy the sweep ran under (from run_meta.json, when the runner wrote
    one) and what it did, counted over the recorded pairs."""
    try:
        policy = json.loads((out / META_FILE).read_text(encoding="utf-8")).get("retry_policy")
    except (OSError, ValueError):
        policy = None
    return {"policy": policy, **retry_counts(trials)}


def write_reports(
    out: Path, *, tost_margin: float = TOST_MARGIN, plots: bool = True
) -> dict[str, Any]:
    trials = read_trials(out / "trials.jsonl")
    summary = summarize(trials, tost_margin=tost_margin)
    summary["retries"] = retries(out, trials)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    _write_csvs(out, summary)
    written: list[Path] = []
    if plots:
        from .plots import write_plots

        written = write_plots(trials, out)
    (out / "report.md").write_text(_markdown(trials, summary, written))
    return summary
