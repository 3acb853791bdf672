"""`--agent` specs for the MCP path: `cmd:TEMPLATE`, and an LLM agent with `tools=mcp`,
each with the tool hints on or off (`annotations=off`, the hint ablation)."""

from __future__ import annotations

import hashlib
import shlex
from typing import Any

from undobench_gym.agents.mcp.client import ThreadLauncher
from undobench_gym.agents.mcp.command import CommandLauncher
from undobench_gym.agents.mcp.episode import McpAgent

NAME_LIMIT = 60


def _suffix(annotations: bool) -> str:
    return "" if annotations else "#annotations=off"


def command_agent(template: str, *, annotations: bool, framework: str | None) -> McpAgent:
    launcher = CommandLauncher(template)
    name = f"cmd:{template}"
    if len(name) > NAME_LIMIT:  # a readable, stable name for records and pair ids
        digest = hashlib.sha256(template.encode()).hexdigest()[:10]
        name = f"cmd:{shlex.split(template)[0].rsplit('/', 1)[-1]}@{digest}"
    agent = McpAgent(
        launcher, name=name + _suffix(annotations), annotations=annotations, framework=framework
    )
    agent.config = launcher.policy  # type: ignore[attr-defined]  # recorded: sandboxed or not
    return agent


def mcp_tools_agent(inner: Any, *, annotations: bool) -> McpAgent:
    agent = McpAgent(
        ThreadLauncher(inner),
        name=f"{inner.name}#tools=mcp{_suffix(annotations)}",
        annotations=annotations,
        model=getattr(inner, "model", None),
        framework=getattr(inner, "framework", None),
    )
    agent.config = getattr(inner, "config", None)  # type: ignore[attr-defined]
    return agent
