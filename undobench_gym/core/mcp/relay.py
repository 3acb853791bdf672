"""A stdio MCP server that relays to the episode's streamable-HTTP server.

For agents that only launch MCP servers as subprocesses: `--agent cmd:...` gives them
`{mcp_stdio_config}`, an `mcpServers` entry whose command is this module with the episode's
URL. The relay lists the upstream tools as they are (hints included) and forwards each call
unchanged, result and `isError` included, so the agent sees what an HTTP client sees. It
exits when the agent closes its stdin, or when the upstream server goes away.

    python -m undobench_gym.core.mcp.relay http://127.0.0.1:PORT/mcp
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import anyio
from mcp import ClientSession, types

from undobench_gym.core.mcp.sdk import LowServer, http_streams, make_server
from undobench_gym.core.mcp.server import INSTRUCTIONS, serve_stdio


def relay_server(upstream: ClientSession) -> LowServer:
    async def on_list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=(await upstream.list_tools()).tools)

    async def on_call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await upstream.call_tool(params.name, params.arguments or {})

    return make_server(
        "undobench",
        instructions=INSTRUCTIONS,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )


async def relay(url: str) -> None:
    async with (
        http_streams(url) as (read, write),
        ClientSession(read, write) as upstream,
    ):
        await upstream.initialize()
        await serve_stdio(relay_server(upstream))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="undobench-mcp-relay", description=__doc__)
    p.add_argument("url", help="the episode's MCP URL (streamable HTTP on 127.0.0.1)")
    args = p.parse_args(argv)
    anyio.run(relay, args.url)
    return 0


if __name__ == "__main__":
    sys.exit(main())
