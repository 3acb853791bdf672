"""`undobench view DIR`: serve a run's report.html on 127.0.0.1 (writing it first when it is
missing) and print its URL; in the foreground until Ctrl-C.

report.html needs no server (it is self-contained); this is for a run directory on another
machine (an SSH tunnel to the port) and for a URL to paste. Only the loopback address is
ever bound, and only the run directory is served.
"""

from __future__ import annotations

import argparse
import functools
import sys
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from undobench_gym.core.extras import require
from undobench_gym.harness.cli.args import run_dir

HOST = "127.0.0.1"


def add(sub: Any) -> None:
    v = sub.add_parser(
        "view",
        help="serve the run's HTML report on 127.0.0.1 and print its URL",
        description="Serve DIR/report.html (written first if missing, or with --rebuild) on "
        "127.0.0.1 and print the URL. Stops on Ctrl-C.",
    )
    v.add_argument("dir", help="run directory (with trials.jsonl)")
    v.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    v.add_argument("--rebuild", action="store_true", help="rewrite report.html from trials.jsonl")
    v.set_defaults(func=view)


class _Quiet(SimpleHTTPRequestHandler):
    """The run directory's files, without a log line per request."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


def make_server(directory: Path, port: int = 0) -> ThreadingHTTPServer:
    """An HTTP server for `directory` on 127.0.0.1 (port 0: a free one), not yet serving."""
    handler = functools.partial(_Quiet, directory=str(directory))
    return ThreadingHTTPServer((HOST, port), handler)


def view(args: argparse.Namespace) -> int:
    from undobench_gym.evaluation.html import REPORT_FILE

    out = run_dir(args.dir)
    if args.rebuild or not (out / REPORT_FILE).exists():
        require("eval", "writing report.html")
        from undobench_gym.evaluation.report import write_reports

        print(f"writing {out / REPORT_FILE} ...", flush=True)
        write_reports(out, html=True)
    try:
        server = make_server(out, args.port)
    except OSError as exc:
        print(f"undobench: error: cannot listen on {HOST}:{args.port}: {exc}", file=sys.stderr)
        return 2
    url = f"http://{HOST}:{server.server_address[1]}/{REPORT_FILE}"
    print(f"serving {out} at {url} (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped", flush=True)
    finally:
        server.server_close()
    return 0
