"""The harness's control endpoint for an `EpisodeHost`: a separate local HTTP port, never
the agent's MCP session, so the agent cannot start, end or inspect an episode.

    POST /reset   {"seed": 1, "fault": "lost-ack" | null, "workflow": "..." | null}
                  -> {"running", "task", "task_instance", "tools"}
    POST /finish  -> {"verdict", "episode", "harness"} (ends a running episode truncated)
    GET  /episode -> the public view and, once it is over, the verdict

Binds 127.0.0.1 only, and answers only requests that carry its token
(`Authorization: Bearer TOKEN`; 401 otherwise): an agent on the same machine that finds the
port still cannot start, end or inspect an episode. A malformed request gets a 400 with a
JSON error, never a crash.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from undobench_gym.contract.errors import UndoBenchError
from undobench_gym.contract.stack_auth import authorized, new_token
from undobench_gym.core.mcp.host import EpisodeHost

MAX_BODY = 64 * 1024


def _reset_args(body: Any) -> tuple[int, str | None, str | None]:
    if not isinstance(body, dict):
        raise ValueError("the body must be a JSON object")
    seed, fault, workflow = body.get("seed"), body.get("fault"), body.get("workflow")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ValueError("`seed` must be an integer")
    for name, value in (("fault", fault), ("workflow", workflow)):
        if value is not None and not isinstance(value, str):
            raise ValueError(f"`{name}` must be a string or null")
    return seed, fault, workflow


def _handler(host: EpisodeHost, token: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: stdout may be the MCP stdio transport

        def _send(self, status: int, value: Any) -> None:
            data = json.dumps(value, default=str).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> Any:
            n = int(self.headers.get("Content-Length") or 0)
            if n > MAX_BODY:
                raise ValueError("request body too large")
            raw = self.rfile.read(n) if n else b"{}"
            try:
                return json.loads(raw)
            except json.JSONDecodeError as exc:
                raise ValueError(f"the body is not JSON: {exc}") from None

        def _allowed(self) -> bool:
            if authorized(self.headers.get("Authorization"), token):
                return True
            self._send(401, {"error": "the control endpoint needs its token (Bearer)"})
            return False

        def do_GET(self) -> None:
            if not self._allowed():
                return
            if self.path != "/episode":
                self._send(404, {"error": f"no route GET {self.path}"})
                return
            self._send(200, {**host.public(), **host.result()})

        def do_POST(self) -> None:
            if not self._allowed():
                return
            try:
                if self.path == "/reset":
                    seed, fault, workflow = _reset_args(self._body())
                    self._send(200, host.reset(seed, fault=fault, workflow=workflow))
                elif self.path == "/finish":
                    self._send(200, host.finish())
                else:
                    self._send(404, {"error": f"no route POST {self.path}"})
            except (ValueError, UndoBenchError) as exc:
                self._send(400, {"error": str(exc)})

    return Handler


class ControlServer:
    """`with ControlServer(host) as control:` serves on `control.url` from a thread; every
    request must carry `control.token` (a new random one unless given)."""

    def __init__(self, host: EpisodeHost, port: int = 0, token: str | None = None) -> None:
        self.token = token or new_token()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _handler(host, self.token))
        self._server.daemon_threads = True
        self.port: int = self._server.server_address[1]
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ControlServer:
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="mcp-control", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> ControlServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
