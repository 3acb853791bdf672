"""The env end to end over real stacks: gold plans, faults firing, determinism, bad input."""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

from undobench_gym.contract.specs import Boundary
from undobench_gym.core.catalog import all_workflows
from undobench_gym.core.registration import ENV_IDS

WORKFLOWS = all_workflows()
SCENARIOS = [(w, s.id) for w in WORKFLOWS for s in w.scenarios]


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda w: w.id)
def test_gold_plan_succeeds_in_control(play: Any, workflow: Any) -> None:
    ep = play(workflow, None)
    verdict = ep["verdict"]
    failed = [i for i in verdict["invariants"] if not i["passed"]]
    assert ep["success"], (failed, verdict["missing"], verdict["duplicates"], verdict["partial"])
    assert verdict["layers"]["committed"] >= len(workflow.required_effects) > 0


@pytest.mark.parametrize(
    ("workflow", "scenario"), SCENARIOS, ids=[f"{w.id}:{s}" for w, s in SCENARIOS]
)
def test_every_fault_fires_under_the_gold_plan(play: Any, workflow: Any, scenario: str) -> None:
    ep = play(workflow, scenario)
    assert ep["fault_fired"] is True, ep["transcript"]
    sc = workflow.scenario(scenario)
    calls = [e for e in ep["transcript"] if "tool" in e["observation"]]
    obs = calls[ep["fault"]["index"] - 1]["observation"]  # the faulted call
    if sc.boundary is Boundary.POST_ACK_PRE_CHECKPOINT:
        assert 200 <= obs["status"] < 300 and ep["fault"]["stage"] == "post_ack"
        return
    visible = sc.visible_error.value
    if visible in ("http_502", "http_503", "http_504"):
        assert obs["status"] == int(visible[-3:])
    else:
        assert obs["error"]["type"] == "transport"
    assert "inject" not in json.dumps(obs).lower()


def test_worker_crash_after_ack_replays_from_the_last_checkpoint(play: Any) -> None:
    wf = next(w for w in WORKFLOWS if w.id == "pay-charge-customer")
    ep = play(wf, "worker-crash")
    # The scripted agent keeps no checkpoint: it restarts the task and charges again.
    assert ep["fault_fired"] and ep["effects"]["duplicates"] == 1
    assert ep["effects"]["reissued_after_commit"] == 1
    assert [c["tool"] for c in ep["wire"]] == ["get_customer", "create_charge"] * 2


def test_same_seed_same_control_episode(play: Any) -> None:
    wf = next(w for w in WORKFLOWS if w.id == "pay-cross-border-wire")
    a, b = play(wf, None, seed=11), play(wf, None, seed=11)
    assert a["transcript"] == b["transcript"]
    assert a["state_hash"] == b["state_hash"]
    assert a["verdict"] == b["verdict"]
    c = play(wf, None, seed=12)
    assert c["transcript"] != a["transcript"]


def test_lost_ack_duplicates_under_b0_not_b2(play: Any) -> None:
    wf = next(w for w in WORKFLOWS if w.id == "pay-charge-customer")
    b0 = play(wf, "lost-ack", "B0")
    assert b0["effects"]["duplicates"] == 1 and b0["effects"]["committed"] == 2
    wire_posts = [e for e in b0["wire"] if e["tool"] == "create_charge"]
    log = b0["commit_log"]
    # Wire and commit log agree: two POSTs reached the service and both committed.
    assert len(wire_posts) == 2 and all(
        e["upstream_status"] == 201 or e["status"] == 201 for e in wire_posts
    )
    assert [r["op"] for r in log] == ["charge.create", "charge.create"]

    b2 = play(wf, "lost-ack", "B2")
    assert b2["success"] and b2["effects"]["duplicates"] == 0
    # The retry carried the committed attempt's key, which the service honours: a safe
    # re-issue, counted apart from the unsafe ones (B0's blind retry).
    assert b2["effects"]["committed"] == 1 and b2["effects"]["reissued_after_commit"] == 0
    assert b2["effects"]["safe_reissues"] == 1
    assert b0["effects"]["reissued_after_commit"] == 1 and b0["effects"]["safe_reissues"] == 0
    keys = {r["idempotency_key"] for r in b2["commit_log"]}
    assert len(keys) == 1 and None not in keys


def test_b2_cannot_save_a_non_keyed_endpoint_but_b2k_can(play: Any) -> None:
    wf = next(w for w in WORKFLOWS if w.id == "pay-renew-subscription")
    assert play(wf, "lost-ack", "B2")["effects"]["duplicates"] == 1
    b2k = play(wf, "lost-ack", "B2-K")
    assert b2k["success"] and b2k["effects"]["duplicates"] == 0


def test_during_mutation_crash_leaves_partial_state_after_restart(play: Any, env_for: Any) -> None:
    wf = next(w for w in WORKFLOWS if w.id == "pay-split-payout")
    env = env_for("payments")
    restarts = env.runtime.restarts
    ep = play(wf, "crash-mid-batch")
    assert env.runtime.restarts == restarts + 1
    assert env.runtime.service_exits[-1] == 75  # exited at the crash point, for real
    assert ep["fault_fired"] and not ep["success"]
    assert any("processing with 1/3" in p for p in ep["verdict"]["partial"])
    assert len(ep["verdict"]["missing"]) == 2  # two transfers never happened
    # The env keeps working on the restarted service, and reset clears the partial state.
    again = play(wf, None)
    assert again["success"]


def test_ambiguous_coin_is_seeded_and_hidden(play: Any) -> None:
    wf = next(w for w in WORKFLOWS if w.id == "pay-charge-customer")
    outcomes = {}
    for seed in range(1, 9):
        ep = play(wf, "ambiguous", seed=seed)
        outcomes[seed] = (ep["hidden_commit_coin"], ep["effects"]["committed"])
        obs = ep["transcript"][-2]["observation"]
        assert obs["error"]["kind"] == "connection_reset"  # same visible error either way
    assert {c for c, _ in outcomes.values()} == {True, False}
    assert all((n == 1) == coin for coin, n in outcomes.values())
    assert play(wf, "ambiguous", seed=3)["hidden_commit_coin"] == outcomes[3][0]


@pytest.mark.parametrize("env_id", sorted(ENV_IDS))
def test_check_env_passes(env_id: str) -> None:
    env = gym.make(env_id)
    try:
        check_env(env.unwrapped, skip_render_check=True)
    finally:
        env.close()


BAD_ACTIONS = [
    "not json at all",
    "[1, 2, 3]",
    42,
    None,
    {"tool": "drop_database", "arguments": {}},
    {"tool": "create_charge", "arguments": {"customer_id": 5, "amount": "ten"}},
    {"tool": "create_charge", "arguments": {}},
    {"tool": "create_charge", "arguments": "{broken"},
    {"tool": "get_customer", "arguments": {"customer_id": "x" * (1 << 20)}},
    "x" * (1 << 20),
    {"tool": "get_customer", "arguments": {"customer_id": "../../etc/passwd"}},
    {"tool": "get_customer", "arguments": {"customer_id": "1' OR '1'='1"}},
    {"arguments": {}},
]


def test_malformed_actions_give_error_observations(env_for: Any) -> None:
    env = env_for("payments")
    obs, _info = env.reset(seed=5, options={"workflow": "pay-charge-customer"})
    for action in BAD_ACTIONS:
        obs, _reward, terminated, truncated, _ = env.step(action)
        parsed = json.loads(obs)
        assert not terminated
        is_error = "error" in parsed or parsed.get("status", 200) >= 400
        assert is_error, (action if not isinstance(action, str) else action[:50], parsed)
        if truncated:
            break
    obs, *_ = env.reset(seed=5, options={"workflow": "pay-charge-customer"})
    cid = env._episode.params["customer_id"]
    ok = json.loads(env.step({"tool": "get_customer", "arguments": {"customer_id": cid}})[0])
    assert ok["status"] == 200


def test_max_steps_truncates_with_a_verdict(env_for: Any) -> None:
    env = env_for("payments")
    env.reset(seed=2, options={"workflow": "pay-charge-customer"})
    truncated = False
    for _ in range(env.max_steps):
        _, _, terminated, truncated, info = env.step({"tool": "list_charges", "arguments": {}})
        assert not terminated
    assert truncated and info["verdict"]["truncated"] and not info["verdict"]["success"]
    with pytest.raises(gym.error.ResetNeeded):
        env.step({"tool": "finish", "arguments": {"status": "done"}})


def test_workflow_none_draws_from_the_seed(env_for: Any) -> None:
    env = env_for("payments")
    seen = {env.reset(seed=s)[1]["workflow"] for s in range(12)}
    assert len(seen) > 1
    assert env.reset(seed=3)[1]["workflow"] == env.reset(seed=3)[1]["workflow"]


def test_unknown_scenario_and_workflow_are_clear_errors(env_for: Any) -> None:
    from undobench_gym.contract.errors import UndoBenchError

    env = env_for("payments")
    with pytest.raises(UndoBenchError, match="no scenario"):
        env.reset(seed=1, options={"workflow": "pay-charge-customer", "fault": "nope"})
    with pytest.raises(UndoBenchError, match="Did you mean"):
        gym.make("UndoBench/Payments-v0", workflow="pay-charge-custome")
    assert Boundary.PRE_MUTATION.value == "PRE_MUTATION"


def test_an_unplanned_exit_voids_the_episode_and_reset_recovers() -> None:
    """A service killed between two calls (not by the fault plan) is restarted by the
    runtime, but the episode is void: step raises StackUnhealthyError, so a sweep retries
    the pair; the next reset starts cleanly on the same stack."""
    import os
    import signal

    from gymnasium.error import ResetNeeded

    from undobench_gym.contract.errors import StackUnhealthyError
    from undobench_gym.core.env import UndoBenchEnv

    with UndoBenchEnv("payments", workflow="pay-charge-customer") as env:
        env.reset(seed=1)
        step = env.gold_plan()[0]  # a read: get_customer
        assert json.loads(env.step(step)[0])["status"] == 200
        service_pid = env.runtime.pids()[0]  # type: ignore[attr-defined]
        os.kill(service_pid, signal.SIGKILL)
        with pytest.raises(StackUnhealthyError, match="outside the fault plan"):
            for _ in range(50):  # the supervisor notices within ~0.1 s
                env.step(step)
        with pytest.raises(ResetNeeded):
            env.step(step)
        env.reset(seed=1)
        assert json.loads(env.step(step)[0])["status"] == 200
        _obs, _reward, terminated, _trunc, info = env.step(
            {"tool": "finish", "arguments": {"status": "done"}}
        )
        assert terminated and "verdict" in info


def test_a_call_timing_out_with_no_fault_planned_voids_the_episode() -> None:
    """A slow stack is not a fault: a call the client gave up on without a planned fault
    voids the episode (an infrastructure error a sweep retries), never scored."""
    from undobench_gym.contract.errors import StackUnhealthyError
    from undobench_gym.core.env import UndoBenchEnv

    with UndoBenchEnv("payments", workflow="pay-charge-customer") as env:
        env.reset(seed=1)
        step = env.gold_plan()[0]
        stack = env._stack  # the agent's calls' timeout; the harness's own calls keep theirs
        normal = stack.timeout
        stack.timeout = 0.0001  # shorter than any real answer
        try:
            obs = json.loads(env.step(step)[0])
        finally:
            stack.timeout = normal
        assert obs["error"]["kind"] == "timeout"
        with pytest.raises(StackUnhealthyError, match="no fault planned"):
            env.step({"tool": "finish", "arguments": {"status": "done"}})
        env.reset(seed=1)  # the env goes on
        assert json.loads(env.step(step)[0])["status"] == 200
