"""Child processes of the process runtime: spawned so that they die with their parent,
read for their ready line, stopped by process group; and workdirs that name their owner,
so that the leftovers of a SIGKILLed owner can be found and removed.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import queue
import random
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from undobench_gym import STACK_PROCESS_ENV
from undobench_gym.contract.errors import StackStartError

READY_TIMEOUT_S = 30.0
_PR_SET_PDEATHSIG = 1
WORKDIR_PREFIX = "undobench-"
OWNER_FILE = "owner.json"


def _die_with_parent() -> None:
    """Runs in the child before exec: SIGTERM it when the parent goes away."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class Spawner:
    """Forks every child from one daemon thread that lives as long as the process.

    PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, not the
    process: a stack started from a worker thread (a thread pool, a web handler) would be
    SIGTERMed as soon as that thread ended. Written by hand: no library does this.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner_pid: int | None = None
        self._queue: queue.SimpleQueue[tuple[Future[Any], list[str], dict[str, Any]]] = (
            queue.SimpleQueue()
        )

    def popen(self, cmd: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        with self._lock:
            if self._owner_pid != os.getpid():  # first use, or a forked copy of the module
                self._queue = queue.SimpleQueue()
                threading.Thread(target=self._serve, daemon=True, name="undobench-spawner").start()
                self._owner_pid = os.getpid()
            done: Future[subprocess.Popen[bytes]] = Future()
            self._queue.put((done, cmd, kwargs))
        try:
            return done.result()
        except BaseException:
            # Interrupted while the spawner forks (SIGTERM -> SystemExit in a worker): the
            # child exists but its caller never learns its pid, so nobody would stop it, and
            # a half-started service or proxy recreates the workdir close() removed.
            with contextlib.suppress(BaseException):
                orphan = done.result(timeout=30)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(orphan.pid, signal.SIGKILL)
                orphan.wait(timeout=5)
            raise

    def _serve(self) -> None:
        requests = self._queue
        while True:
            done, cmd, kwargs = requests.get()
            try:
                done.set_result(subprocess.Popen(cmd, **kwargs))
            except BaseException as exc:
                done.set_exception(exc)


SPAWNER = Spawner()


def process_started(pid: int) -> str | None:
    """The kernel's start time of `pid` (None if it is gone): a pid plus its start time
    names one process, even after the pid is reused."""
    fields = _stat_fields(pid)
    return fields[19] if fields else None


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (which may hold spaces and
    parentheses), from the state on; None if the process is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()


def remove_stale_workdirs(root: Path | None = None) -> int:
    """Remove stack workdirs whose owning process is gone (its driver was SIGKILLed, so
    no `close()` ran). Returns how many were removed."""
    removed = 0
    root = Path(root or tempfile.gettempdir())
    with contextlib.suppress(OSError):
        for path in root.glob(WORKDIR_PREFIX + "*"):
            try:
                owner = json.loads((path / OWNER_FILE).read_text())
                pid, started = int(owner["pid"]), owner["started"]
            except (OSError, ValueError, KeyError, TypeError):
                continue  # not ours, or still being created
            if not isinstance(started, str):
                continue  # the owner's start time was unknown: never guess
            if process_started(pid) != started:
                shutil.rmtree(path, ignore_errors=True)
                removed += 1
    return removed


RESTART_MODES = ("fork", "exec")


def restart_mode(requested: str | None = None) -> str:
    """How a crashed service comes back: "fork" (from its fork server, the default) or
    "exec" (a new interpreter; the old path, kept to compare and to fall back on)."""
    mode = requested or os.environ.get("UNDOBENCH_SERVICE_RESTART") or "fork"
    if mode not in RESTART_MODES:
        raise StackStartError(
            f"unknown service restart mode {mode!r}; known: {', '.join(RESTART_MODES)}"
        )
    return mode


# Above docker-compose.yml's fixed host ports (18100-18399): a stack that chose one of
# them made `docker compose up` fail in CI with "address already in use" (stop 25).
_LOWEST_PORT = 20000
PORT_ATTEMPTS = 3  # a chosen port can be taken before the child binds it
_random = random.SystemRandom()


def _ephemeral_range() -> tuple[int, int]:
    try:
        lo, hi = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(lo), int(hi)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def free_port() -> int:
    """A port free now, chosen below the kernel's ephemeral range.

    A port from `bind(0)` lies in the ephemeral range, from which every outgoing
    connection on the machine also takes its local port: between choosing it and the
    child binding it (or re-binding it after a crash restart) another process's
    connection may hold it. Ports below that range are only ever taken by an explicit
    bind, so only a concurrent chooser can race us, and callers retry on that."""
    lo = _ephemeral_range()[0]
    top = lo if lo > _LOWEST_PORT + 1000 else 65536
    for _ in range(100):
        port = _random.randrange(_LOWEST_PORT, top)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_taken(log: Path) -> bool:
    """Whether a child failed because another process bound its port first."""
    text = log_tail(log, lines=60).lower()
    # Python servers say errno 98; llama-server says it could not bind its socket
    return any(s in text for s in ("address already in use", "errno 98", "couldn't bind"))


def log_tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class StackProcess(Protocol):
    """What the runtime uses of a child process: a `subprocess.Popen`, or a process a
    zygote forked (`runtime.warm.ForkedProcess`)."""

    @property
    def pid(self) -> int: ...
    @property
    def stdout(self) -> IO[bytes] | None: ...
    @property
    def returncode(self) -> int | Any: ...
    def poll(self) -> int | None: ...
    def wait(self, timeout: float | None = None) -> int: ...


@dataclass
class Child:
    name: str
    log: Path
    proc: StackProcess | None = None
    ports: tuple[int, ...] = ()
    exits: list[int] = field(default_factory=list)
    #: A fork server's current server process (from its `SPAWN` lines).
    serving_pid: int | None = None
    _buf: bytes = b""

    def lines(self, timeout: float = 0.0) -> list[str]:
        """The complete stdout lines available within `timeout` (none at EOF)."""
        if self.proc is None or self.proc.stdout is None or self.proc.stdout.closed:
            return []
        fd = self.proc.stdout.fileno()
        ready, _, _ = select.select([fd], [], [], timeout)
        while ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            self._buf += chunk
            ready, _, _ = select.select([fd], [], [], 0)
        *done, self._buf = self._buf.split(b"\n")
        return [line.decode(errors="replace").strip() for line in done]

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def terminate(self) -> None:
        """SIGTERM its process group without waiting: `stop()` waits (a stack's children
        are asked together, so their shutdowns overlap)."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL its process group and reap it: for a stack whose workdir goes with it,
        where a graceful shutdown (uvicorn's takes ~0.35 s) would save nothing."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)
        if self.serving_pid not in (None, self.proc.pid):
            # A fork server's child dies with its group but is reaped by init, after the
            # zygote: wait for its exit, or its ports may still listen when close returns.
            _wait_exited(self.serving_pid, timeout=2.0)
        if self.proc.stdout:
            self.proc.stdout.close()

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.terminate()
            try:
                self.proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=3)
        if self.proc.stdout:
            self.proc.stdout.close()


def exited(pid: int) -> bool:
    """Whether `pid` has exited: gone, or a zombie whose files are closed."""
    fields = _stat_fields(pid)
    return not fields or fields[0] in ("Z", "X")


def _wait_exited(pid: int, timeout: float) -> None:
    """Until `pid` has exited or `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not exited(pid):
        time.sleep(0.002)


def stack_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """A stack process's environment: this process's, unbuffered, marked as a stack
    process, and `extra` on top (a stack's token: never on the command line, which any
    local user can read)."""
    return {**os.environ, "PYTHONUNBUFFERED": "1", STACK_PROCESS_ENV: "1", **(extra or {})}


def spawn(
    cmd: list[str], log: Path, capture_stdout: bool, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """`env`: variables on top of this process's (`stack_environment`)."""
    with log.open("ab") as err:
        return SPAWNER.popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if capture_stdout else err,
            stderr=err,
            start_new_session=True,
            preexec_fn=_die_with_parent,
            env=stack_environment(env),
        )


def read_ready(
    child: Child, timeout: float, on_line: Callable[[str], None] | None = None
) -> tuple[int, ...]:
    """Wait for the child's `READY <ports...>` line; other lines go to `on_line`."""
    assert child.proc is not None and child.proc.stdout is not None
    deadline = time.monotonic() + timeout
    ports: tuple[int, ...] = ()
    while time.monotonic() < deadline:
        exited = child.proc.poll() is not None
        for line in child.lines(timeout=0 if exited else 0.05):
            if line.startswith("READY ") and not ports:
                ports = tuple(int(p) for p in line.split()[1:])
            elif on_line is not None:
                on_line(line)
        if ports:
            return ports
        if exited:
            break
    code = child.proc.poll()
    state = f"exited with {code}" if code is not None else f"not ready after {timeout:.0f}s"
    raise StackStartError(
        f"service {child.name!r} {state}. Log tail ({child.log}):\n{log_tail(child.log)}"
    )
