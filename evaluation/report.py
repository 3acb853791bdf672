"""Write summary.json, report.md and metrics.csv for a run directory from its trials.jsonl."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from undobench_gym.trials import read_trials

from .summary import summarize

COLUMNS = (
    "N",
    "D",
    "F",
    "C",
    "control_rate",
    "rsr",
    "crsr",
    "der",
    "mer",
    "urr",
    "eor",
    "eor_cond",
    "fired_rate",
    "abstention_rate",
)


def _cell(value: Any) -> str:
    if isinstance(value, dict):
        v = value["value"]
        return "null" if v is None else f"{v:.3f}"
    return str(value)


def _rows(summary: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    rows = [("overall", "all", summary["overall"])]
    for group, values in summary["by"].items():
        rows.extend((group, name, m) for name, m in values.items())
    return rows


def write_reports(out: Path) -> dict[str, Any]:
    trials = read_trials(out / "trials.jsonl")
    summary = summarize(trials)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    with (out / "metrics.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["group", "value", *COLUMNS])
        for group, name, m in _rows(summary):
            w.writerow([group, name, *(_cell(m[c]) for c in COLUMNS)])
    lines = [
        "# UndoBench run report",
        "",
        f"{len(trials)} paired trials.",
        "",
        "| group | value | " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * (len(COLUMNS) + 2),
    ]
    for group, name, m in _rows(summary):
        lines.append(f"| {group} | {name} | " + " | ".join(_cell(m[c]) for c in COLUMNS) + " |")
    if summary["contrasts"]:
        lines += [
            "",
            "## Method contrasts",
            "",
            "| metric | a | b | diff | 95% CI | p | p (Holm) |",
            "|---|---|---|---|---|---|---|",
        ]
        for c in summary["contrasts"]:
            lines.append(
                f"| {c['metric']} | {c['a']} | {c['b']} | {c['diff']:+.3f} | "
                f"{c['ci']} | {c['p']} | {c['p_holm']} |"
            )
    (out / "report.md").write_text("\n".join(lines) + "\n")
    return summary
