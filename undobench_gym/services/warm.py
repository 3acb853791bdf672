"""A zygote for stack processes: `python -m undobench_gym.services.warm service|proxy`
imports once what a domain service (FastAPI, SQLAlchemy, uvicorn, the service kit) or the
fault proxy (mitmproxy, its control API) needs, about a second, then forks one process per
order. A forked process shares those imports instead of repeating them, so a stack starts
in a fraction of a cold start's time and CPU (`core.runtime.warm`).

The zygote's stdin is one end of a `SOCK_SEQPACKET` socket pair; its owner holds the
other. With `--listen-fd N` (a listening socket its owner bound) it also serves every
worker that connects to it: a sweep's driver starts one zygote of each kind for all its
worker processes. Each order is one message, JSON with the command line the process
would have been started with, its whole environment and its log, and at most one file
descriptor (the pipe its stdout goes to, for a service whose ready line the worker reads).
Each message the zygote sends is one JSON object: `{"ready": true, "environment": E}` once
its imports are done (E: `--environment`, the digest of the environment it was started
in), `{"pid": N}` for each order, `{"exit": N, "code": C}` to the connection it was forked
for when a forked process exits (C as `subprocess` gives it: -S for signal S), `{"error":
"..."}` for an order it could not fork. A forked process leads its own session and dies
with the zygote (PR_SET_PDEATHSIG), the zygote with its owner; a worker's connection that
ends kills what was forked for it, as the worker's own children would die with it.

At end of file on stdin (the owner closed the pool, or went away) the zygote takes no new
workers, and exits once its workers have left and what it forked has exited.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import importlib
import json
import os
import select
import signal
import socket
import sys
import threading
import traceback
from typing import Any, NoReturn

KINDS = ("service", "proxy")
#: The biggest order (the proxy's command line carries the domain's tool table).
MAX_MESSAGE = 1 << 20
_PR_SET_PDEATHSIG = 1

#: The module each kind becomes (what the runtime would start with `python -m`).
ENTRY = {
    "service": "undobench_gym.services.domains._service.server",
    "proxy": "undobench_gym.services.proxy.launch",
}
#: What each kind imports before it forks: its entry point, and for the proxy the addon
#: script's imports (mitmproxy loads the script itself, by path).
PRELOAD: dict[str, tuple[str, ...]] = {
    "service": (ENTRY["service"],),
    "proxy": (
        "mitmproxy.tools.main",
        ENTRY["proxy"],
        *(
            f"undobench_gym.services.proxy.{m}"
            for m in ("control", "fault", "guard", "relay", "routing", "state", "wire")
        ),
    ),
}


def send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.send(json.dumps(message).encode())


def _become(order: dict[str, Any], fds: list[int], zygote: int) -> list[str]:
    """In the forked process: its own session, death with the zygote, the real log,
    stdout and environment; returns its arguments."""
    os.setsid()
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != zygote:  # the zygote died before the death signal was armed
        os._exit(143)
    log = os.open(order["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.dup2(fds[0] if fds else log, 1)
    os.dup2(log, 2)
    os.close(log)
    for fd in fds:
        os.close(fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.environ.clear()  # the environment of the process it stands in for
    os.environ.update(order["env"])
    argv: list[str] = order["argv"]
    return argv


def _run_forked(kind: str, order: dict[str, Any], fds: list[int], zygote: int) -> NoReturn:
    """The forked process: becomes the service or the proxy, never returns."""
    code = 1
    try:
        argv = _become(order, fds, zygote)
        entry = importlib.import_module(ENTRY[kind])
        if kind == "proxy":  # mitmproxy reads its arguments from sys.argv
            sys.argv = [sys.argv[0], *argv]
            entry.main()
        else:
            entry.main(argv)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
    os._exit(code)


class _Clients:
    """The connections a zygote serves and which of them each forked process is for."""

    def __init__(self, control: socket.socket) -> None:
        self.socks: dict[int, socket.socket] = {control.fileno(): control}
        self.owner: dict[int, int] = {}  # forked pid -> its connection's fd

    def reap(self) -> None:
        while self.owner:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.owner.clear()
                return
            if pid == 0:
                return
            sock = self.socks.get(self.owner.pop(pid, -1))
            if sock is not None:
                with contextlib.suppress(OSError):
                    send(sock, {"exit": pid, "code": os.waitstatus_to_exitcode(status)})

    def drop(self, sock: socket.socket) -> None:
        """A connection ended (its worker died, or closed it with nothing forked alive):
        what was forked for it has no one to stop it or read its exit, so it is killed,
        as that process's own children would die with it."""
        fd = sock.fileno()
        for pid in [p for p, f in self.owner.items() if f == fd]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            self.owner[pid] = -1  # reaped, never reported
        del self.socks[fd]
        sock.close()


def serve(
    kind: str,
    control: socket.socket,
    listener: socket.socket | None = None,
    environment: str = "",
) -> None:
    """Fork a process per order from the control connection or any worker that connects
    to `listener`, until every connection has ended and what was forked has exited."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda _sig, _frame: None)
    signal.set_wakeup_fd(wake_w)
    zygote = os.getpid()
    clients = _Clients(control)
    gc.collect()
    gc.freeze()  # keep the imported heap out of the forked processes' copy-on-write faults
    ready = {"ready": True, "environment": environment}
    send(control, ready)
    while clients.socks or clients.owner:
        watched = [*clients.socks, wake_r] + ([listener.fileno()] if listener else [])
        readable, _, _ = select.select(watched, [], [], 1.0)
        if wake_r in readable:
            with contextlib.suppress(BlockingIOError):
                while os.read(wake_r, 512):
                    pass
        clients.reap()
        if listener is not None and listener.fileno() in readable:
            with contextlib.suppress(OSError):
                worker, _ = listener.accept()
                clients.socks[worker.fileno()] = worker
                send(worker, ready)
        for fd in [f for f in readable if f in clients.socks]:
            sock = clients.socks[fd]
            try:
                data, fds, _flags, _addr = socket.recv_fds(sock, MAX_MESSAGE, 1)
            except OSError:
                data, fds = b"", []
            if not data:  # its end closed it
                if sock is control and listener is not None:
                    listener.close()  # no new workers once the owner has closed the pool
                    listener = None
                clients.drop(sock)
                continue
            try:
                order = json.loads(data)
                if threading.active_count() > 1:  # a fork would copy another thread's locks
                    raise RuntimeError(f"{threading.active_count()} threads in the zygote")
                pid = os.fork()
            except Exception as exc:
                for extra in fds:
                    os.close(extra)
                with contextlib.suppress(OSError):
                    send(sock, {"error": f"{type(exc).__name__}: {exc}"})
                continue
            if pid == 0:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                for other in clients.socks.values():
                    other.close()
                if listener is not None:
                    listener.close()
                os.close(wake_r)
                os.close(wake_w)
                _run_forked(kind, order, fds, zygote)
            clients.owner[pid] = fd
            for extra in fds:
                os.close(extra)
            with contextlib.suppress(OSError):
                send(sock, {"pid": pid})


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m undobench_gym.services.warm")
    parser.add_argument("kind", choices=KINDS)
    parser.add_argument("--listen-fd", type=int, help="also serve workers that connect here")
    parser.add_argument("--environment", default="", help="told to each connection when ready")
    args = parser.parse_args()
    # A listening socket its owner bound (so workers can connect before this starts).
    listener = socket.socket(fileno=args.listen_fd) if args.listen_fd is not None else None
    # The socket moves off stdin, which a forked process gives to /dev/null.
    try:
        sock = socket.socket(fileno=os.dup(0))
    except OSError as exc:
        raise SystemExit(f"stdin must be a SOCK_SEQPACKET socket from its worker: {exc}") from exc
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    for module in PRELOAD[args.kind]:
        importlib.import_module(module)
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the owner went away
        serve(args.kind, sock, listener, args.environment)


if __name__ == "__main__":
    main()
