"""The first process of an external agent's sandbox, and the byte relay both sides use.

`sandbox.py` starts it as root under `unshare --net --pid --mount-proc --fork
--kill-child`, so it is process 1 of a fresh PID namespace, in a network namespace that
holds only a loopback interface, with a /proc that shows the namespace's processes only:

    python -I -S jail.py --user UID:GID --relay PORT=SOCKET ... -- PROGRAM ARGS...

It brings the loopback up, listens on 127.0.0.1:PORT for each `--relay` and carries every
connection to the Unix socket SOCKET, which the harness serves on the other side (the MCP
server's port, and the ports the user allowed), then runs the program as UID:GID with no
supplementary groups and `no_new_privs` (no setuid binary gives root back). It forwards
SIGTERM, SIGINT and SIGHUP to the program, reaps every process, and exits with the
program's code (128+N for signal N) as soon as the program exits: the kernel then kills
whatever the program left in the namespace.

Standard library only, and nothing of the project: it runs with `-I -S`, as root.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import fcntl
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from functools import partial

_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_PR_SET_NO_NEW_PRIVS = 38
CHUNK = 65536
THREAD = "undobench-relay"


def splice(a: socket.socket, b: socket.socket) -> None:
    """Copy bytes both ways until both sides are done, then close both."""

    def one(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(CHUNK):
                dst.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    back = threading.Thread(target=one, args=(b, a), name=THREAD, daemon=True)
    back.start()
    one(a, b)
    back.join()
    a.close()
    b.close()


class Relay:
    """Accept on `listener`; carry each connection to a new one from `connect`."""

    def __init__(self, listener: socket.socket, connect: Callable[[], socket.socket]) -> None:
        self.listener = listener
        self.connect = connect
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False

    def start(self) -> Relay:
        threading.Thread(target=self._accept, daemon=True, name=THREAD).start()
        return self

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._carry, args=(conn,), name=THREAD, daemon=True).start()

    def _carry(self, conn: socket.socket) -> None:
        try:
            upstream = self.connect()
        except OSError:
            conn.close()
            return
        with self._lock:
            if self._closed:
                conn.close()
                upstream.close()
                return
            self._open.update((conn, upstream))
        splice(conn, upstream)
        with self._lock:
            self._open.difference_update((conn, upstream))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            live = list(self._open)
        for sock in (self.listener, *live):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


def listen_tcp(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(64)
    return sock


def connect_unix(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        raise
    return sock


def loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifreq = fcntl.ioctl(s, _SIOCGIFFLAGS, struct.pack("16sH22x", b"lo", 0))
        flags = struct.unpack("16sH", ifreq[:18])[1]
        fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | _IFF_UP))


def _drop_privileges(uid: int, gid: int) -> Callable[[], None]:
    libc = ctypes.CDLL(None, use_errno=True)

    def drop() -> None:  # in the child, before exec; no thread runs in the jail yet
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")

    return drop


def _relay_arg(text: str) -> tuple[int, str]:
    port, _, path = text.partition("=")
    return int(port), path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="jail")
    p.add_argument("--user", required=True, help="UID:GID")
    p.add_argument("--relay", type=_relay_arg, action="append", default=[])
    p.add_argument("program", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    uid, gid = (int(x) for x in args.user.split(":"))
    loopback_up()
    # Every listener is bound before the program starts (a connection waits in the
    # backlog), and no relay thread runs before the fork: preexec_fn is safe.
    relays = [Relay(listen_tcp(port), partial(connect_unix, path)) for port, path in args.relay]
    try:
        proc = subprocess.Popen(program, preexec_fn=_drop_privileges(uid, gid), close_fds=True)
    except (OSError, subprocess.SubprocessError) as exc:
        print(
            f"sandbox: cannot run {program[0]!r} as uid {uid}: {exc} (the agent runs as an "
            "unprivileged user: put the program where that user can read it, or set "
            "UNDOBENCH_AGENT_SANDBOX=off)",
            file=sys.stderr,
            flush=True,
        )
        return 127
    for relay in relays:
        relay.start()

    def forward(sig: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, sig)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    while True:  # process 1 reaps every orphan of the namespace
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 1
        if pid == proc.pid:
            code = os.waitstatus_to_exitcode(status)
            return 128 - code if code < 0 else code


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # the relays' threads go with it; the kernel ends the namespace
