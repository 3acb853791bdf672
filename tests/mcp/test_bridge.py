"""The bridge between MCP calls and the harness loop: one call at a time becomes the next
action, the observation the harness steps back is the call's result, and the end of the
episode answers a waiting call with the last step's observation (or an error)."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

pytest.importorskip("mcp", reason="pip install -e '.[mcp]'")

from undobench_gym.core.mcp.bridge import FINISHED, RAW, RAW_ACTION, Bridge
from undobench_gym.core.mcp.sdk import wire
from undobench_gym.core.mcp.tools import result_text


def is_error(result: Any) -> bool:
    return bool(wire(result).get("isError"))


def calling(
    bridge: Bridge, name: str, arguments: dict[str, Any]
) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(bridge.call(name, arguments)))
    thread.start()
    return thread, out


def test_a_call_is_the_next_action_and_its_observation_the_result() -> None:
    bridge = Bridge([])
    thread, out = calling(bridge, "get_customer", {"customer_id": "c1"})
    assert bridge.next_action(5) == {"tool": "get_customer", "arguments": {"customer_id": "c1"}}
    bridge.answer('{"tool": "get_customer", "error": {"type": "transport"}}')
    thread.join(5)
    assert is_error(out[0]) and json.loads(result_text(out[0]))["error"]["type"] == "transport"


@pytest.mark.parametrize(
    ("name", "last", "expected"),
    [
        ("finish", None, FINISHED),  # a valid finish ended it: the env's answer is known
        ("get_customer", '{"tool": "get_customer", "status": 200}', None),  # the last step
        ("get_customer", None, "episode"),  # ended without a step (the time limit)
    ],
)
def test_the_end_of_the_episode_answers_a_waiting_call(
    name: str, last: str | None, expected: str | None
) -> None:
    bridge = Bridge([])
    thread, out = calling(bridge, name, {})
    assert bridge.next_action(5) is not None
    bridge.close(last)
    thread.join(5)
    text = result_text(out[0])
    if expected == "episode":
        assert is_error(out[0]) and json.loads(text)["error"]["type"] == "episode"
    else:
        assert text == (expected or last)
    later = bridge.call("get_customer", {})
    assert is_error(later) and "over" in result_text(later)


def test_raw_replies_reach_the_env_as_they_were() -> None:
    bridge = Bridge([])
    for name, arguments, action in [
        (
            "get_customer",
            {RAW: '{"customer_id": "c'},
            {"tool": "get_customer", "arguments": '{"customer_id": "c'},
        ),
        (RAW_ACTION, {RAW: "Thought: hmm"}, "Thought: hmm"),
        (
            "get_customer",
            {RAW: "x", "other": 1},
            {"tool": "get_customer", "arguments": {RAW: "x", "other": 1}},
        ),
    ]:
        thread, _ = calling(bridge, name, arguments)
        assert bridge.next_action(5) == action
        bridge.answer("{}")
        thread.join(5)
