"""`undobench tasks`: list the workflow catalogue (a table, --json or --markdown)."""

from __future__ import annotations

import argparse
import json
from typing import Any


def add(sub: Any) -> None:
    t = sub.add_parser("tasks", help="list the workflow catalogue")
    t.add_argument("--split", choices=["dev", "val", "test", "stress"])
    t.add_argument("--json", action="store_true", help="print JSON")
    t.add_argument(
        "--markdown", action="store_true", help="print the catalogue document (docs/catalogue.md)"
    )
    t.set_defaults(func=tasks)


def tasks(args: argparse.Namespace) -> int:
    # Imports inside the handler keep `undobench --help` fast.
    from undobench_gym.harness.cli.catalogue import catalogue_markdown, catalogue_rows

    rows = catalogue_rows(args.split)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if args.markdown:
        print(catalogue_markdown(rows))
        return 0
    _print_table(rows, args.split)
    return 0


def _print_table(rows: list[dict[str, Any]], split: str | None) -> None:
    """One row per scenario, the workflow's columns on its first row only."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"UndoBench workflows{' (' + split + ')' if split else ''}")
    for col in ("workflow", "domain", "split", "kind", "scenario", "boundary"):
        table.add_column(col, no_wrap=col in ("workflow", "scenario", "boundary"))
    for r in rows:
        for i, sc in enumerate(r["scenarios"]):
            first = i == 0
            boundary = sc["boundary"] + (" (ambiguous)" if sc["ambiguous"] else "")
            table.add_row(
                r["id"] if first else "",
                r["domain"] if first else "",
                r["split"] if first else "",
                r["kind"] if first else "",
                sc["id"],
                boundary,
                end_section=i == len(r["scenarios"]) - 1,
            )
    Console().print(table)
