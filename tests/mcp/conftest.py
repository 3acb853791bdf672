"""A fake chat-completions server whose gold-plan policy knows every workflow these tests
run, so an in-process agent and the same agent over MCP get the same replies; and a check
after every test that no agent program, MCP server process or server thread outlived it."""

from __future__ import annotations

import importlib.util
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from undobench_gym.contract.specs import fill
from undobench_gym.core.catalog import domain, find_workflow

from ..doubles.fake_llm_server import FakeServer, gold_plan

SEEDS = (1, 2, 3)

# Each module skips without the SDK (pytest.importorskip); CI installs it and must run them.
if os.environ.get("CI") and importlib.util.find_spec("mcp") is None:
    raise RuntimeError("CI must run the MCP tests: pip install -e '.[mcp]' (make setup does)")


def plans(workflows: list[str], seeds: tuple[int, ...] = SEEDS) -> Any:
    """task text -> gold plan, over several workflows (the fake reads the task)."""
    table: dict[str, list[dict[str, Any]]] = {}
    for wid in workflows:
        wf = find_workflow(wid)
        for seed in seeds:
            params = wf.draw_params(seed, domain(wf.domain).fixture(seed))
            table[wf.instruction.format(**params)] = [
                {"tool": s.tool, "arguments": fill(s.arguments, params)} for s in wf.gold_plan
            ]

    def plan_for(task: str) -> list[dict[str, Any]]:
        return table[task]

    return plan_for


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeServer]:
    pytest.importorskip("openai", reason="pip install -e '.[llm]'")
    with FakeServer() as server:
        yield server


def use_gold(server: FakeServer, workflows: list[str]) -> FakeServer:
    server.policy = gold_plan(plans(workflows))
    server.requests.clear()
    return server


#: What this package's tests start: agent programs, `undobench mcp`, the test scripts.
MARKERS = (
    "undobench_gym.agents.mcp",
    "undobench_gym.harness.cli mcp",
    "undobench_gym.core.mcp.relay",
    "agent.py",
)
THREADS = ("mcp-http", "mcp-control", "mcp-agent")


def leftovers() -> list[str]:
    me, found = str(os.getpid()), []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            ppid = (proc / "stat").read_text().rsplit(")", 1)[1].split()[1]
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError):
            continue
        if ppid == me and any(m in cmd for m in MARKERS):
            found.append(cmd)
    found += [t.name for t in threading.enumerate() if t.name in THREADS]
    return found


@pytest.fixture(autouse=True)
def nothing_left_behind() -> Iterator[None]:
    yield
    deadline = time.monotonic() + 15
    while (left := leftovers()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, f"left running after the test: {left}"
