"""The summary table printed after `run`, `report` and `import-reference`: one place."""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: metric: column header (short, so the table fits 80 columns)
COLUMNS = {
    "control_rate": "ctrl",
    "rsr": "rsr",
    "crsr": "crsr",
    "crsr_aware": "crsr_aw",
    "der": "der",
    "uer": "uer",
    "mer": "mer",
    "eor": "eor",
    "abstention_rate": "abst",
    "fired_rate": "fired",
}


def print_summary(summary: dict[str, Any], out: Path) -> None:
    """Overall and per-method rates; report.md and summary.json have every metric."""
    # rich is imported here, not at the top: `undobench --help` stays fast.
    from rich import box
    from rich.console import Console
    from rich.table import Table

    o = summary["overall"]
    table = Table(
        title=f"{o['N']} pairs: N={o['N']} D={o['D']} F={o['F']} C={o['C']}",
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
        pad_edge=False,
        show_edge=False,
        caption="report.md and summary.json have every metric (urr, the aware rsr, ...)",
    )
    table.add_column("method", min_width=6, no_wrap=True)
    for header in COLUMNS.values():
        table.add_column(header, justify="right", min_width=max(4, len(header)), no_wrap=True)
    rows = [("all", o), *summary["by"]["method"].items()]
    for name, m in rows:
        table.add_row(
            name,
            *(
                "-" if m.get(c, {}).get("value") is None else f"{m[c]['value']:.2f}"
                for c in COLUMNS
            ),
        )
    console = Console()
    console.print(table)
    excluded = {k: v for k, v in (o.get("excluded") or {}).items() if v}
    if excluded:
        console.print(
            "recovery metrics count the pairs whose fault happened as planned; excluded: "
            + ", ".join(f"{k} {v}" for k, v in sorted(excluded.items()))
            + " (summary.json 'unconditioned' has the figures over all pairs)"
        )
    b = summary.get("agent_behaviour") or {}
    if b.get("actions"):
        line = (
            f"agent: {b['valid_actions']}/{b['actions']} actions schema-valid "
            f"({b['valid_action_rate']:.0%}), median {b['turns_per_episode_median']} turns an "
            f"episode, {b['seconds_per_pair_median']} s a pair"
        )
        if b.get("completion_tokens") is not None:
            line += (
                f"; {b['requests']} model requests, {b['completion_tokens']} tokens out "
                f"({b['completion_tokens_per_s']} per second of pair time)"
            )
            if b.get("replayed_replies"):
                line += f", {b['replayed_replies']} replies replayed before faults"
        console.print(line)
    console.print(f"wrote {out / 'trials.jsonl'}, {out / 'summary.json'}, {out / 'report.md'}")
