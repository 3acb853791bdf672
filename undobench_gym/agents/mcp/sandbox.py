"""Where an external agent (`--agent cmd:...`) runs: it reaches its MCP server and nothing
else on the machine.

Sandboxed (as root on Linux, with util-linux's `unshare`), each episode's program runs
under `unshare --net --pid --mount-proc` with `jail.py` as the namespace's first process:

- **network**: its own namespace, with a loopback interface only. The episode's MCP port
  (and the ports the user allowed, below) listens there on 127.0.0.1 and is carried over
  a Unix socket to the harness's side; every other port of the machine (the stack's
  proxy, control and admin ports, any other service) and every other host is out of
  reach: there is no route to them.
- **user**: it runs as an unprivileged user (`nobody`, or `UNDOBENCH_AGENT_USER`), with no
  supplementary groups and `no_new_privs`, in a workdir it owns. Stack workdirs and the
  relay's sockets are root's, mode 0700; the stack processes' environment (their token)
  is readable by their own user only.
- **processes**: /proc shows the namespace's processes only, and when the program exits
  (or the harness stops it, or dies) the kernel ends everything it started.

`UNDOBENCH_AGENT_SANDBOX` says what to do: `auto` (the default) sandboxes where it can and
otherwise runs the program as the harness's user, with a warning and the reason in every
record (`agent_config.sandbox`); `require` refuses to run an agent it cannot sandbox;
`off` never sandboxes. More ports of 127.0.0.1 the agent may reach: every
`127.0.0.1:PORT` or `localhost:PORT` written in the template (its model server's URL,
say), and `UNDOBENCH_AGENT_ALLOW=PORT,PORT`.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import os
import pwd
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from undobench_gym.agents.mcp.jail import Relay
from undobench_gym.contract.errors import UndoBenchError
from undobench_gym.core.runtime.children import SPAWNER

MODE_ENV = "UNDOBENCH_AGENT_SANDBOX"
USER_ENV = "UNDOBENCH_AGENT_USER"
ALLOW_ENV = "UNDOBENCH_AGENT_ALLOW"
MODES = ("auto", "require", "off")
JAIL = str(Path(__file__).with_name("jail.py"))
NAMESPACES = ("--net", "--pid", "--mount-proc", "--fork", "--kill-child")
_LOOPBACK = re.compile(r"(?<![\w.])(?:127\.0\.0\.1|localhost):(\d{1,5})(?!\d)")
_PR_SET_PDEATHSIG = 1

log = logging.getLogger(__name__)
_warned: set[str] = set()


class Unavailable(Exception):
    """Why this machine or this program cannot be sandboxed."""


@dataclass(frozen=True)
class Policy:
    """What a launcher does with each episode's program; `record()` goes into every
    trial record (`agent_config`), so a result says whether its agent was isolated."""

    sandboxed: bool
    why: str = ""
    user: str = ""
    uid: int = -1
    gid: int = -1
    allow: tuple[int, ...] = ()

    def record(self) -> dict[str, Any]:
        if not self.sandboxed:
            return {"sandbox": {"isolated": False, "why": self.why}}
        return {
            "sandbox": {
                "isolated": True,
                "namespaces": ["net", "pid", "mount"],
                "user": self.user,
                "uid": self.uid,
                "allow": list(self.allow),
            }
        }


def decide(argv: list[str], template: str) -> Policy:
    """The policy for a `cmd:` template (its argument list `argv`), by `UNDOBENCH_AGENT_SANDBOX`."""
    mode = (os.environ.get(MODE_ENV) or "auto").strip().lower()
    if mode not in MODES:
        raise UndoBenchError(f"cmd: {MODE_ENV}={mode!r}; use one of {', '.join(MODES)}")
    if mode == "off":
        return Policy(False, why=f"{MODE_ENV}=off")
    try:
        return _sandboxed(argv, template)
    except Unavailable as exc:
        if mode == "require":
            raise UndoBenchError(
                f"cmd: {MODE_ENV}=require, but the agent cannot be sandboxed: {exc}"
            ) from None
        if str(exc) not in _warned:
            _warned.add(str(exc))
            log.warning("cmd: the agent runs without a sandbox: %s", exc)
        return Policy(False, why=str(exc))


def _sandboxed(argv: list[str], template: str) -> Policy:
    if not sys.platform.startswith("linux"):
        raise Unavailable("the sandbox needs Linux namespaces")
    if os.geteuid() != 0:
        raise Unavailable("not root (the sandbox makes namespaces and switches user)")
    if shutil.which("unshare") is None:
        raise Unavailable("no `unshare` on PATH (util-linux)")
    failed = namespaces_fail()
    if failed:
        raise Unavailable(f"`unshare {' '.join(NAMESPACES)}` fails here: {failed}")
    user, uid, gid = agent_user()
    needed = [(tempfile.gettempdir(), 1, "the temporary directory")]
    program = argv[0] if "{" in argv[0] else shutil.which(argv[0]) or argv[0]
    needed.append((program, 5, "the program"))
    needed += [(a, 4, "an argument") for a in argv[1:] if "{" not in a and _is_path(a)]
    if "mcp_stdio_config" in template:
        needed.append((sys.executable, 5, "the stdio relay's interpreter"))
    for path, bits, what in needed:
        if "{" not in path and not reachable(path, uid, gid, bits):
            raise Unavailable(f"{what} {path} is out of reach of the agent's user {user}")
    return Policy(True, user=user, uid=uid, gid=gid, allow=allowed_ports(template))


@functools.lru_cache(maxsize=1)
def namespaces_fail() -> str:
    """Why `unshare` cannot make the sandbox's namespaces here ('' when it can)."""
    try:
        proc = subprocess.run(
            ["unshare", *NAMESPACES, "true"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    return "" if proc.returncode == 0 else proc.stderr.strip() or f"exit {proc.returncode}"


def agent_user() -> tuple[str, int, int]:
    """(name, uid, gid) of the user the agent runs as: `UNDOBENCH_AGENT_USER` (a name or a
    uid), `nobody` by default; never root."""
    spec = os.environ.get(USER_ENV) or "nobody"
    try:
        entry = pwd.getpwuid(int(spec)) if spec.isdigit() else pwd.getpwnam(spec)
        name, uid, gid = entry.pw_name, entry.pw_uid, entry.pw_gid
    except KeyError:
        if not spec.isdigit():
            raise Unavailable(f"no user {spec!r} ({USER_ENV})") from None
        name, uid, gid = spec, int(spec), int(spec)  # a bare uid: its own group
    if uid == 0 or gid == 0:
        raise Unavailable(f"{USER_ENV}={spec!r} is root")
    return name, uid, gid


def allowed_ports(template: str) -> tuple[int, ...]:
    """Ports of 127.0.0.1 the agent may reach besides its MCP server's."""
    ports = {int(p) for p in _LOOPBACK.findall(template)}
    for item in filter(None, (os.environ.get(ALLOW_ENV) or "").replace(" ", "").split(",")):
        host, _, port = item.rpartition(":")
        if host not in ("", "127.0.0.1", "localhost") or not port.isdigit():
            raise UndoBenchError(f"cmd: {ALLOW_ENV}: {item!r} is not PORT or 127.0.0.1:PORT")
        ports.add(int(port))
    if not all(0 < p < 65536 for p in ports):
        raise UndoBenchError(f"cmd: a port out of range in {sorted(ports)}")
    return tuple(sorted(ports))


def _is_path(arg: str) -> bool:
    return "/" in arg and os.path.exists(arg)


def _may(st: os.stat_result, uid: int, gid: int, bits: int) -> bool:
    shift = 6 if st.st_uid == uid else 3 if st.st_gid == gid else 0
    return (st.st_mode >> shift) & bits == bits


def reachable(path: str, uid: int, gid: int, bits: int) -> bool:
    """Whether `uid:gid` (no other group) may walk to `path` and has `bits` (4 read,
    1 execute) on it, along the path as written and along its resolved form."""
    for form in {os.path.abspath(path), os.path.realpath(path)}:
        try:
            if not all(_may(os.stat(d), uid, gid, 1) for d in Path(form).parents):
                return False
            st = os.stat(form)
        except OSError:
            return False
        need = bits | 1 if stat.S_ISDIR(st.st_mode) else bits
        if not _may(st, uid, gid, need):
            return False
    return True


def _die_with_harness() -> None:
    """In the sandbox's `unshare` before exec: SIGKILL when the harness goes (it blocks
    SIGTERM while it waits); `--kill-child` then ends the namespace."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class Jail:
    """One episode's sandbox: the harness's side of the relays, and the command line."""

    def __init__(self, policy: Policy, workdir: Path, mcp_url: str | None) -> None:
        self.policy = policy
        mcp_port = urlsplit(mcp_url).port if mcp_url else None
        self.ports = sorted({*policy.allow, *([mcp_port] if mcp_port else [])})
        # root's, mode 0700: the agent's user reaches the sockets only through the jail
        self.dir = Path(tempfile.mkdtemp(prefix="undobench-relay-"))
        self.relays: list[tuple[int, str, Relay]] = []
        try:
            for port in self.ports:
                path = str(self.dir / f"{port}.sock")
                listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                listener.bind(path)
                listener.listen(64)
                connect = functools.partial(socket.create_connection, ("127.0.0.1", port))
                self.relays.append((port, path, Relay(listener, connect).start()))
            for item in (workdir, *workdir.iterdir()):  # the agent's own; its log is ours
                if item.name != "agent.log":
                    os.chown(item, policy.uid, policy.gid, follow_symlinks=False)
        except BaseException:
            self.close()
            raise

    def command(self, argv: list[str]) -> list[str]:
        relays = [f"--relay={port}={path}" for port, path, _ in self.relays]
        user = f"{self.policy.uid}:{self.policy.gid}"
        jail = [sys.executable, "-I", "-S", JAIL, "--user", user, *relays, "--"]
        return ["unshare", *NAMESPACES, "--", *jail, *argv]

    def popen(self, argv: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        # from the spawner's long-lived thread: the death signal is armed per thread
        return SPAWNER.popen(self.command(argv), preexec_fn=_die_with_harness, **kwargs)

    def close(self) -> None:
        for _port, _path, relay in self.relays:
            relay.close()
        self.relays.clear()
        shutil.rmtree(self.dir, ignore_errors=True)
