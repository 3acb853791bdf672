"""The host INPUT rule of the docker runtime: whatever enters the host from a stack's
internal bridge is dropped (docker.py's docstring says why), installed per stack and
removed with it; without iptables (or root) a warning is logged once and nothing else."""

from __future__ import annotations

import logging
import shutil
import subprocess
from typing import Any

#: The docker runtime's logger: the warning is about its stacks.
log = logging.getLogger("undobench_gym.core.runtime.docker")
_warned: set[str] = set()


def _warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        log.warning(message)


def _iptables(*args: str) -> subprocess.CompletedProcess[str] | None:
    """Run `iptables -w ARGS`; None where it is not installed or cannot run."""
    exe = shutil.which("iptables")
    if exe is None:
        return None
    try:
        return subprocess.run([exe, "-w", *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None


class HostInputDrop:
    """The INPUT rule dropping whatever enters the host from one internal bridge."""

    def __init__(self, bridge: str) -> None:
        self.bridge = bridge
        self.spec = ["INPUT", "-i", bridge, "-j", "DROP"]

    def install(self) -> bool:
        proc = _iptables("-I", *self.spec)
        if proc is None or proc.returncode != 0:
            why = (
                "not found or not runnable"
                if proc is None
                else proc.stderr.strip() or str(proc.returncode)
            )
            _warn_once(
                "iptables",
                f"iptables failed ({why}): docker stacks run without the INPUT rule that "
                "keeps service containers from reaching the host through their bridge's "
                "gateway address (run as root with iptables to have it)",
            )
            return False
        return True

    def remove(self) -> None:
        """Delete every copy of the rule (a crashed run may have left one)."""
        for _ in range(16):
            proc = _iptables("-D", *self.spec)
            if proc is None or proc.returncode != 0:
                return


def bridge_name(network: Any) -> str:
    return "br-" + str(network.id)[:12]
