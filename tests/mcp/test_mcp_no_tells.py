"""No tells over MCP: for every scenario of a workflow, what the agent's MCP session sees
before the fault (the tool list with its hints, the server's instructions, the results of
the calls before the faulted one) is the same in the control and the fault episode. Uses
the Python API (`EpisodeHost` + `build_server`) on the SDK's in-memory transport."""

from __future__ import annotations

import re
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp", reason="pip install -e '.[mcp]'")

from undobench_gym.contract.specs import fill
from undobench_gym.core.catalog import domain, find_workflow
from undobench_gym.core.mcp.host import EpisodeHost
from undobench_gym.core.mcp.sdk import memory_session
from undobench_gym.core.mcp.server import build_server

WF = find_workflow("pay-charge-customer")


def seen(host: EpisodeHost, seed: int, fault: str | None) -> dict[str, Any]:
    public = host.reset(seed, fault=fault)
    params = WF.draw_params(seed, domain(WF.domain).fixture(seed))
    first = WF.gold_plan[0]

    async def run() -> dict[str, Any]:
        server = build_server(host)
        async with memory_session(server) as session:
            tools = [t.model_dump() for t in (await session.list_tools()).tools]
            result = await session.call_tool(first.tool, fill(first.arguments, params))
            return {"tools": tools, "first": result.model_dump(), "public": public}

    out: dict[str, Any] = anyio.run(run)
    host.finish()
    return out


@pytest.mark.parametrize("scenario", [s.id for s in WF.scenarios])
def test_control_and_fault_look_the_same_before_the_fault(env_for: Any, scenario: str) -> None:
    host = EpisodeHost(env_for("payments"), workflow=WF.id)
    control, fault = seen(host, 3, None), seen(host, 3, scenario)
    assert control == fault
    text = repr(control).lower()
    # whole words: a schema's "default" is no tell
    assert scenario not in text and not re.search(r"\b(fault|inject)", text)
