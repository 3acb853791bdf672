"""`undobench`: the command line (tasks, run, report, doctor)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .errors import UndoBenchError

METHODS_HELP = "bare, B0, B2, B2-K (comma-separated for several)"


def _tasks(args: argparse.Namespace) -> int:
    from .catalog import all_workflows, domain

    rows: list[dict[str, Any]] = []
    for w in all_workflows(args.split):
        tools = domain(w.domain).tools
        rows.append(
            {
                "id": w.id,
                "domain": w.domain,
                "split": w.split,
                "kind": w.kind,
                "tools": [
                    {
                        "name": n,
                        "read_only": tools[n].read_only,
                        "effect_class": tools[n].effect_class,
                        "idempotency": tools[n].idempotency,
                    }
                    for n in w.tools
                ],
                "scenarios": [
                    {"id": s.id, "boundary": s.boundary.value, "ambiguous": s.ambiguous}
                    for s in w.scenarios
                ],
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"UndoBench workflows{' (' + args.split + ')' if args.split else ''}")
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
    return 0


def _run(args: argparse.Namespace) -> int:
    from .agents.methods import METHODS, PLANNED
    from .catalog import all_workflows
    from .runner import expand, parse_seeds, run_sweep

    if bool(args.workflows) == bool(args.split):
        raise UndoBenchError("give exactly one of --workflows ID,ID or --split dev|val|test")
    workflows = (
        args.workflows.split(",") if args.workflows else [w.id for w in all_workflows(args.split)]
    )
    methods = [m.strip() for m in args.method.split(",") if m.strip()]
    for m in methods:
        if m not in METHODS:
            extra = " (planned, not available yet)" if m in PLANNED else ""
            raise UndoBenchError(f"unknown method {m!r}{extra}; choose from {', '.join(METHODS)}")
    if args.executor != "local" or args.workers != 1:
        raise UndoBenchError("only --executor local --workers 1 is available in this build")
    scenarios = args.scenarios.split(",") if args.scenarios else None
    trials = expand(workflows, scenarios, methods, parse_seeds(args.seeds))
    out = Path(args.out)
    summary = run_sweep(
        trials,
        agent_spec=args.agent,
        framework=args.framework,
        runtime=args.runtime,
        out=out,
        resume=args.resume,
        max_steps=args.max_steps,
        progress=not args.quiet and sys.stderr.isatty(),
    )
    _print_summary(summary, out)
    return 0


def _print_summary(summary: dict[str, Any], out: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    o = summary["overall"]
    table = Table(title=f"{o['N']} pairs: N={o['N']} D={o['D']} F={o['F']} C={o['C']}")
    table.add_column("method")
    cols = ("control_rate", "rsr", "crsr", "der", "mer", "urr", "eor", "fired_rate")
    for c in cols:
        table.add_column(c, justify="right")
    rows = [("all", o), *summary["by"]["method"].items()]
    for name, m in rows:
        table.add_row(
            name, *("-" if m[c]["value"] is None else f"{m[c]['value']:.2f}" for c in cols)
        )
    console = Console()
    console.print(table)
    console.print(f"wrote {out / 'trials.jsonl'}, {out / 'summary.json'}, {out / 'report.md'}")


def _report(args: argparse.Namespace) -> int:
    from .evaluation.report import write_reports

    out = Path(args.dir)
    if not (out / "trials.jsonl").exists():
        raise UndoBenchError(f"{out / 'trials.jsonl'} not found: is {out} a run directory?")
    summary = write_reports(out)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        _print_summary(summary, out)
    return 0


def _images(args: argparse.Namespace) -> int:
    from .runtime.images import build

    result = build(
        base=args.base,
        offline=args.offline,
        force=args.force,
        log=lambda m: print(m, file=sys.stderr),
    )
    print(f"{result.tag} ({'built' if result.built else 'up to date'}; base {result.base})")
    return 0


def _compose(args: argparse.Namespace) -> int:
    from .runtime.compose import render

    sys.stdout.write(render())
    return 0


def _gc(args: argparse.Namespace) -> int:
    from .runtime.docker import gc

    counts = gc()
    print(", ".join(f"removed {n} {kind}" for kind, n in counts.items()))
    return 0


def _doctor_docker() -> bool:
    """Report what the docker runtime lacks, and how to fix it."""
    import importlib.util
    import shutil

    if importlib.util.find_spec("docker") is None:
        print("missing docker runtime: the docker SDK (pip install 'undobench-gym[docker]')")
        return False
    from .runtime.images import IMAGE_REPO, docker_client

    try:
        client = docker_client()
    except UndoBenchError as exc:
        hint = "" if shutil.which("dockerd") else " (no dockerd: apt-get install docker.io)"
        print(f"missing docker runtime: {exc}{hint}")
        return False
    print(f"ok      docker engine {client.version().get('Version')}")
    if not client.images.list(name=f"{IMAGE_REPO}:latest"):
        print(
            f"missing {IMAGE_REPO}:latest: run `undobench images build` "
            "(add --offline where no registry is reachable)"
        )
        return False
    print(f"ok      image {IMAGE_REPO}:latest")
    return True


def _doctor(args: argparse.Namespace) -> int:
    import importlib

    ok = True
    for mod in (
        "fastapi",
        "sqlalchemy",
        "uvicorn",
        "mitmproxy.tools.main",
        "gymnasium",
        "statsmodels",
    ):
        try:
            importlib.import_module(mod)
            print(f"ok      {mod}")
        except Exception as exc:
            ok = False
            print(f"BROKEN  {mod}: {exc}")
    if ok:
        from .runtime.process import ProcessRuntime

        try:
            with ProcessRuntime("payments") as rt:
                rt.wait_healthy()
                print(f"ok      process runtime: stack up at {rt.endpoints.agent_url}")
        except UndoBenchError as exc:
            ok = False
            print(f"BROKEN  process runtime: {exc}")
    docker_ok = _doctor_docker()
    if args.require_docker:
        ok = ok and docker_ok
    return 0 if ok else 1


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="undobench", description="UndoBench Gym: paired fault trials for tool-using agents"
    )
    sub = p.add_subparsers(dest="command", required=True)

    t = sub.add_parser("tasks", help="list the workflow catalogue")
    t.add_argument("--split", choices=["dev", "val", "test"])
    t.add_argument("--json", action="store_true", help="print JSON")
    t.set_defaults(func=_tasks)

    r = sub.add_parser("run", help="run paired control/fault trials")
    r.add_argument("--workflows", help="comma-separated workflow ids")
    r.add_argument("--split", choices=["dev", "val", "test"])
    r.add_argument("--scenarios", help="comma-separated scenario ids (default: all)")
    r.add_argument("--method", default="bare", help=METHODS_HELP)
    r.add_argument("--seeds", default="1-5", help="e.g. 1-20 or 1,2,5")
    r.add_argument("--agent", default="scripted", help="scripted | python:MODULE:CLASS")
    r.add_argument("--framework", default=None, help="agent framework label (F1|F2)")
    r.add_argument("--runtime", default="process", choices=["process", "docker"])
    r.add_argument("--executor", default="local", choices=["local", "ray"])
    r.add_argument("--workers", type=int, default=1)
    r.add_argument("--max-steps", type=int, default=20)
    r.add_argument("--out", required=True, help="run directory")
    r.add_argument("--resume", action="store_true", help="skip pairs already recorded")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    r.set_defaults(func=_run)

    rep = sub.add_parser("report", help="recompute summary, report.md and CSV from trials.jsonl")
    rep.add_argument("dir")
    rep.add_argument("--json", action="store_true", help="print the summary as JSON")
    rep.set_defaults(func=_report)

    d = sub.add_parser("doctor", help="check dependencies, start one stack, report docker")
    d.add_argument(
        "--require-docker", action="store_true", help="fail when the docker runtime is not ready"
    )
    d.set_defaults(func=_doctor)

    img = sub.add_parser("images", help="container images for the docker runtime")
    img_sub = img.add_subparsers(dest="images_command", required=True)
    b = img_sub.add_parser("build", help="build the stack image (content-hashed tag)")
    b.add_argument("--base", help="base image to use (pulled if missing), e.g. python:3.11-slim")
    b.add_argument(
        "--offline",
        action="store_true",
        help="make the base with debootstrap + docker import (no registry needed)",
    )
    b.add_argument("--force", action="store_true", help="rebuild even when up to date")
    b.set_defaults(func=_images)

    c = img_sub.add_parser("compose", help="print docker-compose.yml for all domain stacks")
    c.set_defaults(func=_compose)

    g = sub.add_parser("gc", help="remove leftover containers, networks, volumes (by label)")
    g.set_defaults(func=_gc)

    from .evaluation.commands import register

    register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
        return code
    except UndoBenchError as exc:
        print(f"undobench: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("undobench: interrupted; recorded trials are kept (use --resume)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
