"""What differs between the MCP SDK's 2.x line and its 1.x line, in one place.

The front end is written against 2.x (Python 3.12+, `mcp>=2`): a low-level server takes
its handlers at construction (`on_list_tools(ctx, params)`, `on_call_tool(ctx, params)`),
`streamable_http_client` yields a (read, write) pair, and the protocol types are pydantic
models with snake_case fields and camelCase wire names. Python 3.11 stays on 1.x: 2.x
needs httpx2, whose httpcore2 needs h11>=0.16, and mitmproxy 11 (the last for 3.11) pins
h11<=0.14. The 1.x adapters below go when 3.11 does (`V2` is then always true).

- `make_server`: a low-level `Server` from 2.x-style handlers (1.x: its decorators).
- `http_streams`: the streamable-HTTP client transport as a (read, write) pair.
- `memory_session`: an initialized `ClientSession` on an in-memory transport to a server
  in the same process (the same JSON-RPC messages as over a pipe, the initialize handshake
  of either line).
- `wire`: a protocol object as its JSON (camelCase names on either line), for reading
  fields whose Python names differ (`inputSchema`/`input_schema`, `isError`/`is_error`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from importlib.metadata import version
from typing import Any

import anyio
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.server.lowlevel import Server
from pydantic import BaseModel

#: The installed SDK's major version, and whether it is the 2.x line.
MAJOR = int(version("mcp").split(".")[0])
V2 = MAJOR >= 2

#: The SDK's low-level server (generic over one type on 2.x, two on 1.x: left open here).
LowServer = Any

ListToolsHandler = Callable[[Any, Any], Awaitable[types.ListToolsResult]]
CallToolHandler = Callable[[Any, types.CallToolRequestParams], Awaitable[types.CallToolResult]]


def make_server(
    name: str,
    *,
    instructions: str,
    on_list_tools: ListToolsHandler,
    on_call_tool: CallToolHandler,
    get_tool_input_schema: Callable[[str], Mapping[str, Any] | None] | None = None,
) -> LowServer:
    """A low-level server with 2.x's handler signatures, on either line. Neither line
    validates a call's arguments here (1.x: `validate_input=False`; 2.x's low-level server
    does not): the env answers a bad call itself. `get_tool_input_schema` (2.x) spares the
    2026-07-28 HTTP transport a `tools/list` round before each call it checks."""
    server_class: Any = Server
    if V2:
        return server_class(
            name,
            instructions=instructions,
            on_list_tools=on_list_tools,
            on_call_tool=on_call_tool,
            get_tool_input_schema=get_tool_input_schema,
        )
    server = server_class(name, instructions=instructions)

    # No request argument: 1.x also calls this with none, to fill its tool cache before a
    # call to a tool it has not listed (an unknown tool then still reaches `on_call_tool`).
    async def list_tools() -> list[types.Tool]:
        return (await on_list_tools(None, None)).tools

    async def call_tool(tool: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        params = types.CallToolRequestParams(name=tool, arguments=arguments)
        return await on_call_tool(None, params)

    server.list_tools()(list_tools)
    server.call_tool(validate_input=False)(call_tool)
    return server


@asynccontextmanager
async def http_streams(url: str) -> AsyncIterator[tuple[Any, Any]]:
    """The client side of streamable HTTP to `url`: (read, write) for a `ClientSession`
    (1.x also yields a session-id getter, unused here)."""
    async with streamable_http_client(url) as streams:
        yield streams[0], streams[1]


@asynccontextmanager
async def memory_session(server: LowServer) -> AsyncIterator[ClientSession]:
    """An initialized client session with `server`, which runs in this event loop."""
    if V2:
        from mcp import Client  # type: ignore[attr-defined,unused-ignore]  # 2.x only

        # "legacy": the initialize handshake over in-memory JSON-RPC streams, as on 1.x
        # (the default would call the handlers directly); no response cache: the tool
        # list is the episode's and changes with it.
        async with Client(server, mode="legacy", cache=None) as client:
            session: ClientSession = client.session
            yield session
        return
    from mcp.shared.memory import create_client_server_memory_streams

    async with (
        create_client_server_memory_streams() as (client_streams, server_streams),
        anyio.create_task_group() as tg,
    ):
        options = server.create_initialization_options()
        tg.start_soon(server.run, server_streams[0], server_streams[1], options)
        try:
            async with ClientSession(*client_streams) as session:
                await session.initialize()
                yield session
        finally:
            tg.cancel_scope.cancel()


def wire(model: BaseModel) -> dict[str, Any]:
    """`model` as it goes over the wire (camelCase names, unset fields left out)."""
    dumped: dict[str, Any] = model.model_dump(by_alias=True, exclude_none=True, mode="json")
    return dumped
