"""`--tools mcp`: F1 and F2 list and call their tools through an MCP client session (the
SDK's in-memory transport) instead of being stepped directly. Given the same model replies
the verdicts, effects and transcripts are the direct path's, malformed replies included
(arguments that are not JSON, an unknown tool, ReAct text that is no action), and so are
the requests the model server gets."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("mcp", reason="pip install -e '.[mcp]'")

from undobench_gym.agents.factory import make_agent
from undobench_gym.agents.llm.base import LLMConfig
from undobench_gym.contract.errors import ProviderUnavailable, UndoBenchError
from undobench_gym.core.catalog import find_workflow
from undobench_gym.core.pairing import run_episode, run_pair
from undobench_gym.harness.executors.worker import GuardedAgent

from ..doubles.fake_llm_server import failing, gold_plan, malformed
from .conftest import plans
from .test_external_agent import verdicts

WF = find_workflow("pay-charge-customer")
FAST = LLMConfig(backoff_s=0.001, backoff_max_s=0.01, timeout_s=5.0)


def pair(env_for: Any, spec: str, framework: str, scenario: str, method: str) -> dict[str, Any]:
    agent = make_agent(spec, framework, FAST)
    return run_pair(
        env_for("payments"),
        agent,
        workflow=WF,
        scenario=WF.scenario(scenario),
        seed=1,
        method=method,
        runtime="process",
    )


@pytest.mark.parametrize(
    ("framework", "policy", "scenario", "method"),
    [
        ("F1", "gold", "lost-ack", "bare"),
        ("F2", "gold", "lost-ack", "bare"),
        ("F1", "gold", "ambiguous", "B2"),
        ("F1", "json", "lost-ack", "bare"),
        ("F1", "unknown_tool", "pre-503", "bare"),
        ("F2", "json", "lost-ack", "bare"),
        ("F1", "gold", "worker-crash", "bare"),
    ],
)
def test_same_verdicts_as_the_direct_path(
    fake: Any, env_for: Any, framework: str, policy: str, scenario: str, method: str
) -> None:
    gold = gold_plan(plans([WF.id]))
    fake.policy = gold if policy == "gold" else malformed(gold, at_step=1, kind=policy)
    spec = f"openai:fake@{fake.base_url}"
    fake.requests.clear()
    direct = pair(env_for, spec, framework, scenario, method)
    sent_direct = list(fake.requests)
    fake.requests.clear()
    via_mcp = pair(env_for, spec + "#tools=mcp", framework, scenario, method)
    assert via_mcp["agent"] == f"openai:fake@{framework}#tools=mcp"
    for part in ("control", "fault"):
        assert verdicts(via_mcp[part]) == verdicts(direct[part]), part
    assert via_mcp["prefix_equivalent"] == direct["prefix_equivalent"]
    # The model saw the same conversation, tools included, turn by turn.
    assert [r["messages"] for r in fake.requests] == [r["messages"] for r in sent_direct]
    assert [r.get("tools") for r in fake.requests] == [r.get("tools") for r in sent_direct]


def test_annotations_off_is_an_mcp_arm_with_its_own_name(fake: Any) -> None:
    agent = make_agent(f"openai:fake@{fake.base_url}#annotations=off", "F1", FAST)
    assert agent.name == "openai:fake@F1#tools=mcp#annotations=off"
    assert agent.annotations is False
    with pytest.raises(UndoBenchError, match="tools=mcp"):
        make_agent("scripted#tools=mcp")
    with pytest.raises(UndoBenchError, match="expected one of"):
        make_agent("scripted#tools=grpc")


@pytest.mark.parametrize("status", [503, 400])
def test_agent_errors_are_sorted_as_on_the_direct_path(
    fake: Any, env_for: Any, status: int
) -> None:
    """A model server that stays down is infrastructure either way (ProviderUnavailable);
    a request it rejects is the agent's exception, counted and scored the same."""
    fake.policy = failing(gold_plan(plans([WF.id])), range(10_000), status=status)
    spec = f"openai:fake@{fake.base_url}"
    outcomes = []
    for s in (spec, spec + "#tools=mcp"):
        agent = GuardedAgent(make_agent(s, "F1", FAST))
        try:
            record = run_episode(env_for("payments"), agent, seed=1, workflow=WF.id, fault=None)
        except ProviderUnavailable:
            outcomes.append("provider unavailable")
            continue
        outcomes.append((verdicts(record), agent.exceptions))
    assert outcomes[0] == outcomes[1]
    assert (outcomes[0] == "provider unavailable") == (status == 503)
    if status == 400:
        (verdict, exceptions) = outcomes[0]
        assert exceptions == 1 and verdict["finish_status"] == "gave_up"
