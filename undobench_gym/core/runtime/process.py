"""The process runtime: services and the fault proxy as supervised local subprocesses.

Everything listens on 127.0.0.1; the admin and control APIs answer only the stack's token
(made here, passed in the children's environment), and the workdir (data, logs) is mode
0700. A service that exits (an armed crash point, or a real
crash) is restarted on the same ports with the same data directory, so the partial state
it left stays visible. By default the service runs as a fork server (see
`envs._service.server`): its zygote forks a fresh server process in milliseconds and
reports each exit on stdout; `restart="exec"` (or UNDOBENCH_SERVICE_RESTART=exec) starts a
new interpreter instead, the slower path kept for comparison and as a fallback.

Children die with the parent (PR_SET_PDEATHSIG, armed from one
long-lived thread) and `close()` kills whole process groups, so nothing outlives the stack;
a workdir whose owner was SIGKILLed is removed by the next runtime (or `undobench gc`).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path

import httpx

from undobench_gym.contract.errors import StackStartError, StackUnhealthyError
from undobench_gym.contract.stack_auth import TOKEN_ENV, auth_headers, new_token
from undobench_gym.core import catalog
from undobench_gym.core.runtime.base import CRASH_EXIT_CODE, Runtime, StackEndpoints
from undobench_gym.core.runtime.children import (
    OWNER_FILE,
    PORT_ATTEMPTS,
    READY_TIMEOUT_S,
    WORKDIR_PREFIX,
    Child,
    StackProcess,
    free_port,
    log_tail,
    port_taken,
    process_started,
    read_ready,
    remove_stale_workdirs,
    restart_mode,
    spawn,
)
from undobench_gym.core.runtime.warm import WARM

__all__ = ["OWNER_FILE", "ProcessRuntime", "free_port", "proxy_command", "remove_stale_workdirs"]


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
        "undobench_gym.services.proxy.launch",
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


class ProcessRuntime(Runtime):
    # Every exit is seen on the processes themselves (a child's exit status, or the fork
    # server's EXIT lines), so a verdict's reads need no health probe before them.
    verdict_probe = False

    def __init__(
        self, domain: str, workdir: Path | None = None, restart: str | None = None
    ) -> None:
        self.domain = domain
        self.restart_mode = restart_mode(restart)
        self._own_dir = workdir is None
        if self._own_dir:
            remove_stale_workdirs()
        self.token = new_token()  # the admin and control APIs answer only this
        # before the workdir: nothing slow after it
        self._http = httpx.Client(timeout=5.0, headers=auth_headers(self.token))
        # mkdtemp's directory is 0700: no other user reads the data, the logs or the plan
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{domain}-"))
        if self._own_dir:
            try:
                owner = {"pid": os.getpid(), "started": process_started(os.getpid())}
                (self.workdir / OWNER_FILE).write_text(json.dumps(owner))
            except BaseException:  # interrupted before anyone holds this runtime to close it
                shutil.rmtree(self.workdir, ignore_errors=True)
                raise
        self._lock = threading.RLock()
        self._service = Child(domain, self.workdir / f"{domain}.log")
        self._proxy = Child("proxy", self.workdir / "proxy.log")
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
    def _kill_all(children: list[Child]) -> None:
        for child in children:
            with contextlib.suppress(Exception):
                child.terminate()
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
                self._start_fresh()
            except BaseException:
                self.close()
                raise
            WARM.fill()  # for the next stack, now that this one's start is over
            _svc_port, admin_port = self._service.ports
            proxy_port, control_port = self._proxy.ports
            self._endpoints = StackEndpoints(
                agent_url=f"http://127.0.0.1:{proxy_port}",
                control_url=f"http://127.0.0.1:{control_port}",
                admin_urls={self.domain: f"http://127.0.0.1:{admin_port}"},
                token=self.token,
            )
            self._supervisor = threading.Thread(
                target=self._supervise, daemon=True, name=f"undobench-supervisor-{self.domain}"
            )
            self._supervisor.start()
            return self._endpoints

    def _start_fresh(self) -> None:
        """Start both children on newly chosen ports; choose again when another process
        bound a chosen port first (`free_port` can only say a port is free *now*)."""
        for attempt in range(PORT_ATTEMPTS):
            self._proxy.ports = ()
            try:
                # Both start at once: the proxy connects to the service only when a call
                # comes (connection_strategy=lazy), so it need not wait for it, and their
                # imports (about a second each) overlap.
                self._spawn_service(ports=(free_port(), free_port()), warm=True)
                try:
                    self._spawn_proxy(warm=True)
                except Exception:
                    self._await_service()  # a service that cannot start says why first
                    raise
                self._await_service()
                self._await_proxy()
                return
            except StackStartError:
                lost = [c for c in (self._service, self._proxy) if port_taken(c.log)]
                if not lost or attempt == PORT_ATTEMPTS - 1:
                    raise
                for child in (self._service, self._proxy):
                    with contextlib.suppress(Exception):
                        child.stop()
                    with contextlib.suppress(OSError):  # keep it, out of the next one's way
                        child.log.rename(child.log.with_suffix(f".port-taken-{attempt}.log"))

    def _spawn_service(self, ports: tuple[int, int], warm: bool = False) -> None:
        cmd = [
            sys.executable,
            "-m",
            "undobench_gym.services.domains._service.server",
            "--domain",
            self.domain,
            "--data-dir",
            str(self.workdir / "data"),
            "--port",
            str(ports[0]),
            "--admin-port",
            str(ports[1]),
        ]
        if self.restart_mode == "fork":
            cmd.append("--fork-server")
        self._service.serving_pid = None
        self._service.proc = self._launch("service", cmd, self._service.log, True, warm)
        self._service.ports = ports

    def _await_service(self) -> None:
        self._service.ports = read_ready(self._service, READY_TIMEOUT_S, self._service_line)
        assert self._service.proc is not None
        if self._service.serving_pid is None:  # exec mode: the process itself serves
            self._service.serving_pid = self._service.proc.pid

    def _start_service(self, ports: tuple[int, int]) -> None:
        self._spawn_service(ports)
        self._await_service()

    def _service_line(self, line: str) -> None:
        """A fork server's report: a new server process, or one that exited (a restart)."""
        kind, _, rest = line.partition(" ")
        if kind == "SPAWN":
            self._service.serving_pid = int(rest)
        elif kind == "EXIT":
            code = int(rest.split()[1])
            self._service.exits.append(code)
            self._restarts += 1
            if code != CRASH_EXIT_CODE:
                self._unplanned += 1

    def _read_service_lines(self) -> None:
        for line in self._service.lines():
            self._service_line(line)

    def _start_proxy(self) -> None:
        self._spawn_proxy()
        self._await_proxy()

    def _launch(
        self, kind: str, cmd: list[str], log: Path, capture_stdout: bool, warm: bool
    ) -> StackProcess:
        """A started process for `cmd` (`python -m MODULE ARGS`): forked from the sweep's
        zygote on a stack's first start (`runtime.warm`), else a new interpreter.
        Restarts always exec: the exec restart path stays what it measures."""
        env = {TOKEN_ENV: self.token}
        ready = (
            WARM.take(kind, cmd[3:], env, log, capture_stdout) if warm and WARM.enabled else None
        )
        return ready or spawn(cmd, log, capture_stdout=capture_stdout, env=env)

    def _spawn_proxy(self, warm: bool = False) -> None:
        svc_port = self._service.ports[0]
        proxy_port, control_port = self._proxy.ports or (free_port(), free_port())
        cmd = proxy_command(
            self.domain, svc_port, proxy_port, control_port, self.workdir / "mitmproxy"
        )
        self._proxy.proc = self._launch("proxy", cmd, self._proxy.log, False, warm)
        self._proxy.ports = (proxy_port, control_port)

    def _await_proxy(self) -> None:
        assert self._proxy.proc is not None
        proxy_port, control_port = self._proxy.ports
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
            self._read_service_lines()
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
                    # A fork server writes a child's EXIT line before forking the next
                    # one, so once the service answers, every exit so far can be read.
                    with self._lock:
                        self._read_service_lines()
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
    def service_exits(self) -> list[int]:
        return list(self._service.exits)

    def pids(self) -> list[int]:
        """The process serving the domain (a fork server's current child) and the proxy."""
        out = []
        if self._service.proc is not None:
            out.append(self._service.serving_pid or self._service.proc.pid)
        if self._proxy.proc is not None:
            out.append(self._proxy.proc.pid)
        return out

    def process_pids(self) -> list[int]:
        """Every process of the stack: the fork server's zygote too."""
        procs = [c.proc.pid for c in (self._service, self._proxy) if c.proc is not None]
        return sorted({*procs, *self.pids()})

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._stop.set()
        if self._supervisor is not None:
            self._supervisor.join(timeout=2)
        self._http.close()
        if self._own_dir:  # nothing of it is kept: no shutdown to wait for
            for child in (self._proxy, self._service):
                with contextlib.suppress(Exception):
                    child.kill()
        else:  # a user's workdir: stop gracefully
            self._kill_all([self._proxy, self._service])
        self._finalizer.detach()
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)
