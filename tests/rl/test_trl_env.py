"""TRL's environment mode on a real payments stack: tools from the env's schemas, the
verdict as the reward (a duplicate charge after a lost acknowledgement earns nothing), a
GRPO group sharing one task instance while the fault is drawn per rollout."""

from __future__ import annotations

import importlib.util
import inspect
import json
from collections.abc import Iterator
from typing import Any

import pytest

from undobench_gym.harness.rl import UndoBenchEnvFactory, UndoBenchTRLEnv

WF = "pay-charge-customer"

pytestmark = [
    pytest.mark.slow,
    # One factory (its stacks) for the module, on one worker.
    pytest.mark.xdist_group("trl_env"),
    pytest.mark.skipif(
        importlib.util.find_spec("transformers") is None, reason="needs the train extra"
    ),
]


@pytest.fixture(scope="session")
def factory() -> Iterator[UndoBenchEnvFactory]:
    with UndoBenchEnvFactory(
        "payments", workflows=[WF], boundaries=["POST_MUTATION_PRE_ACK"], ambiguous=False
    ) as f:
        yield f


def _tools(env: UndoBenchTRLEnv) -> dict[str, Any]:
    return {
        n: getattr(env, n)
        for n, _ in inspect.getmembers(type(env), predicate=inspect.isfunction)
        if not n.startswith("_") and n not in ("reset", "get_reward")
    }


def _instance(factory: UndoBenchEnvFactory, n: int) -> UndoBenchTRLEnv:
    """The factory's n-th rollout env, made here when no earlier test made it (xdist may run
    this module's tests in another order)."""
    while len(factory.instances) <= n:
        factory()
    return factory.instances[n]


def _charge(env: UndoBenchTRLEnv) -> str:
    args = env._env.unwrapped.gold_plan()[1]["arguments"]
    return str(env.create_charge(**args))  # type: ignore[attr-defined]


def test_tool_methods_carry_the_env_schemas_for_transformers() -> None:
    from transformers.utils import get_json_schema

    for domain in ("payments", "git", "database"):
        f = UndoBenchEnvFactory(domain)
        schemas = {
            n: get_json_schema(getattr(f._cls, n))
            for n, _ in inspect.getmembers(f._cls, predicate=inspect.isfunction)
            if not n.startswith("_") and n not in ("reset", "get_reward")
        }
        assert "finish" in schemas and len(schemas) > 2
        for name, schema in schemas.items():
            fn = schema["function"]
            assert fn["name"] == name
            assert "self" not in fn["parameters"].get("properties", {})
        f.close()  # no instance was made: no stack started


def test_a_group_shares_the_task_and_draws_the_fault_per_rollout(
    factory: UndoBenchEnvFactory,
) -> None:
    a, b = factory(), factory()
    cycle = factory.mix.cycle(11, WF)
    assert sorted(cycle, key=str) == sorted([None, "lost-ack"], key=str)
    task_a = a.reset(seed=11, workflow=WF, prompt=[])
    task_b = b.reset(seed=11, workflow=WF, prompt=[])
    assert task_a == task_b  # one task instance for the whole group
    assert [a._record["scenario"], b._record["scenario"]] == cycle  # control and fault
    # Both left running (no finish): judged in parallel, truncated, no reward.
    assert a.get_reward() == 0.0 and b.get_reward() == 0.0
    assert [r["finished"] for r in factory.rollouts[-2:]] == [False, False]


def test_the_reward_is_the_verdict_a_retried_lost_ack_charges_twice(
    factory: UndoBenchEnvFactory,
) -> None:
    env = _instance(factory, 0)
    seed, scenario = 5, None
    while scenario != "lost-ack":  # the next rollout of seed 5 that draws the fault
        env.reset(seed=seed, workflow=WF)
        scenario = env._record["scenario"]
        if scenario != "lost-ack":
            assert json.loads(_charge(env))["status"] in (200, 201)
            env.finish(status="done")  # type: ignore[attr-defined]
            assert env.get_reward() == 1.0  # the control succeeds
    first = json.loads(_charge(env))
    assert first["error"]["type"] == "transport"  # the acknowledgement was lost
    assert json.loads(_charge(env))["status"] in (200, 201)  # a blind retry "works"...
    assert json.loads(env.finish(status="done"))["finished"] is True  # type: ignore[attr-defined]
    assert env.finish() == json.dumps(  # type: ignore[attr-defined]
        {
            "error": {
                "type": "episode_over",
                "message": "the task has ended; no more calls are taken",
            }
        }
    )
    assert env.get_reward() == 0.0  # ...but it charged twice: no reward
    assert factory.rollouts[-1]["harmless"] is False
    assert factory.rollouts[-1]["fault_fired"] is True


def test_verify_before_retry_earns_the_reward(
    factory: UndoBenchEnvFactory,
) -> None:
    env = _instance(factory, 1)
    while True:
        env.reset(seed=23, workflow=WF)
        if env._record["scenario"] == "lost-ack":
            break
        env.get_reward()
    charge = env._env.unwrapped.gold_plan()[1]["arguments"]
    assert "error" in json.loads(_charge(env))
    listed = json.loads(env.list_charges(customer_id=charge["customer_id"]))  # type: ignore[attr-defined]
    assert any(c["amount"] == charge["amount"] for c in listed["body"])
    env.finish(status="done")  # type: ignore[attr-defined]
    assert env.get_reward() == 1.0


def test_bad_configuration_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="checkpoint"):
        UndoBenchEnvFactory("payments", boundaries=["POST_ACK_PRE_CHECKPOINT"])
    with pytest.raises(ValueError, match="unknown domain"):
        UndoBenchEnvFactory("bank")
    with pytest.raises(ValueError, match="unknown reward"):
        UndoBenchEnvFactory("payments", reward="vibes")
    with pytest.raises(ValueError, match="not payments"):
        UndoBenchEnvFactory("payments", workflows=["git-update-config"])
