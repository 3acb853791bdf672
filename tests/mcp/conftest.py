"""A fake chat-completions server whose gold-plan policy knows every workflow these tests
run, so an in-process agent and the same agent over MCP get the same replies."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from undobench_gym.catalog import domain, find_workflow
from undobench_gym.specs import fill

from ..doubles.fake_llm_server import FakeServer, gold_plan

SEEDS = (1, 2, 3)


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
