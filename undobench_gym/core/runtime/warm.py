"""Stack processes forked from a zygote of each kind (`services.warm`): a sweep worker
forks a stack's service and proxy from zygotes that have already imported FastAPI,
SQLAlchemy and mitmproxy, so the start waits for the domain's import and the servers'
start (about 0.3 s), not for those imports (about 1 s each, on the CPU the pairs share),
and the imports are paid once, not once per stack.

Whose zygotes: a sweep's driver with worker processes starts one of each kind before the
workers (`SharedZygotes`), and every worker forks all its stacks from them, its first
included, over its own connection; a worker without them (in the driver, on Ray, or one
whose environment differs) starts its own once its first stack has started, so that
stack does not share its start with their imports. A sweep's executors turn this on
(`enable`); `UNDOBENCH_WARM_STACKS=0` keeps every stack start cold. A training loop's env
never keeps idle processes.

A zygote is used only by a process whose environment (less what a shell or test runner
changes as it goes) and working directory are those it was started under (a domain
registered since, another PYTHONPATH: it is retired, and the stack starts cold), and the
forked process takes that process's whole environment. It is the zygote's child, not this
process's: the zygote reports its pid and its exit status (`ForkedProcess` reads them as
`subprocess.Popen` would its own child's). It dies with the zygote (PR_SET_PDEATHSIG), the
zygote with its owner, and a worker's connection that ends (the worker died) kills what
was forked for it. `close`, or this process's exit, stops its own zygotes once the
processes they forked have exited.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

from undobench_gym.core.runtime.children import (
    READY_TIMEOUT_S,
    SPAWNER,
    _die_with_parent,
    exited,
    stack_environment,
)

ENV_VAR = "UNDOBENCH_WARM_STACKS"
KINDS = ("service", "proxy")
#: How long an order waits for the zygote's answer before the stack starts cold.
ORDER_TIMEOUT_S = 10.0
_MAX_MESSAGE = 1 << 16
#: The longest socket path a Unix socket can bind (108 bytes with its terminator).
_MAX_SOCKET_PATH = 100


def turned_off() -> bool:
    return os.environ.get(ENV_VAR, "1").strip().lower() in ("0", "false", "no", "off")


#: What a shell or a test runner changes as it goes, which no stack process reads.
_VOLATILE = frozenset({"PYTEST_CURRENT_TEST", "_", "OLDPWD", "PWD", "COLUMNS", "LINES", "SHLVL"})


def environment_digest() -> str:
    """What a zygote must share with a process it forks for (which takes that process's
    whole environment with its order): what its imports saw, the environment and the
    working directory, less what changes as a shell or a test runner goes."""
    env = sorted((k, v) for k, v in os.environ.items() if k not in _VOLATILE)
    state = json.dumps([env, os.getcwd()])
    return hashlib.sha256(state.encode()).hexdigest()


class Zygote:
    """This process's end of one zygote: orders go out, pids and exit codes come back
    (read on a thread, so an exit is known whether or not anyone waits for it)."""

    def __init__(
        self, kind: str, address: str | None = None, listen: socket.socket | None = None
    ) -> None:
        """A zygote started here (this process owns it; with `listen`, a listening socket,
        it also serves the workers that connect to it), or, with `address`, one another
        process owns."""
        self.kind = kind
        self.proc: subprocess.Popen[bytes] | None = None
        #: The environment it was started in (`environment_digest`), known once ready.
        self.environment: str | None = None
        if address is not None:
            ours = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                ours.connect(address)
            except OSError:
                ours.close()
                raise
        else:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            cmd = [sys.executable, "-m", "undobench_gym.services.warm", kind]
            cmd += ["--environment", environment_digest()]
            cmd += ["--listen-fd", str(listen.fileno())] if listen else []
            try:
                self.proc = SPAWNER.popen(
                    cmd,
                    stdin=theirs.fileno(),
                    pass_fds=[listen.fileno()] if listen else [],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,  # each forked process writes to its stack's log
                    start_new_session=True,
                    preexec_fn=_die_with_parent,
                    env=stack_environment(),
                )
            except BaseException:
                ours.close()
                raise
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
                    self.environment = str(message.get("environment") or "")
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
        return -signal.SIGTERM if exited(pid) else None

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
        if self.proc is None:  # another process's zygote: it kills what it forked for us
            return
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
        if not turned_off():
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
        zygote.ready.wait(READY_TIMEOUT_S)
        if zygote.dead or zygote.environment != environment_digest():
            with self._lock:
                if self._zygotes.get(kind) is zygote:
                    del self._zygotes[kind]  # the next fill starts one afresh
            zygote.close()
            return None
        proc = zygote.fork(argv, stack_environment(env), log, capture_stdout)
        if proc is not None:
            with self._lock:
                self.taken += 1
        return proc

    def connect(self, addresses: dict[str, str] | None) -> None:
        """Fork from the zygotes another process owns (`SharedZygotes`: a sweep driver's),
        where they answer; kinds that do not start their own after the first stack."""
        if not self.enabled or not addresses:
            return
        for kind, address in addresses.items():
            with contextlib.suppress(OSError):
                zygote = Zygote(kind, address=address)
                with self._lock:
                    stale = self._zygotes.get(kind)
                    self._zygotes[kind] = zygote
                if stale is not None:
                    stale.close()

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


class SharedZygotes:
    """One zygote of each kind, started by a sweep's driver before its worker processes,
    that every worker forks its stacks from, its first included: the imports are paid
    once for the sweep, not once per worker, and a worker's first stack waits for a fork
    instead of new interpreters."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="undobench-zygotes-"))  # 0700: ours only
        self.addresses = {kind: str(self.folder / f"{kind}.sock") for kind in KINDS}
        self.zygotes: list[Zygote] = []
        try:
            if max(len(a) for a in self.addresses.values()) > _MAX_SOCKET_PATH:
                raise OSError(f"socket paths under {self.folder} are too long")
            for kind, address in self.addresses.items():
                with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as listener:
                    listener.bind(address)  # before any worker starts: none connects too soon
                    listener.listen(256)
                    self.zygotes.append(Zygote(kind, listen=listener))
        except BaseException:
            self.close()
            raise
        atexit.register(self.close)  # an executor never closed: its folder still goes

    @classmethod
    def start(cls) -> SharedZygotes | None:
        """Shared zygotes if `UNDOBENCH_WARM_STACKS` does not turn them off and they
        start; None otherwise (each worker then starts its own)."""
        if turned_off():
            return None
        try:
            return cls()
        except OSError:
            return None

    def close(self) -> None:
        """Stop the zygotes (after the workers: a worker's stacks die with its connection)."""
        for z in self.zygotes:
            z.close()
        shutil.rmtree(self.folder, ignore_errors=True)
        atexit.unregister(self.close)


WARM = WarmPool()
