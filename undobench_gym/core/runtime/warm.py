"""Stack processes forked from a zygote of each kind (`services.warm`): a sweep worker that
starts a stack for its next domain forks the service and the proxy from zygotes that have
already imported FastAPI, SQLAlchemy and mitmproxy, so the start waits for the domain's
import and the servers' start (about 0.3 s), not for those imports (about 1 s each, on the
CPU the pairs share), and the worker pays the imports once, not once per stack.

A sweep's executors turn it on (`enable`: the in-driver worker, worker processes, Ray
actors); `UNDOBENCH_WARM_STACKS=0` keeps every stack start cold. A training loop's env
never keeps idle processes. Alternated on the 2-core machine, two workers, the scripted
TEST sweep (`benchmarks/bench_warm_stacks.py`): 80.6 s to 62.4 s, 27 % less CPU per pair.

A zygote is used only by a process whose environment and working directory are still
those it was started under (a domain registered since, another PYTHONPATH: it is retired,
and the stack starts cold). A forked process is the zygote's child, not this process's:
the zygote reports its pid and its exit status (`ForkedProcess` reads them as
`subprocess.Popen` would its own child's). It dies with the zygote (PR_SET_PDEATHSIG),
the zygote with this process. The zygotes start after this process's first stack has
started, so that stack does not share its start with their imports; `close`, or this
process's exit, stops them once the processes they forked have exited.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from undobench_gym import STACK_PROCESS_ENV
from undobench_gym.core.runtime.children import READY_TIMEOUT_S, SPAWNER, _die_with_parent

ENV_VAR = "UNDOBENCH_WARM_STACKS"
KINDS = ("service", "proxy")
#: How long an order waits for the zygote's answer before the stack starts cold.
ORDER_TIMEOUT_S = 10.0
_MAX_MESSAGE = 1 << 16


def _environment() -> tuple[dict[str, str], str]:
    return dict(os.environ), os.getcwd()


def _exited(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")


class Zygote:
    """This process's end of one zygote: orders go out, pids and exit codes come back
    (read on a thread, so an exit is known whether or not anyone waits for it)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.environment = _environment()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = SPAWNER.popen(
                [sys.executable, "-m", "undobench_gym.services.warm", kind],
                stdin=theirs.fileno(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,  # each forked process writes to its stack's log
                start_new_session=True,
                preexec_fn=_die_with_parent,
                env={**os.environ, "PYTHONUNBUFFERED": "1", STACK_PROCESS_ENV: "1"},
            )
        finally:
            theirs.close()
        self.sock = ours
        self.ready = threading.Event()
        self.dead = False  # the zygote went away: nothing more comes from it
        self.closing = False
        self._lock = threading.Lock()  # one order at a time: answers come in order
        self._state = threading.Condition()
        self._answers: queue.SimpleQueue[dict[str, Any] | None] = queue.SimpleQueue()
        self.live: set[int] = set()
        self.codes: dict[int, int] = {}
        threading.Thread(target=self._read, daemon=True, name=f"undobench-zygote-{kind}").start()

    def _read(self) -> None:
        try:
            while True:
                data = self.sock.recv(_MAX_MESSAGE)
                if not data:
                    break
                message = json.loads(data)
                if message.get("ready"):
                    self.ready.set()
                elif "exit" in message:
                    with self._state:
                        self.codes[message["exit"]] = int(message["code"])
                        self.live.discard(message["exit"])
                        self._state.notify_all()
                    if self.closing and not self.live:
                        self._shutdown()
                else:
                    if "pid" in message:  # live before its exit can be read
                        with self._state:
                            self.live.add(int(message["pid"]))
                    self._answers.put(message)
        except (OSError, ValueError):
            pass
        with self._state:
            self.dead = True
            self._state.notify_all()
        self.ready.set()
        self._answers.put(None)

    def fork(
        self, argv: list[str], env: dict[str, str], log: Path, capture_stdout: bool
    ) -> ForkedProcess | None:
        """A process forked for `argv`, or None (the zygote is gone or did not answer)."""
        if not self.ready.wait(READY_TIMEOUT_S) or self.dead or self.closing:
            return None
        order = json.dumps({"argv": argv, "env": env, "log": str(log)}).encode()
        read_end = write_end = None
        if capture_stdout:
            read_end, write_end = os.pipe()
        try:
            with self._lock:
                socket.send_fds(self.sock, [order], [write_end] if write_end is not None else [])
                try:
                    answer = self._answers.get(timeout=ORDER_TIMEOUT_S)
                except queue.Empty:
                    answer = None
        except OSError:
            answer = None
        finally:
            if write_end is not None:
                os.close(write_end)
        if answer is None or "pid" not in answer:
            if read_end is not None:
                os.close(read_end)
            if answer is None:  # no answer in time: a stuck zygote is no use
                self.close()
            return None
        stdout = open(read_end, "rb") if read_end is not None else None  # noqa: SIM115
        return ForkedProcess(self, int(answer["pid"]), argv, stdout)

    def code(self, pid: int) -> int | None:
        with self._state:
            if pid in self.codes:
                return self.codes[pid]
            if not self.dead:
                return None
        # The zygote is gone (killed): so are the processes it forked (their death
        # signal), reaped by init, their status lost; SIGTERM is what they were sent.
        return -signal.SIGTERM if _exited(pid) else None

    def wait_code(self, pid: int, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while (code := self.code(pid)) is None:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            with self._state:
                self._state.wait(min(left, 0.05))
        return code

    def close(self) -> None:
        """Stop the zygote now if nothing it forked is alive, else once the last has exited
        (it reports their exits until then)."""
        with self._state:
            self.closing = True
            busy = bool(self.live) and not self.dead
        if not busy:
            self._shutdown()

    def _shutdown(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # end of file: the zygote exits
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=5)
        with contextlib.suppress(Exception):
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)


class ForkedProcess:
    """A process a zygote forked, used as the runtime uses a `subprocess.Popen`: its exit
    status comes from the zygote, which reaps it."""

    def __init__(self, zygote: Zygote, pid: int, args: list[str], stdout: IO[bytes] | None):
        self.zygote = zygote
        self.pid = pid
        self.args = args
        self.stdout = stdout
        self.stdin: IO[bytes] | None = None
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.zygote.code(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self.zygote.wait_code(
                self.pid, timeout if timeout is not None else float("inf")
            )
        if self.returncode is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class WarmPool:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._zygotes: dict[str, Zygote] = {}
        self.enabled = False
        self.taken = 0  # how many stack processes were forked from zygotes (this process's)
        atexit.register(self.close)

    def enable(self) -> None:
        """Turn the pool on unless `UNDOBENCH_WARM_STACKS` turns it off (0, false, no, off)."""
        if os.environ.get(ENV_VAR, "1").strip().lower() not in ("0", "false", "no", "off"):
            self.enabled = True

    def take(
        self, kind: str, argv: list[str], env: dict[str, str], log: Path, capture_stdout: bool
    ) -> ForkedProcess | None:
        """A process of `kind` forked for `argv` (the module's arguments), or None (no
        zygote yet, or one started under another environment: start cold)."""
        with self._lock:
            zygote = self._zygotes.get(kind)
            if zygote is None:
                return None
            if zygote.dead or zygote.environment != _environment():
                del self._zygotes[kind]  # the next fill starts one afresh
                zygote.close()
                return None
        proc = zygote.fork(argv, env, log, capture_stdout)
        if proc is not None:
            with self._lock:
                self.taken += 1
        return proc

    def fill(self) -> None:
        """Start a zygote of each kind that has none (after a stack has started)."""
        if not self.enabled:
            return
        for kind in KINDS:
            with self._lock:
                if kind in self._zygotes or not self.enabled:
                    continue
            zygote = Zygote(kind)
            with self._lock:
                if kind in self._zygotes or not self.enabled:  # filled or closed meanwhile
                    stale: Zygote | None = zygote
                else:
                    self._zygotes[kind], stale = zygote, None
            if stale is not None:
                stale.close()

    def close(self) -> None:
        """Stop the zygotes (each once what it forked has exited); a later `enable`
        starts afresh."""
        with self._lock:
            self.enabled = False
            zygotes, self._zygotes = self._zygotes, {}
        for z in zygotes.values():
            z.close()


WARM = WarmPool()
