"""A stack process started before it is needed: `python -m undobench_gym.services.warm
service|proxy` imports what a domain service (FastAPI, SQLAlchemy, uvicorn, the service
kit) or the fault proxy (mitmproxy, its control API) needs, about a second, then waits
for one line on stdin, JSON with the command line it would have been started with, the
environment to add, and its log, and becomes that process. A sweep worker keeps one of
each ready (`core.runtime.warm`), so a stack it starts later waits for the domain's own
import and the start, not for the interpreter's.

stdin at EOF before the line (the worker went away, or dropped it) exits quietly.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from typing import Any

KINDS = ("service", "proxy")


#: The module each kind becomes (what the runtime would start with `python -m`).
ENTRY = {
    "service": "undobench_gym.services.domains._service.server",
    "proxy": "undobench_gym.services.proxy.launch",
}
#: What each kind imports while it waits: its entry point, and for the proxy the addon
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


def _become(order: dict[str, Any]) -> list[str]:
    """Take on the process's real log and environment; return its arguments."""
    log = os.open(order["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    for fd in order["redirect"]:  # stderr, and stdout where it is not the ready pipe
        os.dup2(log, fd)
    os.close(log)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.environ.update(order["env"])
    argv: list[str] = order["argv"]
    return argv


def main() -> None:
    kind = sys.argv[1] if len(sys.argv) == 2 else ""
    if kind not in KINDS:
        raise SystemExit(f"usage: python -m undobench_gym.services.warm {{{','.join(KINDS)}}}")
    for module in PRELOAD[kind]:
        importlib.import_module(module)
    line = sys.stdin.readline()
    if not line.strip():
        raise SystemExit(0)
    argv = _become(json.loads(line))
    entry = importlib.import_module(ENTRY[kind])
    if kind == "proxy":  # mitmproxy reads its arguments from sys.argv
        sys.argv = [sys.argv[0], *argv]
        entry.main()
    else:
        entry.main(argv)


if __name__ == "__main__":
    main()
