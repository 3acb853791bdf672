"""`undobench audit`: the validity audits of a run, and the oracle and adversarial suites.

Each exits 1 when it finds a problem, so scripts and CI can gate on it.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from undobench_gym.harness.cli.args import run_dir

SHOWN = 40  # problems and notes printed per audit; --json prints them all
#: The audits of a run directory: name -> help.
RUN_AUDITS = {
    "fired": "faults that did not fire, and whether the agent reached the target call",
    "prefix": "paired-prefix equivalence of control and fault episodes",
    "wire": "every committed mutation crossed the proxy as a forwarded mutating call",
}


def add(sub: Any) -> None:
    aud = sub.add_parser("audit", help="validity audits (exit 1 when one finds a problem)")
    kinds = aud.add_subparsers(dest="audit", required=True)
    for name, text in RUN_AUDITS.items():
        a = kinds.add_parser(name, help=text)
        a.add_argument("dir", help="run directory (with trials.jsonl)")
        a.add_argument("--json", action="store_true", help="print the audit as JSON")
        a.set_defaults(func=audit_run)
    o = kinds.add_parser("oracles", help="oracle conformance suite against the real services")
    o.add_argument("--workflows", help="comma-separated workflow ids (default: all)")
    o.add_argument("--only", help="case kinds, e.g. perfect,skip-effect,never-retry")
    o.add_argument("--json", action="store_true", help="print every case as JSON")
    o.set_defaults(func=audit_oracles)
    adv = kinds.add_parser(
        "adversarial",
        help="real agents' behaviours after a fault (rewording, fresh keys, giving up, ...) "
        "and the verdict each must get",
    )
    adv.add_argument("--workflows", help="comma-separated workflow ids (default: all)")
    adv.add_argument("--only", help="behaviours, e.g. reworded_resend,give_up")
    adv.add_argument("--seed", type=int, default=1, help="episode seed (default 1)")
    adv.add_argument("--json", action="store_true", help="print every episode as JSON")
    adv.set_defaults(func=audit_adversarial)


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


# The handlers import the evaluation inside the function: `undobench --help` stays fast.


def audit_run(args: argparse.Namespace) -> int:
    from undobench_gym.core.trials import read_trials
    from undobench_gym.evaluation.audits import AUDITS

    trials = read_trials(run_dir(args.dir) / "trials.jsonl")
    result = AUDITS[args.audit](trials)
    _print_audit(result.as_dict(), args.json)
    return 0 if result.ok else 1


def audit_oracles(args: argparse.Namespace) -> int:
    from undobench_gym.evaluation.conformance import run_conformance

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


def audit_adversarial(args: argparse.Namespace) -> int:
    from undobench_gym.core.catalog import find_workflow
    from undobench_gym.evaluation.adversarial import BEHAVIOURS, run_suite, table

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
