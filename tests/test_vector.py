"""gymnasium's AsyncVectorEnv over UndoBench envs: two stacks stepped in parallel.

Text spaces cannot live in shared memory, so the vector env needs `shared_memory=False`;
observations then come back as a tuple of JSON strings, actions go in as a tuple of tool
calls, and info is batched key by key, nested dicts too (`info["verdict"]["success"][i]`,
with `_key` masks saying which envs set a key). Evaluation resets each episode with its own
seed, so autoreset is off: in gymnasium 1.4 the default NEXT_STEP mode with
`shared_memory=False` does not clear its autoreset flag on an explicit `reset()`, and the
first step after it resets the env again (unseeded) instead of stepping.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import pytest
from gymnasium.vector import AsyncVectorEnv, AutoresetMode

import undobench_gym  # noqa: F401 - registers the ids
from undobench_gym.agents.scripted import ScriptedAgent

ID = "UndoBench/Payments-v0"


def _make() -> gym.Env[str, str]:
    return gym.make(ID, workflow="pay-charge-customer", max_steps=10)


@pytest.fixture(scope="module")
def vec() -> Iterator[AsyncVectorEnv]:
    envs = AsyncVectorEnv(
        [_make, _make], shared_memory=False, context="spawn", autoreset_mode=AutoresetMode.DISABLED
    )
    yield envs
    envs.close()


@pytest.mark.slow
def test_two_envs_step_in_parallel_through_a_whole_episode(vec: AsyncVectorEnv) -> None:
    obs, info = vec.reset(seed=[1, 2], options={"fault": None})
    assert isinstance(obs, tuple) and len(obs) == 2 and all(json.loads(o)["task"] for o in obs)
    assert info["task"][0] != info["task"][1]  # two seeds, two task instances
    plans: Any = vec.call("gold_plan")
    agents = [ScriptedAgent(), ScriptedAgent()]
    for agent, plan in zip(agents, plans, strict=True):
        agent.reset(plan)
    done = [False, False]
    success = [False, False]
    for _ in range(10):
        actions = tuple(a.act(o) for a, o in zip(agents, obs, strict=True))
        obs, reward, terminated, truncated, info = vec.step(actions)
        for i in range(2):
            if terminated[i] and not done[i]:
                done[i] = True
                # A dict in info is batched key by key: info["verdict"]["success"][i].
                assert info["_verdict"][i] and info["verdict"]["_success"][i]
                success[i] = bool(info["verdict"]["success"][i])
                assert reward[i] == 1.0
        if all(done):
            break
    assert all(done) and all(success)
    assert not any(truncated)


@pytest.mark.slow
def test_faults_and_make_vec(vec: AsyncVectorEnv) -> None:
    vec.reset(seed=[3, 3], options={"fault": "lost-ack"})
    plan: Any = vec.call("gold_plan")
    first = plan[0][0]  # get_customer: answered normally; the fault hits create_charge
    obs, *_ = vec.step((first, first))
    assert [json.loads(o)["status"] for o in obs] == [200, 200]
    charge = plan[0][1]
    obs, *_ = vec.step((charge, charge))  # the same seed: the same lost acknowledgement
    errors = [json.loads(o)["error"] for o in obs]
    assert errors[0] == errors[1] and errors[0]["kind"] == "connection_reset"
    made = gym.make_vec(
        ID,
        num_envs=2,
        vectorization_mode="async",
        vector_kwargs={"shared_memory": False, "context": "spawn", "autoreset_mode": "Disabled"},
        workflow="pay-charge-customer",
    )
    try:
        assert made.single_observation_space == vec.single_observation_space
        assert made.action_space == vec.action_space
    finally:
        made.close()  # no reset: no stack was started
