"""An MCP server over a tool session, with the official SDK, on stdio or streamable HTTP.

The SDK's low-level `Server` is used rather than its decorator front end (`MCPServer`,
1.x's `FastMCP`), because the tools are not Python functions: their names, descriptions
and input schemas are the env's, known only at `reset`, and they change with the workflow.
Input is not validated by the SDK: the env checks every call itself and answers a bad one
with its own invalid-action observation, the same text the direct path gives. A call runs
in a worker thread (a step is blocking HTTP through the fault proxy), one at a time per
session.

The HTTP server listens on 127.0.0.1 only, with the SDK's DNS-rebinding protection on.
Written against the SDK's 2.x API; `sdk` adapts it to 1.x (Python 3.11).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Protocol

import anyio
import uvicorn
from mcp import types
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from undobench_gym.core.mcp.sdk import LowServer, make_server
from undobench_gym.core.mcp.tools import mcp_tool

HOST = "127.0.0.1"
PATH = "/mcp"
INSTRUCTIONS = (
    "Tools of one task's services. Each call is one request to the service; "
    "call `finish` once when the task is done or cannot be done."
)


class ToolSession(Protocol):
    """What the server serves: the current episode's tools and one call at a time."""

    def tools(self) -> list[dict[str, Any]]: ...

    def call(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult: ...


def build_server(session: ToolSession, *, annotations: bool = True) -> LowServer:
    """The SDK server for `session`; `annotations=False` lists the tools without hints.
    The tool list is the episode's, whole on every request (no pages)."""
    lock = anyio.Lock()

    async def on_list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[mcp_tool(s, annotations=annotations) for s in session.tools()]
        )

    async def on_call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        async with lock:  # one step at a time, in the order the calls arrived
            return await anyio.to_thread.run_sync(session.call, params.name, arguments)

    def input_schema(name: str) -> dict[str, Any] | None:
        for schema in session.tools():
            if schema["function"]["name"] == name:
                found: dict[str, Any] | None = schema["function"].get("parameters")
                return found
        return None

    return make_server(
        "undobench",
        instructions=INSTRUCTIONS,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
        get_tool_input_schema=input_schema,
    )


async def serve_stdio(server: LowServer) -> None:
    """Serve one client on this process's stdin/stdout until it closes them."""
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


class _Endpoint:
    """The streamable-HTTP endpoint as an ASGI app (Starlette routes it as one)."""

    def __init__(self, manager: StreamableHTTPSessionManager) -> None:
        self.manager = manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.manager.handle_request(scope, receive, send)


def http_app(server: LowServer) -> Starlette:
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{HOST}:*", "localhost:*"],
        allowed_origins=[f"http://{HOST}:*", "http://localhost:*"],
    )
    manager = StreamableHTTPSessionManager(app=server, security_settings=security)

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    return Starlette(routes=[Route(PATH, endpoint=_Endpoint(manager))], lifespan=lifespan)


class HttpServer:
    """Streamable HTTP on 127.0.0.1 (`port=0`: a free one), in a thread (`start`, `wait`,
    `stop`, or `with`) or in the foreground (`serve`)."""

    def __init__(self, server: LowServer, port: int = 0) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((HOST, port))
        self.port: int = self._sock.getsockname()[1]
        config = uvicorn.Config(
            http_app(server), log_level="warning", access_log=False, timeout_graceful_shutdown=2
        )
        self._uvicorn = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}{PATH}"

    def serve(self) -> None:
        try:
            self._uvicorn.run(sockets=[self._sock])
        finally:
            self._sock.close()

    def start(self, timeout: float = 10.0) -> HttpServer:
        self._thread = threading.Thread(target=self.serve, name="mcp-http", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._uvicorn.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                self.stop()
                raise RuntimeError(f"the MCP server on {self.url} did not start")
            time.sleep(0.01)
        return self

    def wait(self) -> None:
        """Block until the server stops (signals still reach the calling thread)."""
        while self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout=0.5)

    def stop(self) -> None:
        self._uvicorn.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self._sock.close()

    def __enter__(self) -> HttpServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
