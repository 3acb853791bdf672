"""The catalogue document and a plain HTTP client following each service's OpenAPI."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from undobench_gym.core.catalog import DOMAINS, all_workflows, domain
from undobench_gym.harness.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_catalogue_document_is_current(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "--markdown"]) == 0
    assert (ROOT / "docs" / "catalogue.md").read_text() == capsys.readouterr().out, (
        "regenerate: undobench tasks --markdown > docs/catalogue.md"
    )


LEAK = re.compile(r"\b(inject\w*|faults?|undobench|mitmproxy|crash\w*|benchmark\w*|scenarios?)\b")


def test_no_instruction_or_tool_text_mentions_the_harness() -> None:
    for w in all_workflows():
        text = (
            w.instruction.lower()
            + json.dumps([domain(w.domain).tools[t].openai_schema() for t in w.tools]).lower()
        )
        assert not LEAK.findall(text), (w.id, LEAK.findall(text))


@pytest.mark.parametrize("name", sorted(DOMAINS))
def test_a_plain_client_follows_the_openapi_document_through_the_proxy(
    env_for: Any, name: str
) -> None:
    env = env_for(name)
    env.reset(seed=3)
    base = f"{env.runtime.endpoints.agent_url}/{name}"
    with httpx.Client(base_url=base, timeout=5) as client:
        doc = client.get("/openapi.json").json()
        calls = 0
        for path, item in doc["paths"].items():
            op = item.get("get")
            if op is None or "{" in path:
                continue
            required = [p for p in op.get("parameters", []) if p.get("required")]
            if required:
                continue
            r = client.get(path)
            assert r.status_code == 200, (path, r.text[:200])
            calls += 1
        assert calls >= 1
