"""`undobench`: the command line. One module per group of commands, each adding its own
subparsers; this module only assembles them (in the order `--help` lists them) and runs
the chosen handler, turning project errors into exit codes."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType

from undobench_gym.contract.errors import UndoBenchError
from undobench_gym.harness.cli import (
    audit,
    evaluate,
    mcp,
    models,
    openenv,
    run,
    serve,
    stacks,
    study,
    tasks,
    view,
)

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="undobench", description="UndoBench Gym: paired fault trials for tool-using agents"
    )
    sub = p.add_subparsers(dest="command", required=True)
    tasks.add(sub)
    run.add(sub)
    evaluate.add_report(sub)
    stacks.add(sub)  # doctor, images, gc
    evaluate.add_inspect(sub)
    view.add(sub)
    evaluate.add_import_reference(sub)
    audit.add(sub)
    serve.add(sub)
    models.add(sub)
    mcp.add(sub)
    openenv.add(sub)
    study.add(sub)
    return p


class Terminated(KeyboardInterrupt):
    """SIGTERM (what `timeout`, systemd, SLURM and Kubernetes send), raised where Ctrl-C
    would be, so that it unwinds the same way: stacks closed, workdirs removed, workers
    stopped, recorded trials kept."""


def _terminate(_sig: int, _frame: FrameType | None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one unwinding, even if sent again
    raise Terminated


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminate)
        # A command started in the background by a shell without job control (`cmd &` in a
        # script, CI runners) inherits SIGINT ignored; Ctrl-C and `kill -INT` must still
        # unwind it like a foreground run.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        code: int = args.func(args)
        return code
    except UndoBenchError as exc:
        print(f"undobench: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        print("undobench: interrupted; recorded trials are kept (use --resume)", file=sys.stderr)
        return 143 if isinstance(exc, Terminated) else 130
