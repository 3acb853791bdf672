"""The process runtime: services and the fault proxy as supervised local subprocesses.

Everything listens on 127.0.0.1. A service that exits (an armed crash point, or a real
crash) is restarted on the same ports with the same data directory, so the partial state
it left stays visible. Children die with the parent (PR_SET_PDEATHSIG, armed from one
long-lived thread) and `close()` kills whole process groups, so nothing outlives the stack;
a workdir whose owner was SIGKILLed is removed by the next runtime (or `undobench gc`).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import queue
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from .. import catalog
from ..errors import StackStartError, StackUnhealthyError
from .base import CRASH_EXIT_CODE, Runtime, StackEndpoints

READY_TIMEOUT_S = 30.0
_PR_SET_PDEATHSIG = 1
WORKDIR_PREFIX = "undobench-"
OWNER_FILE = "owner.json"


def _die_with_parent() -> None:
    """Runs in the child before exec: SIGTERM it when the parent goes away."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class _Spawner:
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


_SPAWNER = _Spawner()


def _process_started(pid: int) -> str | None:
    """The kernel's start time of `pid` (None if it is gone): a pid plus its start time
    names one process, even after the pid is reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


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
            if _process_started(pid) != started:
                shutil.rmtree(path, ignore_errors=True)
                removed += 1
    return removed


def proxy_command(
    domain: str, service_port: int, proxy_port: int, control_port: int, confdir: Path
) -> list[str]:
    """The fault proxy in front of one local service, all on 127.0.0.1. The tool table is
    on the command line, so a restarted proxy still names every call."""
    routes = json.dumps({domain: f"127.0.0.1:{service_port}"})
    tools = json.dumps(catalog.domain(domain).proxy_routes())
    return [
        sys.executable,
        "-m",
        "undobench_gym.proxies.launch",
        "--mode",
        f"reverse:http://127.0.0.1:{service_port}/",
        "--listen-host",
        "127.0.0.1",
        "--listen-port",
        str(proxy_port),
        "--set",
        f"undobench_routes={routes}",
        "--set",
        f"undobench_tools={tools}",
        "--set",
        f"undobench_control_port={control_port}",
        "--set",  # mitmproxy's CA and certificates, otherwise written to $HOME
        f"confdir={confdir}",
    ]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def log_tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class _Child:
    name: str
    log: Path
    proc: subprocess.Popen[bytes] | None = None
    ports: tuple[int, ...] = ()
    exits: list[int] = field(default_factory=list)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=3)
        if self.proc.stdout:
            self.proc.stdout.close()


def _spawn(cmd: list[str], log: Path, capture_stdout: bool) -> subprocess.Popen[bytes]:
    with log.open("ab") as err:
        return _SPAWNER.popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if capture_stdout else err,
            stderr=err,
            start_new_session=True,
            preexec_fn=_die_with_parent,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )


def _read_ready(child: _Child, timeout: float) -> tuple[int, ...]:
    assert child.proc is not None and child.proc.stdout is not None
    deadline = time.monotonic() + timeout
    buf = b""
    fd = child.proc.stdout.fileno()
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:
            chunk = os.read(fd, 4096)
            buf += chunk
            for line in buf.decode(errors="replace").splitlines():
                if line.startswith("READY "):
                    return tuple(int(p) for p in line.split()[1:])
            if not chunk and child.proc.poll() is not None:
                break
        elif child.proc.poll() is not None:
            break
    code = child.proc.poll()
    state = f"exited with {code}" if code is not None else f"not ready after {timeout:.0f}s"
    raise StackStartError(
        f"service {child.name!r} {state}. Log tail ({child.log}):\n{log_tail(child.log)}"
    )


class ProcessRuntime(Runtime):
    def __init__(self, domain: str, workdir: Path | None = None) -> None:
        self.domain = domain
        self._own_dir = workdir is None
        if self._own_dir:
            remove_stale_workdirs()
        self._http = httpx.Client(timeout=5.0)  # before the workdir: nothing slow after it
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{domain}-"))
        if self._own_dir:
            try:
                owner = {"pid": os.getpid(), "started": _process_started(os.getpid())}
                (self.workdir / OWNER_FILE).write_text(json.dumps(owner))
            except BaseException:  # interrupted before anyone holds this runtime to close it
                shutil.rmtree(self.workdir, ignore_errors=True)
                raise
        self._lock = threading.RLock()
        self._service = _Child(domain, self.workdir / f"{domain}.log")
        self._proxy = _Child("proxy", self.workdir / "proxy.log")
        self._endpoints: StackEndpoints | None = None
        self._restarts = 0
        self._unplanned = 0
        self._closed = False
        self._stop = threading.Event()
        self._supervisor: threading.Thread | None = None
        self._finalizer = weakref.finalize(
            self, ProcessRuntime._kill_all, [self._service, self._proxy]
        )
        atexit.register(self._finalizer)

    @staticmethod
    def _kill_all(children: list[_Child]) -> None:
        for child in children:
            with contextlib.suppress(Exception):
                child.stop()

    # ---- lifecycle ----------------------------------------------------------------

    def start(self) -> StackEndpoints:
        with self._lock:
            if self._closed:
                raise StackStartError("this stack was closed; make a new runtime")
            if self._endpoints is not None:
                return self._endpoints
            try:
                self._start_service(ports=(0, 0))
                self._start_proxy()
            except BaseException:
                self.close()
                raise
            _svc_port, admin_port = self._service.ports
            proxy_port, control_port = self._proxy.ports
            self._endpoints = StackEndpoints(
                agent_url=f"http://127.0.0.1:{proxy_port}",
                control_url=f"http://127.0.0.1:{control_port}",
                admin_urls={self.domain: f"http://127.0.0.1:{admin_port}"},
            )
            self._supervisor = threading.Thread(
                target=self._supervise, daemon=True, name=f"undobench-supervisor-{self.domain}"
            )
            self._supervisor.start()
            return self._endpoints

    def _start_service(self, ports: tuple[int, int]) -> None:
        cmd = [
            sys.executable,
            "-m",
            "undobench_gym.envs._service.server",
            "--domain",
            self.domain,
            "--data-dir",
            str(self.workdir / "data"),
            "--port",
            str(ports[0]),
            "--admin-port",
            str(ports[1]),
        ]
        self._service.proc = _spawn(cmd, self._service.log, capture_stdout=True)
        self._service.ports = _read_ready(self._service, READY_TIMEOUT_S)

    def _start_proxy(self) -> None:
        svc_port = self._service.ports[0]
        proxy_port, control_port = self._proxy.ports or (free_port(), free_port())
        cmd = proxy_command(
            self.domain, svc_port, proxy_port, control_port, self.workdir / "mitmproxy"
        )
        self._proxy.proc = _spawn(cmd, self._proxy.log, capture_stdout=False)
        self._proxy.ports = (proxy_port, control_port)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._proxy.proc.poll() is not None:
                break
            try:
                if self._http.get(f"http://127.0.0.1:{control_port}/control/health").is_success:
                    with socket.create_connection(("127.0.0.1", proxy_port), timeout=1):
                        return
            except (httpx.HTTPError, OSError):
                pass
            time.sleep(0.05)
        code = self._proxy.proc.poll()
        raise StackStartError(
            f"fault proxy {'exited with ' + str(code) if code is not None else 'not ready'}. "
            f"Log tail ({self._proxy.log}):\n{log_tail(self._proxy.log)}"
        )

    # ---- supervision --------------------------------------------------------------

    def _supervise(self) -> None:
        while not self._stop.wait(0.1):
            try:
                self._ensure_running()
            except Exception:
                continue

    def _ensure_running(self) -> None:
        with self._lock:
            if self._closed or self._endpoints is None:
                return
            for child in (self._service, self._proxy):
                if child.proc is not None and child.proc.poll() is not None:
                    code = child.proc.returncode
                    child.exits.append(code)
                    if child is self._proxy or code != CRASH_EXIT_CODE:
                        self._unplanned += 1
                    if child.proc.stdout:
                        child.proc.stdout.close()
                    self._restarts += 1
                    if child is self._service:
                        svc, admin = child.ports
                        self._start_service(ports=(svc, admin))
                    else:
                        self._start_proxy()

    def wait_healthy(self, timeout: float = 30.0, probe: bool = False) -> None:
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                self._ensure_running()
                up = self._service.alive() and self._proxy.alive()
                if up and (not probe or self._answers()):
                    return
            except StackStartError as exc:
                last = exc
            time.sleep(0.02)
        raise StackUnhealthyError(
            f"stack {self.domain!r} not healthy after {timeout:.0f}s: {last or 'processes down'}"
        )

    def _answers(self) -> bool:
        ep = self.endpoints
        try:
            for url in (*ep.admin_urls.values(),):
                self._http.get(f"{url}/admin/health", timeout=2).raise_for_status()
            self._http.get(f"{ep.control_url}/control/health", timeout=2).raise_for_status()
        except httpx.HTTPError:
            return False
        return True

    @property
    def endpoints(self) -> StackEndpoints:
        if self._endpoints is None:
            raise StackStartError("stack not started: call start() first")
        return self._endpoints

    @property
    def restarts(self) -> int:
        return self._restarts

    @property
    def unplanned_exits(self) -> int:
        return self._unplanned

    @property
    def service_exits(self) -> list[int]:
        return list(self._service.exits)

    def pids(self) -> list[int]:
        return [c.proc.pid for c in (self._service, self._proxy) if c.proc is not None]

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._stop.set()
        if self._supervisor is not None:
            self._supervisor.join(timeout=2)
        self._kill_all([self._proxy, self._service])
        self._http.close()
        self._finalizer.detach()
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)
