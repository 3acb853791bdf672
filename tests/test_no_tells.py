"""What an agent or an RL policy sees cannot tell the control episode from the fault episode
of a pair before the fault itself; the harness learns the scenario by another channel."""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import pytest

import undobench_gym
from undobench_gym.core.catalog import domain

IDS = sorted(undobench_gym.ENV_IDS)

SEED = 11


def _gold_until_fault(env: Any, n: int) -> list[tuple[str, dict[str, Any]]]:
    """The first `n` gold steps with their (observation, info)."""
    from undobench_gym.agents.scripted import ScriptedAgent

    agent = ScriptedAgent()
    agent.reset(env.unwrapped.gold_plan())
    out: list[tuple[str, dict[str, Any]]] = []
    obs = ""
    for _ in range(n):
        action = agent.act(obs if out else json.dumps({"task": ""}))
        if action["tool"] == "finish":
            break
        obs, _r, term, trunc, info = env.step(action)
        out.append((obs, info))
        if term or trunc:
            break
    return out


@pytest.mark.parametrize("env_id", IDS)
def test_reset_info_is_the_same_for_control_and_fault(env_id: str) -> None:
    env = gym.make(env_id)
    try:
        name = env.unwrapped.domain_name
        for wf in domain(name).workflows:
            obs_c, info_c = env.reset(seed=SEED, options={"workflow": wf.id, "fault": None})
            for sc in wf.scenarios:
                obs_f, info_f = env.reset(seed=SEED, options={"workflow": wf.id, "fault": sc.id})
                assert (obs_f, info_f) == (obs_c, info_c), f"{wf.id}:{sc.id}"
                harness = env.unwrapped.harness_info()
                assert harness["scenario"] == sc.id
            assert "seed" not in info_c and "scenario" not in json.dumps(info_c)
    finally:
        env.close()


def test_step_info_is_the_same_until_the_fault() -> None:
    """Every step before the faulted call gives the same observation and info."""
    env = gym.make("UndoBench/Payments-v0", workflow="pay-cross-border-wire")
    try:
        env.reset(seed=SEED, options={"fault": None})
        control = _gold_until_fault(env, 1)  # get_fx_quote: before the faulted create_wire
        env.reset(seed=SEED, options={"fault": "wire-lost-ack"})
        fault = _gold_until_fault(env, 1)
        assert control == fault
    finally:
        env.close()
