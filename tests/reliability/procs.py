"""Process facts from /proc: children, command lines, open files, listening ports, RSS.

The reliability tests and `benchmarks/bench_soak.py` need to find a stack's processes
without reaching into the harness, and to count what they hold. Linux only (as the
harness is); a process that exits while we read it simply drops out.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

SERVICE_MARK = "undobench_gym.services.domains._service.server"
PROXY_MARK = "undobench_gym.services.proxy.launch"
WORKER_MARK = "spawn_main"  # a multiprocessing "spawn" child: a sweep's worker process
#: A stack-process zygote (`services/warm.py`), and what it forks: a service or a proxy
#: whose command line is the zygote's (its last word the kind).
ZYGOTE_MARK = "undobench_gym.services.warm"
_CLK_TCK = os.sysconf("SC_CLK_TCK")
_LISTEN = "0A"


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    state: str
    cmdline: tuple[str, ...]
    start_ticks: int = 0

    @property
    def role(self) -> str | None:
        text = " ".join(self.cmdline)
        if SERVICE_MARK in text:
            return "service"
        if PROXY_MARK in text:
            return "proxy"
        if WORKER_MARK in text:
            return "worker"
        if ZYGOTE_MARK in text:
            parent = read_proc(self.ppid)
            forked = parent is not None and ZYGOTE_MARK in " ".join(parent.cmdline)
            return self.cmdline[-1] if forked else "zygote"
        return None

    @property
    def age_s(self) -> float:
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return uptime - self.start_ticks / _CLK_TCK


def read_proc(pid: int) -> Proc | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name sits in parentheses and may itself hold spaces or ')'.
    fields = stat[stat.rfind(")") + 2 :].split()
    cmd = tuple(p.decode(errors="replace") for p in raw.split(b"\0") if p)
    return Proc(
        pid=pid, ppid=int(fields[1]), state=fields[0], cmdline=cmd, start_ticks=int(fields[19])
    )


def all_procs() -> list[Proc]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            proc = read_proc(int(entry))
            if proc is not None:
                out.append(proc)
    return out


def children(pid: int | None = None) -> list[Proc]:
    """Live (not zombie) direct children of `pid` (default: this process)."""
    parent = os.getpid() if pid is None else pid
    return [p for p in all_procs() if p.ppid == parent and p.state != "Z"]


def descendants(pid: int | None = None) -> list[Proc]:
    """Live descendants of `pid` (default: this process), children first."""
    procs = [p for p in all_procs() if p.state != "Z"]
    found, frontier = [], [os.getpid() if pid is None else pid]
    while frontier:
        kids = [p for p in procs if p.ppid in frontier]
        found += kids
        frontier = [p.pid for p in kids]
    return found


def stack_children(pid: int | None = None, role: str | None = None) -> list[Proc]:
    """Service and proxy processes whose parent is `pid` (default: this process)."""
    return [p for p in children(pid) if p.role in ("service", "proxy") and role in (None, p.role)]


def stack_processes(pid: int | None = None, role: str | None = None) -> list[Proc]:
    """Services, proxies, zygotes and sweep workers anywhere below `pid` (default: this
    process)."""
    return [p for p in descendants(pid) if p.role is not None and role in (None, p.role)]


def alive(pid: int) -> bool:
    proc = read_proc(pid)
    return proc is not None and proc.state != "Z"


def wait_gone(pids: Iterable[int], timeout: float = 10.0) -> list[int]:
    """Wait until none of `pids` runs; returns those still running at the deadline."""
    pending = list(pids)
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        pending = [p for p in pending if alive(p)]
        if pending:
            time.sleep(0.05)
    return pending


def kill(pid: int, sig: signal.Signals = signal.SIGKILL) -> bool:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
        return True
    return False


def fd_count(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except (FileNotFoundError, PermissionError):
        return 0


def fd_targets(pid: int) -> list[str]:
    """What each open descriptor points at (`socket:[N]`, `pipe:[N]`, a path)."""
    out: list[str] = []
    base = f"/proc/{pid}/fd"
    try:
        names = os.listdir(base)
    except (FileNotFoundError, PermissionError):
        return out
    for name in names:
        with contextlib.suppress(OSError):
            out.append(os.readlink(f"{base}/{name}"))
    return sorted(out)


def rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except FileNotFoundError:
        pass
    return 0


def _listening_inodes(pid: int) -> dict[int, int]:
    """Listening TCP sockets in `pid`'s network namespace: inode -> port."""
    out: dict[int, int] = {}
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) > 9 and cols[3] == _LISTEN:
                out[int(cols[9])] = int(cols[1].rsplit(":", 1)[1], 16)
    return out


def listening_ports(pid: int) -> list[int]:
    """TCP ports `pid` itself listens on (sockets among its open descriptors)."""
    inodes = _listening_inodes(pid)
    ports = []
    for target in fd_targets(pid):
        if target.startswith("socket:["):
            inode = int(target[8:-1])
            if inode in inodes:
                ports.append(inodes[inode])
    return sorted(ports)


def port_open(port: int) -> bool:
    """Whether anything on this host listens on 127.0.0.1:`port` (read from /proc)."""
    return port in set(_listening_inodes(os.getpid()).values())
