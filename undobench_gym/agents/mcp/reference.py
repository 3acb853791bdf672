"""The reference external agent: the project's own LLM agent (F1 by default) as a separate
program that reaches the tools only through MCP, with the SDK's client on streamable HTTP.

    python -m undobench_gym.agents.mcp.reference --agent openai:MODEL@URL [--framework F1]

It reads the MCP URL, the task and the task instance from the flags or from the
environment that `--agent cmd:...` sets (UNDOBENCH_MCP_URL, UNDOBENCH_TASK_FILE,
UNDOBENCH_TASK_INSTANCE), so the whole sweep command is

    undobench run ... --agent "cmd:python -m undobench_gym.agents.mcp.reference \\
        --agent openai:MODEL@URL"

Its model settings come from the UNDOBENCH_LLM_* variables, as in-process. Exit codes: 0
when it called finish (or the harness ended the episode), 2 for bad arguments, 75 when the
model provider stayed unavailable (the harness records an infrastructure error, as for
the in-process agent).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from undobench_gym.agents.factory import make_agent
from undobench_gym.agents.mcp.client import drive
from undobench_gym.agents.mcp.episode import PROVIDER_EXIT
from undobench_gym.contract.errors import ProviderUnavailable, UndoBenchError
from undobench_gym.core.mcp.sdk import http_streams


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="undobench-reference-agent", description=__doc__)
    p.add_argument("--agent", required=True, help="an LLM agent spec, e.g. openai:MODEL@URL")
    p.add_argument("--framework", default=None, help="F1 (default for openai) or F2")
    p.add_argument(
        "--transport",
        choices=["http", "stdio"],
        default="http",
        help="http: connect to --mcp-url; stdio: launch the server in --mcp-stdio-config",
    )
    p.add_argument("--mcp-url", default=os.environ.get("UNDOBENCH_MCP_URL"))
    p.add_argument("--mcp-stdio-config", default=os.environ.get("UNDOBENCH_MCP_STDIO_CONFIG"))
    p.add_argument("--task-file", default=os.environ.get("UNDOBENCH_TASK_FILE"))
    p.add_argument("--task-instance", default=os.environ.get("UNDOBENCH_TASK_INSTANCE"))
    args = p.parse_args(argv)
    where = "mcp_url" if args.transport == "http" else "mcp_stdio_config"
    for flag in (where, "task_file", "task_instance"):
        if not getattr(args, flag):
            p.error(f"--{flag.replace('_', '-')} is needed (or its UNDOBENCH_ variable)")
    return args


async def run(args: argparse.Namespace) -> str:
    agent = make_agent(args.agent, framework=args.framework)
    task = Path(args.task_file).read_text()
    if args.transport == "stdio":
        entry = json.loads(Path(args.mcp_stdio_config).read_text())["mcpServers"]["undobench"]
        params = StdioServerParameters(command=entry["command"], args=entry["args"])
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return await drive(session, agent, task, args.task_instance)
    async with (
        http_streams(args.mcp_url) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return await drive(session, agent, task, args.task_instance)


def _find(exc: BaseException, kind: type[Exception]) -> BaseException | None:
    if isinstance(exc, kind):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        return next((f for e in exc.exceptions if (f := _find(e, kind))), None)
    return None


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        ended = anyio.run(run, args)
    except Exception as exc:  # the SDK's task groups wrap errors in exception groups
        if found := _find(exc, ProviderUnavailable):  # an infrastructure error, as in process
            print(f"reference agent: model provider unavailable: {found}", file=sys.stderr)
            return PROVIDER_EXIT
        if found := _find(exc, UndoBenchError):
            print(f"reference agent: {found}", file=sys.stderr)
            return 2
        raise
    print(f"reference agent: {ended}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
