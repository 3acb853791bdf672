"""The evaluation package's CLI subcommands: report (options), inspect, import-reference
and audit. `register(sub)` adds them to `undobench`'s subparsers."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from undobench_gym.errors import UndoBenchError

SHOWN = 40  # problems and notes printed per audit; --json prints them all


def _run_dir(path: str) -> Path:
    out = Path(path)
    if not (out / "trials.jsonl").exists():
        raise UndoBenchError(f"{out / 'trials.jsonl'} not found: is {out} a run directory?")
    return out


def _margin(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError("the margin is a proportion in (0, 1), e.g. 0.10")
    return value


def _report(args: argparse.Namespace) -> int:
    from undobench_gym.cli import _print_summary

    from .report import write_reports

    out = _run_dir(args.dir)
    summary = write_reports(out, tost_margin=args.tost_margin, plots=not args.no_plots)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        _print_summary(summary, out)
    return 0


def _inspect(args: argparse.Namespace) -> int:
    from rich.console import Console

    from undobench_gym.trials import read_trials

    from .inspection import find_pair, render

    pair = find_pair(read_trials(_run_dir(args.dir) / "trials.jsonl"), args.pair)
    render(pair, Console(width=args.width), limit=args.limit)
    return 0


def _import(args: argparse.Namespace) -> int:
    from .reference import import_reference
    from .report import write_reports

    out = Path(args.out)
    counts = import_reference(Path(args.path), out)
    print(
        f"read {counts['rows']} rows from {counts['files']} file(s); "
        f"wrote {counts['written']} new pairs to {out / 'trials.jsonl'}"
    )
    if not args.no_report:
        write_reports(out, plots=not args.no_plots)
        print(f"wrote {out / 'summary.json'}, {out / 'summary.csv'}, {out / 'report.md'}")
    return 0


def _print_audit(result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(result, indent=2))
        return
    status = "ok" if result["ok"] else f"{len(result['problems'])} problem(s)"
    counts = ", ".join(f"{k}={v}" for k, v in sorted(result["counts"].items()))
    print(f"audit {result['audit']}: {status}; {counts or 'nothing to audit'}")
    for label, items in (("problem", result["problems"]), ("note", result["notes"])):
        for line in items[:SHOWN]:
            print(f"  {label}: {line}")
        if len(items) > SHOWN:
            print(f"  … {len(items) - SHOWN} more {label}s (use --json)")


def _audit_run(args: argparse.Namespace) -> int:
    from undobench_gym.trials import read_trials

    from .audits import AUDITS

    trials = read_trials(_run_dir(args.dir) / "trials.jsonl")
    result = AUDITS[args.audit](trials)
    _print_audit(result.as_dict(), args.json)
    return 0 if result.ok else 1


def _audit_oracles(args: argparse.Namespace) -> int:
    from .conformance import run_conformance

    workflows = args.workflows.split(",") if args.workflows else None
    only = set(args.only.split(",")) if args.only else None
    report = run_conformance(workflows, only)
    counts = report.counts
    bad = [r for r in report.results if r.status not in ("pass",)]
    if args.json:
        print(
            json.dumps(
                {
                    "ok": report.ok,
                    "counts": counts,
                    "results": [r.__dict__ for r in report.results],
                    "skipped": report.skipped,
                },
                indent=2,
            )
        )
    else:
        print("oracle conformance: " + ", ".join(f"{k}={v}" for k, v in counts.items()))
        for r in bad:
            failed = f" failed: {', '.join(r.failed)}" if r.failed else ""
            print(f"  {r.status}: {r.workflow} {r.case}{failed} {r.message}".rstrip())
    return 0 if report.ok else 1


def _audit_adversarial(args: argparse.Namespace) -> int:
    from undobench_gym.catalog import find_workflow

    from .adversarial import BEHAVIOURS, run_suite, table

    workflows = [find_workflow(w) for w in args.workflows.split(",")] if args.workflows else None
    behaviours = tuple(args.only.split(",")) if args.only else BEHAVIOURS
    unknown = set(behaviours) - set(BEHAVIOURS)
    if unknown:
        print(f"unknown behaviours {sorted(unknown)}; known: {', '.join(BEHAVIOURS)}")
        return 2
    rows = run_suite(workflows, behaviours, seed=args.seed)
    wrong = [r for r in rows if not r.agrees]
    if args.json:
        print(json.dumps({"ok": not wrong, "rows": [r.__dict__ for r in rows]}, indent=2))
    else:
        print(table(rows))
        print(f"adversarial suite: {len(rows)} episodes, {len(wrong)} wrong verdicts")
        for r in wrong:
            print(
                f"  {r.behaviour} {r.workflow}:{r.scenario}: expected {r.expected}, "
                f"got {r.observed}"
            )
    return 0 if not wrong else 1


def register(sub: Any) -> None:
    """Add the evaluation commands to `undobench`; extends the existing `report` parser."""
    rep = sub.choices["report"]
    rep.add_argument(
        "--tost-margin",
        type=_margin,
        default=0.10,
        help="equivalence margin of the TOST on control_rate (default 0.10 = ±10 pp)",
    )
    rep.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    rep.set_defaults(func=_report)

    ins = sub.add_parser("inspect", help="show one pair's two transcripts side by side")
    ins.add_argument("dir", help="run directory (with trials.jsonl)")
    ins.add_argument("--pair", required=True, help="pair id (or a unique prefix)")
    ins.add_argument("--width", type=int, default=180, help="output width in columns")
    ins.add_argument("--limit", type=int, default=60, help="characters per argument/body")
    ins.set_defaults(func=_inspect)

    imp = sub.add_parser(
        "import-reference", help="reference paired-trial CSV(s) -> trials.jsonl (and reports)"
    )
    imp.add_argument("path", help="a CSV file, or a directory searched for paired-trial CSVs")
    imp.add_argument("--out", required=True, help="run directory to write")
    imp.add_argument("--no-report", action="store_true", help="write trials.jsonl only")
    imp.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    imp.set_defaults(func=_import)

    aud = sub.add_parser("audit", help="validity audits (exit 1 when one finds a problem)")
    kinds = aud.add_subparsers(dest="audit", required=True)
    helps = {
        "fired": "faults that did not fire, and whether the agent reached the target call",
        "prefix": "paired-prefix equivalence of control and fault episodes",
        "wire": "every committed mutation crossed the proxy as a forwarded mutating call",
    }
    for name, text in helps.items():
        a = kinds.add_parser(name, help=text)
        a.add_argument("dir", help="run directory (with trials.jsonl)")
        a.add_argument("--json", action="store_true", help="print the audit as JSON")
        a.set_defaults(func=_audit_run)
    o = kinds.add_parser("oracles", help="oracle conformance suite against the real services")
    o.add_argument("--workflows", help="comma-separated workflow ids (default: all)")
    o.add_argument("--only", help="case kinds, e.g. perfect,skip-effect,never-retry")
    o.add_argument("--json", action="store_true", help="print every case as JSON")
    o.set_defaults(func=_audit_oracles)
    adv = kinds.add_parser(
        "adversarial",
        help="real agents' behaviours after a fault (rewording, fresh keys, giving up, ...) "
        "and the verdict each must get",
    )
    adv.add_argument("--workflows", help="comma-separated workflow ids (default: all)")
    adv.add_argument("--only", help="behaviours, e.g. reworded_resend,give_up")
    adv.add_argument("--seed", type=int, default=1, help="episode seed (default 1)")
    adv.add_argument("--json", action="store_true", help="print every episode as JSON")
    adv.set_defaults(func=_audit_adversarial)
