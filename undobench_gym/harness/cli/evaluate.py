"""The evaluation's commands over a run directory: `report`, `inspect`, `import-reference`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from undobench_gym.core.extras import require
from undobench_gym.harness.cli.args import margin, run_dir
from undobench_gym.harness.cli.summary import print_summary


def add_report(sub: Any) -> None:
    rep = sub.add_parser("report", help="recompute summary, report.md and CSV from trials.jsonl")
    rep.add_argument("dir")
    rep.add_argument("--json", action="store_true", help="print the summary as JSON")
    rep.add_argument(
        "--tost-margin",
        type=margin,
        default=0.10,
        help="equivalence margin of the TOST on control_rate (default 0.10 = ±10 pp)",
    )
    rep.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    rep.add_argument(
        "--html",
        action="store_true",
        help="also write report.html: one self-contained page with a pair viewer",
    )
    rep.set_defaults(func=report)


def add_inspect(sub: Any) -> None:
    ins = sub.add_parser("inspect", help="show one pair's two transcripts side by side")
    ins.add_argument("dir", help="run directory (with trials.jsonl)")
    ins.add_argument("--pair", required=True, help="pair id (or a unique prefix)")
    ins.add_argument("--width", type=int, default=180, help="output width in columns")
    ins.add_argument("--limit", type=int, default=60, help="characters per argument/body")
    ins.set_defaults(func=inspect)


def add_import_reference(sub: Any) -> None:
    imp = sub.add_parser(
        "import-reference", help="reference paired-trial CSV(s) -> trials.jsonl (and reports)"
    )
    imp.add_argument("path", help="a CSV file, or a directory searched for paired-trial CSVs")
    imp.add_argument("--out", required=True, help="run directory to write")
    imp.add_argument("--no-report", action="store_true", help="write trials.jsonl only")
    imp.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    imp.set_defaults(func=import_reference)


# The handlers import the evaluation inside the function: `undobench --help` stays fast.


def report(args: argparse.Namespace) -> int:
    require("eval", "`undobench report`")
    from undobench_gym.evaluation.report import write_reports

    out = run_dir(args.dir)
    summary = write_reports(
        out, tost_margin=args.tost_margin, plots=not args.no_plots, html=args.html
    )
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print_summary(summary, out)
        if args.html:
            print(f"wrote {out / 'report.html'} (open it in a browser, or: undobench view {out})")
    return 0


def inspect(args: argparse.Namespace) -> int:
    from rich.console import Console

    from undobench_gym.core.trials import read_trials
    from undobench_gym.evaluation.inspection import find_pair, render

    pair = find_pair(read_trials(run_dir(args.dir) / "trials.jsonl"), args.pair)
    render(pair, Console(width=args.width), limit=args.limit)
    return 0


def import_reference(args: argparse.Namespace) -> int:
    from undobench_gym.evaluation.reference import import_reference as read_reference
    from undobench_gym.evaluation.report import write_reports

    out = Path(args.out)
    counts = read_reference(Path(args.path), out)
    print(
        f"read {counts['rows']} rows from {counts['files']} file(s); "
        f"wrote {counts['written']} new pairs to {out / 'trials.jsonl'}"
    )
    if not args.no_report:
        require("eval", "the reports", hint=", or pass --no-report")
        write_reports(out, plots=not args.no_plots)
        print(f"wrote {out / 'summary.json'}, {out / 'summary.csv'}, {out / 'report.md'}")
    return 0
