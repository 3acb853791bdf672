"""Start mitmdump with the stack addons: `undobench-proxy [mitmdump options]`.

The addon script's path is resolved here, so the same command works from a source
checkout, a virtual environment, or the container image.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

DEFAULT_OPTIONS = [
    "--set",
    "flow_detail=0",
    "--set",
    "termlog_verbosity=warn",
    "--set",
    "connection_strategy=lazy",
]


def addon_script() -> str:
    return str(Path(__file__).with_name("stack.py"))


def use_uvloop() -> None:
    """Run mitmproxy's event loop on uvloop (a core dependency, not on Windows): its
    transports and loop are C, which takes a share off the proxy's CPU per flow.
    mitmproxy starts its loop with `asyncio.run`, so the policy is the hook."""
    try:
        import uvloop
    except ImportError:
        return  # asyncio's own loop, as on Windows
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


def main() -> None:
    from mitmproxy.tools.main import mitmdump

    use_uvloop()

    sys.argv = ["mitmdump", "-s", addon_script(), *DEFAULT_OPTIONS, *sys.argv[1:]]
    mitmdump()


if __name__ == "__main__":
    main()
