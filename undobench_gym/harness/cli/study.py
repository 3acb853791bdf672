"""`undobench study`: run a study's parts, render its document, verify a copy of its runs.

undobench study run                 # every part (resumable), then the document
undobench study render              # the document again, from the runs as they are
undobench study verify RUNS         # the runs' verdict digests against the manifest
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from undobench_gym.contract.errors import UndoBenchError
from undobench_gym.core.extras import require

DEFAULT_STUDY = "studies/paper-rerun"
DEFAULT_RUNS = "runs/study"
DEFAULT_DOC = "docs/study.md"


def add(sub: Any) -> None:
    s = sub.add_parser("study", help="run a study's parts and regenerate its document")
    ss = s.add_subparsers(dest="study_command", required=True)
    for name, helptext in (
        ("run", "run every part (skipping recorded pairs), then render the document"),
        ("render", "render the document and the manifest from the runs as they are"),
    ):
        c = ss.add_parser(name, help=helptext)
        c.add_argument("--study", default=DEFAULT_STUDY, help=f"default {DEFAULT_STUDY}")
        c.add_argument("--runs", default=DEFAULT_RUNS, help=f"default {DEFAULT_RUNS}")
        c.add_argument("--doc", default=DEFAULT_DOC, help=f"default {DEFAULT_DOC}")
        c.add_argument(
            "--reference",
            default=None,
            help="the paper's published data (default: the study's `reference`); '' for none",
        )
        if name == "run":
            c.add_argument("--parts", help="comma-separated part names (default: all)")
            c.add_argument("--quiet", action="store_true", help="no progress bars")
            c.add_argument(
                "--no-render",
                action="store_true",
                help="only run the parts (render later with `undobench study render`)",
            )
        c.set_defaults(func=run if name == "run" else render)
    v = ss.add_parser("verify", help="check a copy (or a re-run) of the runs against the manifest")
    v.add_argument("runs", nargs="?", default=DEFAULT_RUNS)
    v.add_argument("--study", default=DEFAULT_STUDY)
    v.set_defaults(func=verify)


def _command(args: argparse.Namespace) -> str:
    flags = []
    for flag, default in (
        ("study", DEFAULT_STUDY),
        ("runs", DEFAULT_RUNS),
        ("doc", DEFAULT_DOC),
        ("reference", None),
    ):
        value = getattr(args, flag)
        if value != default:
            flags += [f"--{flag}", value]
    return shlex.join(["undobench", "study", "run", *flags])


def run(args: argparse.Namespace) -> int:
    require("eval", "`undobench study`")
    from undobench_gym.evaluation.study.manifest import record_code
    from undobench_gym.evaluation.study.spec import load_study
    from undobench_gym.harness.cli import main

    study, directory = load_study(Path(args.study))
    wanted = set(args.parts.split(",")) if args.parts else None
    unknown = (wanted or set()) - {p.name for p in study.parts}
    if unknown:
        raise UndoBenchError(
            f"unknown parts {sorted(unknown)}; this study has {[p.name for p in study.parts]}"
        )
    for part in study.parts:
        if wanted is not None and part.name not in wanted:
            continue
        out = part.out(directory, Path(args.runs))
        print(f"study part {part.name} ({part.role}): {part.title} -> {out}", flush=True)
        argv = ["run", "--sweep", str(directory / part.sweep), "--out", str(out), "--no-report"]
        argv += part.run_args
        if (out / "trials.jsonl").is_file():
            argv.append("--resume")
        if args.quiet:
            argv.append("--quiet")
        out.mkdir(parents=True, exist_ok=True)
        record_code(out)
        with _environment(part.environment()):
            code = main(argv)
        if code:
            return code
        _check_infra(out)
    return 0 if args.no_render else render(args)


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """A part's LLM settings for the length of its sweep (the sweep's workers inherit them)."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


#: a part with more of its pairs lost to infrastructure errors than this is not a result
MAX_INFRA_SHARE = 0.01


def _check_infra(out: Path) -> None:
    """Stop before rendering a part the infrastructure ate: its figures would be over the
    few pairs that survived (`--resume` after the cause is fixed re-runs only those)."""
    from undobench_gym.core.trials import read_trials
    from undobench_gym.evaluation.indicators import is_infra_error

    records = read_trials(out / "trials.jsonl")
    failed = [r for r in records if is_infra_error(r)]
    if records and len(failed) > MAX_INFRA_SHARE * len(records):
        first = failed[0]["control"].get("error") or failed[0]["fault"].get("error")
        raise UndoBenchError(
            f"{out}: {len(failed)} of {len(records)} pairs ended in an infrastructure error "
            f"(first: {str(first)[:300]}); fix the cause, delete those records or the "
            "directory, and run again"
        )


def render(args: argparse.Namespace) -> int:
    require("eval", "`undobench study`")
    from undobench_gym.evaluation.study.document import render_study
    from undobench_gym.evaluation.study.spec import load_study

    study, directory = load_study(Path(args.study))
    # The study's own `reference` is relative to the study's folder; --reference to the cwd.
    if args.reference is None:
        reference = directory / study.reference if study.reference else None
    else:
        reference = Path(args.reference) if args.reference else None
    manifest = render_study(
        study,
        directory,
        Path(args.runs),
        doc=Path(args.doc),
        reference=reference,
        command=_command(args),
    )
    for name, entry in manifest["parts"].items():
        print(f"{name}: {entry['pairs']} pairs, verdict digest {entry['verdict_digest'][:16]}")
    print(f"wrote {args.doc} and {directory / 'manifest.json'}")
    return 0


def verify(args: argparse.Namespace) -> int:
    from undobench_gym.evaluation.study.manifest import MANIFEST
    from undobench_gym.evaluation.study.manifest import verify as check

    path = Path(args.study) / MANIFEST
    if not path.is_file():
        raise UndoBenchError(f"no {path}: render the study first")
    problems = check(json.loads(path.read_text(encoding="utf-8")), Path(args.runs))
    for p in problems:
        print(p)
    if not problems:
        print(f"{args.runs}: every part's verdicts match {path}")
    return 1 if problems else 0
