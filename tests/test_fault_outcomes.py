"""A fault counts only when it happened as planned, every call is on the wire before the
verdict, and a slow agent is a failure, not an infrastructure error."""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import pytest

import undobench_gym  # noqa: F401 - registers the ids
from undobench_gym.agents.methods import wrap
from undobench_gym.agents.scripted import ScriptedAgent
from undobench_gym.core.catalog import find_workflow
from undobench_gym.core.pairing import run_episode, run_pair


@pytest.fixture(scope="module")
def payments() -> Any:
    env = gym.make("UndoBench/Payments-v0").unwrapped
    yield env
    env.close()


def _calls(rec: dict[str, Any]) -> int:
    return sum(1 for t in rec["transcript"] if "tool" in t["observation"])


@pytest.mark.parametrize("scenario", ["lost-ack", "lost-ack-timeout"])
def test_every_call_is_on_the_wire_before_the_verdict(payments: Any, scenario: str) -> None:
    """A `timeout` fault holds its flow past the client's timeout: the verdict still waits
    for its wire event, so B0's physical count is every call it made."""
    rec = run_episode(
        wrap(payments, "B0"),
        ScriptedAgent(),
        seed=3,
        workflow="pay-renew-subscription",
        fault=scenario,
    )
    assert rec["effects"]["physical"] == _calls(rec) == len(rec["wire"])
    assert rec["fault_outcome"]["as_planned"]
    assert rec["fault_outcome"]["mechanism"] == "reply_dropped_after_commit"


def test_timeout_and_reset_lost_acks_count_reissues_alike() -> None:
    env = gym.make("UndoBench/Payments-v0", server_idempotency="all").unwrapped
    try:
        counts = [
            run_episode(
                wrap(env, "B2-K"),
                ScriptedAgent(),
                seed=3,
                workflow="pay-renew-subscription",
                fault=sc,
            )["effects"]
            for sc in ("lost-ack", "lost-ack-timeout")
        ]
    finally:
        env.close()
    # B2-K re-sends with the committed attempt's key, which the service honours: a safe
    # re-issue under either fault, never an unsafe one.
    safe = [c["safe_reissues"] for c in counts]
    unsafe = [c["reissued_after_commit"] for c in counts]
    assert safe[0] == safe[1] >= 1 and unsafe == [0, 0]


def _drive(env: Any, seed: int, fault: str, actions: list[dict[str, Any]]) -> dict[str, Any]:
    env.reset(seed=seed, options={"workflow": "pay-charge-customer", "fault": fault})
    for a in actions:
        env.step(a)
    info = env.step({"tool": "finish", "arguments": {"status": "gave_up"}})[4]
    episode: dict[str, Any] = info["episode"]
    return episode


def test_a_lost_ack_on_a_refused_call_did_not_happen(payments: Any) -> None:
    payments.reset(seed=2, options={"workflow": "pay-charge-customer", "fault": None})
    good = payments.gold_plan()[-1]
    bad = {**good, "arguments": {**good["arguments"], "customer_id": "cus_missing"}}
    rec = _drive(payments, 2, "lost-ack", [bad, good])
    outcome = rec["fault_outcome"]
    assert outcome["as_planned"] is False and outcome["reason"] == "refused"
    assert rec["fault_fired"] is False
    assert rec["transcript"][0]["observation"]["status"] == 404
    assert rec["transcript"][1]["observation"]["status"] == 201  # the later call is not hit


def test_a_fault_not_reached_is_reported(payments: Any) -> None:
    rec = _drive(payments, 2, "lost-ack", [])
    assert rec["fault_outcome"] == {
        "as_planned": False,
        "reason": "not_reached",
        "mechanism": None,
        "coin": None,
        "tool": "create_charge",
        "nth": 1,
    }


def test_reading_first_does_not_move_the_fault(payments: Any) -> None:
    """The fault names the n-th call of a mutating tool: extra reads before it (an agent
    that lists wires first) leave it on the wire creation, never on a read."""
    wf = find_workflow("pay-cross-border-wire")
    payments.reset(seed=4, options={"workflow": wf.id, "fault": "wire-ambiguous"})
    plan = payments.gold_plan()
    payments.step({"tool": "list_wires", "arguments": {}})
    quote = payments.step(plan[0])[0]
    import json

    quote_id = json.loads(quote)["body"]["quote_id"]
    wire = {**plan[1], "arguments": {**plan[1]["arguments"], "quote_id": quote_id}}
    obs = json.loads(payments.step(wire)[0])
    assert "error" in obs or obs.get("status", 0) >= 500
    rec = payments.step({"tool": "finish", "arguments": {"status": "gave_up"}})[4]["episode"]
    assert rec["fault_outcome"]["as_planned"] and rec["fault_outcome"]["tool"] == "create_wire"
    assert rec["fault"]["tool"] == "create_wire"


class SlowAgent(ScriptedAgent):
    name = "slow"

    def act(self, observation: str) -> dict[str, Any]:
        time.sleep(0.4)
        return super().act(observation)


def test_a_slow_agent_ends_truncated_not_as_an_infrastructure_error(payments: Any) -> None:
    wf = find_workflow("pay-charge-customer")
    rec = run_pair(
        payments,
        SlowAgent(),
        workflow=wf,
        scenario=wf.scenario("lost-ack"),
        seed=1,
        method="bare",
        runtime="process",
        episode_time_limit=0.5,
    )
    for side in ("control", "fault"):
        ep = rec[side]
        assert ep["error"] is None and ep["truncated"] and ep["truncated_reason"] == "time_limit"
        assert ep["finish_status"] is None and not ep["success"]


def test_ambiguous_faults_take_the_same_time_whichever_way_the_coin_fell(payments: Any) -> None:
    """Before the padding, a committed call answered in ~7 ms and a dropped one in ~2 ms
    (one threshold guessed the coin 39 times in 40); benchmarks/bench_ambiguous_latency.py
    measures the whole catalogue."""
    from undobench_gym.core.boundaries import AMBIGUOUS_PAD_S

    took: dict[bool, list[float]] = {True: [], False: []}
    for seed in range(1, 7):
        payments.reset(seed=seed, options={"workflow": "pay-charge-customer", "fault": "ambiguous"})
        coin = payments.harness_info()["hidden_commit_coin"]
        for step in payments.gold_plan():
            t0 = time.perf_counter()
            obs = payments.step(step)[0]
            if '"transport"' in obs:
                took[coin].append(time.perf_counter() - t0)
                break
        payments.truncate("time_limit")
    assert took[True] and took[False], "seeds 1-6 should show both sides of the coin"
    everything = took[True] + took[False]
    assert min(everything) >= AMBIGUOUS_PAD_S
    gap = abs(sorted(took[True])[len(took[True]) // 2] - sorted(took[False])[len(took[False]) // 2])
    assert gap < 0.05
