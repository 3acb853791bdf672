"""What the harness sends to a model server and how it reads failures: the pieces that a
real server (llama.cpp, vLLM) showed the fake one never did. The real-server tests are in
test_real_model.py; these are the rules themselves, without a server."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from undobench_gym.agents.llm.backends import Reply, Request, ToolCallOut, refused_request
from undobench_gym.agents.llm.base import LLMConfig, model_tools
from undobench_gym.agents.llm.context import TRIMMED, compact_tools, estimate_tokens, fit
from undobench_gym.agents.llm.f1_tool_calling import ToolCallingAgent
from undobench_gym.agents.llm.f2_react import ReActAgent
from undobench_gym.agents.llm.parsing import parse_react
from undobench_gym.agents.llm.prompt import action_schema
from undobench_gym.contract.errors import UndoBenchError
from undobench_gym.core.catalog import FINISH_TOOL, domain

TOOLS = [domain("payments").tools[n].openai_schema() for n in ("get_customer", "create_charge")]
TOOLS.append(FINISH_TOOL)


class Recorder:
    """A backend that records each request and answers from a list."""

    kind, model = "test", "recorder"

    def __init__(self, replies: list[Reply]) -> None:
        self.replies, self.requests = list(replies), []  # type: ignore[var-annotated]

    def complete(self, request: Request) -> Reply:
        self.requests.append(request)
        return self.replies.pop(0)


def info() -> dict[str, Any]:
    return {
        "task": "Charge c-1 500 usd.",
        "tools": TOOLS,
        "observation": "{}",
        "task_instance": "t",
    }


def call(name: str, args: dict[str, Any]) -> Reply:
    return Reply(None, [ToolCallOut("c1", name, json.dumps(args))], "tool_calls")


@pytest.mark.parametrize(
    ("status", "body", "refused"),
    [
        (400, '{"error": "bad"}', True),
        (422, "validation error", True),
        (404, "model not found", True),
        # llama-cpp-python answers a message shape its template cannot render with a 500
        (
            500,
            '{"error": {"message": "object of type \'NoneType\' has no len()", '
            '"type": "internal_server_error"}}',
            True,
        ),
        (500, "TypeError: can only concatenate str", True),
        (500, "1 validation error for CreateChatCompletionRequest", True),
        (500, "AssertionError", True),
        (500, "Internal Server Error", False),
        (502, "invalid upstream", False),
        (503, "overloaded", False),
        (429, "rate limit", False),
    ],
)
def test_an_error_that_says_the_request_was_invalid_is_not_retried(
    status: int, body: str, refused: bool
) -> None:
    assert refused_request(status, body) is refused


def test_f1_sends_empty_content_beside_tool_calls_never_null() -> None:
    backend = Recorder(
        [call("get_customer", {"customer_id": "c-1"}), call("finish", {"status": "done"})]
    )
    agent = ToolCallingAgent(backend, LLMConfig())
    agent.reset_task(info())
    agent.act("{}")
    agent.act('{"id": "c-1"}')
    assistant = [m for m in backend.requests[1].messages if m["role"] == "assistant"]
    assert assistant and all(m["content"] == "" for m in assistant)


def test_f1_can_send_tool_results_as_user_messages() -> None:
    backend = Recorder(
        [call("get_customer", {"customer_id": "c-1"}), call("finish", {"status": "done"})]
    )
    agent = ToolCallingAgent(backend, LLMConfig(tool_results="user", tool_choice="required"))
    agent.reset_task(info())
    agent.act("{}")
    agent.act('{"id": "c-1"}')
    last = backend.requests[1].messages[-1]
    assert last == {"role": "user", "content": 'Result of get_customer: {"id": "c-1"}'}
    assert not any(m["role"] == "tool" for m in backend.requests[1].messages)
    assert {r.tool_choice for r in backend.requests} == {"required"}


def test_f2_with_required_tool_choice_asks_for_a_schema_constrained_action() -> None:
    text = '{"thought": "look first", "tool": "get_customer", "arguments": {"customer_id": "c"}}'
    backend = Recorder([Reply(text, constrained=True)])
    agent = ReActAgent(backend, LLMConfig(tool_choice="required"))
    agent.reset_task(info())
    action = agent.act("{}")
    assert action == {"tool": "get_customer", "arguments": {"customer_id": "c"}}
    request = backend.requests[0]
    assert request.response_schema == action_schema(agent.conv.tools)
    assert request.stop is None and "one JSON object" in request.messages[0]["content"]
    assert agent.episode_stats["unconstrained_replies"] == 0


def test_a_bare_json_reply_is_an_action_only_in_json_mode() -> None:
    text = '{"tool": "finish", "arguments": {"status": "done"}}'
    assert parse_react(text).action is None
    assert parse_react(text, json_actions=True).action == {
        "tool": "finish",
        "arguments": {"status": "done"},
    }
    assert parse_react("no json here", json_actions=True).action is None


def test_the_action_schema_names_every_tool_with_its_own_arguments() -> None:
    schema = action_schema(model_tools(TOOLS))
    names = [c["properties"]["tool"]["const"] for c in schema["anyOf"]]
    assert names == ["get_customer", "create_charge", "finish"]
    charge = schema["anyOf"][1]["properties"]["arguments"]
    params = TOOLS[1]["function"]["parameters"]
    assert charge["properties"].keys() == params["properties"].keys()
    assert charge["required"] == params["required"]
    # grammar-friendly: no patterns, strings at most 512 chars (llama.cpp dies on 2000)
    text = json.dumps(schema)
    assert '"pattern"' not in text
    lengths = [int(n) for n in re.findall(r'"maxLength": (\d+)', text)]
    assert lengths and max(lengths) <= 512
    summary = schema["anyOf"][2]["properties"]["arguments"]["properties"]["summary"]
    assert summary["maxLength"] == 512  # finish allows 2000: the env still takes that


def test_a_conversation_that_fits_is_sent_whole() -> None:
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    out = fit(messages, TOOLS, window=4096, max_tokens=256, tool_list=TOOLS)
    assert out.messages == messages and out.tools == TOOLS and out.max_tokens == 256
    assert fit(messages, TOOLS, window=0, max_tokens=256, tool_list=TOOLS).tools == TOOLS


def test_trimming_keeps_the_task_and_the_current_observation() -> None:
    big = json.dumps({"rows": ["x" * 60] * 40})
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "the task"}]
    for i in range(8):
        messages.append({"role": "assistant", "content": f"thought {i}"})
        messages.append({"role": "user", "content": f"Observation: {i} {big}"})
    out = fit(messages, TOOLS, window=4096, max_tokens=256, tool_list=TOOLS)
    assert estimate_tokens(out.messages, out.tools) + out.max_tokens <= 4096
    assert out.messages[:2] == messages[:2] and out.messages[-1] == messages[-1]
    assert out.trimmed_messages > 0 and out.compacted_tools
    assert [m["content"] for m in out.messages[2:-1] if m["content"] == TRIMMED]
    # the oldest go first: the trimmed ones form a prefix of the observations
    observations = [m for m in out.messages[2:-1] if m["role"] == "user"]
    kept = [m["content"] != TRIMMED for m in observations]
    assert kept == sorted(kept)
    assert messages[3]["content"].startswith("Observation")  # the conversation is untouched


def test_compacted_tools_keep_names_and_argument_types() -> None:
    small = compact_tools(TOOLS)
    for before, after in zip(TOOLS, small, strict=True):
        assert before["function"]["name"] == after["function"]["name"]
        props = before["function"]["parameters"].get("properties", {})
        assert set(props) == set(after["function"]["parameters"].get("properties", {}))
        assert '"description": "' not in json.dumps(after["function"]["parameters"])
    assert len(json.dumps(small)) < len(json.dumps(TOOLS))


def test_new_settings_come_from_the_environment_and_are_checked() -> None:
    env = {"UNDOBENCH_LLM_TOOL_CHOICE": "required", "UNDOBENCH_LLM_CONTEXT_TOKENS": "4096"}
    config = LLMConfig.from_env(env)
    assert (config.tool_choice, config.context_tokens) == ("required", 4096)
    assert config.record()["tool_choice"] == "required"
    with pytest.raises(UndoBenchError, match="tool_choice"):
        LLMConfig.from_env({"UNDOBENCH_LLM_TOOL_CHOICE": "always"})
    with pytest.raises(UndoBenchError, match="tool_results"):
        LLMConfig(tool_results="assistant").check()
