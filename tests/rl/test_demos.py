"""Demonstrations for the warm start: real episodes recorded on a real stack and rendered as
TRL environment-mode conversations, from training seeds only."""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import pytest

import undobench_gym  # noqa: F401  (registers the envs)
from undobench_gym.agents.recovery.verify import VerifyBeforeRetry
from undobench_gym.agents.scripted import ScriptedAgent
from undobench_gym.harness.rl import UndoBenchEnvFactory
from undobench_gym.harness.rl.demos import CLOSING, Demo, record_demos, tool_schemas

WF = "pay-charge-customer"


def test_held_out_seeds_are_refused_before_anything_runs() -> None:
    with pytest.raises(ValueError, match="held out"):
        record_demos(None, ScriptedAgent(), [(3, WF, None), (100_000, WF, None)])  # type: ignore[arg-type]


def test_messages_have_trl_environment_shape() -> None:
    demo = Demo(
        workflow=WF,
        seed=1,
        scenario="lost-ack",
        task="Charge cus_1 12.00 USD.",
        steps=[
            ({"tool": "create_charge", "arguments": {"amount": 1200}}, '{"error": "reset"}'),
            ({"tool": "list_charges", "arguments": {}}, '{"status": 200, "body": []}'),
            ({"tool": "finish", "arguments": {"status": "done"}}, '{"finished": true}'),
        ],
        success=True,
    )
    msgs = demo.messages("SYS")
    assert [m["role"] for m in msgs] == ["system", "user"] + ["assistant", "tool"] * 3 + [
        "assistant"
    ]
    assert msgs[0]["content"] == "SYS" and msgs[1]["content"] == demo.task
    call = msgs[2]["tool_calls"][0]["function"]
    assert call == {"name": "create_charge", "arguments": {"amount": 1200}}
    assert msgs[3] == {"role": "tool", "name": "create_charge", "content": '{"error": "reset"}'}
    assert msgs[-1] == {"role": "assistant", "content": CLOSING["done"]}
    assert demo.tools_called == ["create_charge", "list_charges", "finish"]


def test_tool_schemas_are_the_ones_trl_renders() -> None:
    from transformers.utils import get_json_schema

    factory = UndoBenchEnvFactory("payments", workflows=[WF])
    schemas = tool_schemas(factory._cls)
    names = [s["function"]["name"] for s in schemas]
    assert names == sorted(names) and "finish" in names and "create_charge" in names
    assert "reset" not in names and "get_reward" not in names
    # TRL passes bound methods of an instance; a bound method's schema has no `self`.
    bound = get_json_schema(object.__new__(factory._cls).create_charge)
    assert bound in schemas


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_recorded_control_and_recovered_lost_ack_succeed() -> None:
    env: Any = gym.make("UndoBench/Payments-v0", max_steps=10)
    try:
        demos = record_demos(
            env, ScriptedAgent(), [(5, WF, None), (5, WF, "lost-ack")], method=VerifyBeforeRetry
        )
        blind = record_demos(env, ScriptedAgent(), [(5, WF, "lost-ack")])[0]
    finally:
        env.close()
    control, fault = demos
    assert control.success and fault.success and control.task == fault.task
    assert control.tools_called[-1] == "finish" and "create_charge" in control.tools_called
    # Under the fault, B6 read the charge back after the lost acknowledgement and did not
    # re-send it: the recording holds the calls that reached the env, the read included.
    calls = fault.tools_called
    assert calls.count("create_charge") == 1
    assert "list_charges" in calls[calls.index("create_charge") + 1 :]
    assert "error" in json.loads(fault.steps[calls.index("create_charge")][1])
    # The scripted agent alone gives up at the failure (blind: it never looked).
    assert blind.steps[-1][0] == {
        "tool": "finish",
        "arguments": {"status": "gave_up", "summary": "a call failed"},
    }
    assert blind.messages("SYS")[-1]["content"] == CLOSING["gave_up"]
    msgs = fault.messages("SYS")
    assert sum(1 for m in msgs if m["role"] == "tool") == len(fault.steps)
