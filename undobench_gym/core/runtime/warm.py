"""Stack processes started before they are needed, one service and one proxy at a time
(`services.warm`): a sweep worker that starts a stack for its next domain takes them
instead of new interpreters, so the start waits for the domain's import and the servers'
start (about 0.3 s), not for FastAPI, SQLAlchemy and mitmproxy to import (about 1 s each,
on the CPU the pairs share).

Off by default: `UNDOBENCH_WARM_STACKS=1` lets a sweep's executors turn it on (`enable`:
the in-driver worker, worker processes, Ray actors; a training loop's env never keeps idle
processes). An A/B on the 2-core machine, two workers, the scripted TEST sweep
(`benchmarks/bench_warm_stacks.py`), halved what pairs waited for stack starts but not the
wall time, for 4 % more CPU per pair: where every core is busy the imports only move. They
pay where a worker has idle CPU while its stack starts.

A ready process is used only by a process whose environment and working directory are
still those it was started under (a domain registered since, another PYTHONPATH: it is
stopped, and a new one starts cold). Each is this process's child like
any stack process: it dies with it (PR_SET_PDEATHSIG), and `close` or the exit of this
process stops the ones never taken. The pool refills after the stack that took one has
started, so a worker's first stack does not share its start with the refill's imports.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from undobench_gym import STACK_PROCESS_ENV
from undobench_gym.core.runtime.children import SPAWNER, _die_with_parent

ENV_VAR = "UNDOBENCH_WARM_STACKS"
KINDS = ("service", "proxy")


@dataclass
class _Ready:
    proc: subprocess.Popen[bytes]
    environment: tuple[dict[str, str], str]


def _environment() -> tuple[dict[str, str], str]:
    return dict(os.environ), os.getcwd()


class WarmPool:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ready: dict[str, _Ready] = {}
        self.enabled = False
        self.taken = 0  # how many stack processes came from the pool (this process's)
        atexit.register(self.close)

    def enable(self) -> None:
        """Turn the pool on if `UNDOBENCH_WARM_STACKS` asks for it (it is off by default)."""
        if os.environ.get(ENV_VAR, "0").strip().lower() in ("1", "true", "yes", "on"):
            self.enabled = True

    def take(
        self, kind: str, argv: list[str], env: dict[str, str], log: Path, capture_stdout: bool
    ) -> subprocess.Popen[bytes] | None:
        """A ready process of `kind` turned into `argv` (the module's arguments), or None
        (none ready, or started under another environment: start one cold)."""
        with self._lock:
            ready = self._ready.pop(kind, None)
        if ready is None:
            return None
        proc = ready.proc
        if proc.poll() is not None or ready.environment != _environment():
            _stop(proc)
            return None
        order = {
            "argv": argv,
            "env": env,
            "log": str(log),
            "redirect": [2] if capture_stdout else [1, 2],
        }
        try:
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(order).encode() + b"\n")
            proc.stdin.close()
        except (OSError, ValueError):  # it died meanwhile
            _stop(proc)
            return None
        self.taken += 1
        return proc

    def fill(self) -> None:
        """Start a ready process of each kind that has none (after a stack has started)."""
        if not self.enabled:
            return
        for kind in KINDS:
            with self._lock:
                if kind in self._ready or not self.enabled:
                    continue
            proc = SPAWNER.popen(
                [sys.executable, "-m", "undobench_gym.services.warm", kind],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE if kind == "service" else subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,  # until it has its stack's log
                start_new_session=True,
                preexec_fn=_die_with_parent,
                env={**os.environ, "PYTHONUNBUFFERED": "1", STACK_PROCESS_ENV: "1"},
            )
            with self._lock:
                if kind in self._ready or not self.enabled:  # filled or closed meanwhile
                    _stop(proc)
                else:
                    self._ready[kind] = _Ready(proc, _environment())

    def close(self) -> None:
        """Stop the processes never taken; a later `enable` starts afresh."""
        with self._lock:
            self.enabled = False
            ready, self._ready = self._ready, {}
        for r in ready.values():
            _stop(r.proc)


def _stop(proc: subprocess.Popen[Any]) -> None:
    with contextlib.suppress(Exception):
        if proc.stdin is not None:
            proc.stdin.close()  # an untaken one exits at EOF
    with contextlib.suppress(Exception):
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
        proc.wait(timeout=5)
    with contextlib.suppress(Exception):
        if proc.stdout is not None:
            proc.stdout.close()


WARM = WarmPool()
