"""A zygote for stack processes: `python -m undobench_gym.services.warm service|proxy`
imports once what a domain service (FastAPI, SQLAlchemy, uvicorn, the service kit) or the
fault proxy (mitmproxy, its control API) needs, about a second, then forks one process per
order. A forked process shares those imports instead of repeating them: a sweep worker
that keeps one zygote of each kind (`core.runtime.warm`) starts its later stacks in a
fraction of a cold start's time and CPU.

The zygote's stdin is one end of a `SOCK_SEQPACKET` socket pair; the worker holds the
other. Each order is one message, JSON with the command line the process would have been
started with, the environment to add and its log, and at most one file descriptor (the
pipe its stdout goes to, for a service whose ready line the worker reads). Each message
the zygote sends is one JSON object: `{"ready": true}` once its imports are done,
`{"pid": N}` for each order, `{"exit": N, "code": C}` when a forked process exits (C as
`subprocess` gives it: -S for signal S), `{"error": "..."}` for an order it could not
fork. A forked process leads its own session, dies with the zygote (PR_SET_PDEATHSIG),
and the zygote with its worker.

At end of file on the socket (the worker closed the pool, or went away) the zygote exits
once its forked processes have.
"""

from __future__ import annotations

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


def _reap(sock: socket.socket | None, live: set[int]) -> None:
    while live:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            live.clear()
            return
        if pid == 0:
            return
        live.discard(pid)
        if sock is not None:
            with contextlib.suppress(OSError):
                send(sock, {"exit": pid, "code": os.waitstatus_to_exitcode(status)})


def serve(kind: str, sock: socket.socket) -> None:
    """Fork a process per order until end of file, then wait for the forked ones."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGCHLD, lambda _sig, _frame: None)
    signal.set_wakeup_fd(wake_w)
    zygote, live = os.getpid(), set[int]()
    gc.collect()
    gc.freeze()  # keep the imported heap out of the forked processes' copy-on-write faults
    send(sock, {"ready": True})
    while True:
        readable, _, _ = select.select([sock.fileno(), wake_r], [], [])
        if wake_r in readable:
            with contextlib.suppress(BlockingIOError):
                while os.read(wake_r, 512):
                    pass
        _reap(sock, live)
        if sock.fileno() not in readable:
            continue
        try:
            data, fds, _flags, _addr = socket.recv_fds(sock, MAX_MESSAGE, 1)
        except OSError:
            data, fds = b"", []
        if not data:
            break
        try:
            order = json.loads(data)
            if threading.active_count() > 1:  # a fork would copy another thread's locks
                raise RuntimeError(f"{threading.active_count()} threads in the zygote")
            pid = os.fork()
        except Exception as exc:
            for fd in fds:
                os.close(fd)
            send(sock, {"error": f"{type(exc).__name__}: {exc}"})
            continue
        if pid == 0:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            sock.close()
            os.close(wake_r)
            os.close(wake_w)
            _run_forked(kind, order, fds, zygote)
        live.add(pid)
        for fd in fds:
            os.close(fd)
        send(sock, {"pid": pid})
    sock.close()
    while live:  # the forked processes outlive the worker's pool, not the zygote
        with contextlib.suppress(InterruptedError):
            select.select([wake_r], [], [], 1.0)
        with contextlib.suppress(BlockingIOError):
            while os.read(wake_r, 512):
                pass
        _reap(None, live)


def main() -> None:
    kind = sys.argv[1] if len(sys.argv) == 2 else ""
    if kind not in KINDS:
        raise SystemExit(f"usage: python -m undobench_gym.services.warm {{{','.join(KINDS)}}}")
    # The socket moves off stdin, which a forked process gives to /dev/null.
    try:
        sock = socket.socket(fileno=os.dup(0))
    except OSError as exc:
        raise SystemExit(f"stdin must be a SOCK_SEQPACKET socket from its worker: {exc}") from exc
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    for module in PRELOAD[kind]:
        importlib.import_module(module)
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the worker went away
        serve(kind, sock)


if __name__ == "__main__":
    main()
