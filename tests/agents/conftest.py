"""Fixtures for the LLM-agent tests: one fake chat-completions server per session, and a
gold-plan lookup from the task text (what a fake "model" needs to follow the plan)."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest

from undobench_gym.contract.specs import fill
from undobench_gym.core.catalog import domain, find_workflow

from ..doubles.fake_llm_server import FakeServer


def require(module: str, extra: str) -> None:
    """Skip where an optional dependency is missing, but fail in CI, which must run these."""
    if importlib.util.find_spec(module) is not None:
        return
    message = f"{module} is not installed: pip install -e '.[{extra}]'"
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the LLM-agent tests: {message}")
    pytest.skip(message)


@cache
def _plans(workflow_id: str, seeds: tuple[int, ...]) -> dict[str, list[dict[str, Any]]]:
    wf = find_workflow(workflow_id)
    out = {}
    for seed in seeds:
        params = wf.draw_params(seed, domain(wf.domain).fixture(seed))
        out[wf.instruction.format(**params)] = [
            {"tool": s.tool, "arguments": fill(s.arguments, params)} for s in wf.gold_plan
        ]
    return out


def plan_lookup(workflow_id: str, seeds: tuple[int, ...] = (1, 2, 3)) -> Any:
    """task text -> that episode's gold plan, by matching the instruction for each seed."""

    def plan_for(task: str) -> list[dict[str, Any]]:
        plans = _plans(workflow_id, seeds)
        if task not in plans:
            raise AssertionError(f"no seed in {seeds} of {workflow_id} gives the task {task!r}")
        return plans[task]

    return plan_for


@pytest.fixture(scope="session")
def fake() -> Iterator[Any]:
    require("openai", "llm")
    with FakeServer() as server:
        yield server


@pytest.fixture()
def fake_server(fake: Any) -> Any:
    """The session's fake, with its request log cleared for this test."""
    fake.requests.clear()
    return fake
