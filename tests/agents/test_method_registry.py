"""The "add a recovery method" checklist, followed once for real: a new method is one
`MethodSpec` given to `register`; the harness then lists it, judges where it applies and
runs it, through the same calls the sweep worker makes (`wrap`, `server_idempotency_for`,
`workflow_schemas`, `applicable`, `run_pair`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import pytest

import undobench_gym.agents.methods as methods
from undobench_gym.agents.methods import MethodSpec
from undobench_gym.agents.public_tools import PublicTool
from undobench_gym.agents.recovery import NaiveRetry
from undobench_gym.agents.recovery.base import StepResult, parse_call
from undobench_gym.agents.scripted import ScriptedAgent
from undobench_gym.contract.errors import UndoBenchError
from undobench_gym.core.catalog import find_workflow
from undobench_gym.core.pairing import run_pair

NAME = "B0-I"
BUILTIN_NAMES = ("bare", "B0", "B1", "B2", "B2-K", "B3", "B5", "B5-P", "B6")


class RetryIdempotentOnce(NaiveRetry):
    """A small real method: B0 with one retry, and only for calls a re-send cannot
    duplicate (read-only tools, and mutating tools with `idempotentHint`)."""

    method = NAME

    def __init__(self, env: gym.Env[str, str]) -> None:
        super().__init__(env, retries=1)

    def handle(self, action: Any) -> StepResult:
        target = self.mutating(parse_call(action))
        if target is not None and not target.idempotent:
            return self.send(action)
        return super().handle(action)


def idempotent_target(target: PublicTool, tools: dict[str, PublicTool]) -> bool:
    return target.idempotent


SPEC = MethodSpec(
    NAME,
    "retry once, only calls whose tool is idempotent (idempotentHint) or read-only",
    RetryIdempotentOnce,
    idempotent_target,
)


@pytest.fixture()
def registered() -> Iterator[MethodSpec]:
    """The new method, registered for one test; the original registry afterwards."""
    spec = methods.register(SPEC)
    yield spec
    methods.unregister(NAME)
    assert methods.METHODS == BUILTIN_NAMES


def test_the_builtin_methods_are_one_entry_each() -> None:
    assert tuple(s.name for s in methods.BUILTIN) == methods.METHODS == BUILTIN_NAMES
    assert {s.name: s.description for s in methods.BUILTIN} == methods.DESCRIPTIONS
    assert {s.name for s in methods.BUILTIN if s.server_idempotency != "native"} == {"B2-K"}
    assert [s.name for s in methods.BUILTIN if s.reference] == ["bare"]


def test_a_registered_method_is_listed_and_judged(registered: MethodSpec) -> None:
    assert (*BUILTIN_NAMES, NAME) == methods.METHODS
    assert methods.DESCRIPTIONS[NAME] == SPEC.description
    assert methods.method(NAME) is SPEC
    assert methods.server_idempotency_for(NAME) == "native"
    charge = methods.workflow_schemas("pay-charge-customer")
    upgrade = methods.workflow_schemas("db-upgrade-tier")
    assert not methods.applicable(NAME, charge, "create_charge")  # not idempotent
    assert methods.applicable(NAME, upgrade, "set_account_tier")  # a set: idempotent
    assert not methods.applicable(NAME, upgrade, "get_account")  # read-only: no fault to fix
    assert NAME in methods.applicable_methods("db-upgrade-tier")
    assert NAME not in methods.applicable_methods("pay-charge-customer")


def _pair(env_for: Any, item: str, method: str) -> dict[str, Any]:
    """One pair the way the sweep worker runs it, with its `method_applicable`."""
    wf_id, _, sc_id = item.partition(":")
    workflow = find_workflow(wf_id)
    scenario = workflow.scenario(sc_id)
    idem = methods.server_idempotency_for(method)
    record = run_pair(
        methods.wrap(env_for(workflow.domain, idem), method),
        ScriptedAgent(),
        workflow=workflow,
        scenario=scenario,
        seed=1,
        method=method,
        runtime="process",
    )
    schemas = methods.workflow_schemas(workflow, idem)
    record["method_applicable"] = methods.applicable(method, schemas, scenario.target.tool)
    return record


def _wire(episode: dict[str, Any]) -> list[str]:
    return [e["tool"] for e in episode["wire"]]


def test_a_registered_method_runs_paired_episodes(registered: MethodSpec, env_for: Any) -> None:
    # The tier update (idempotent) commits and its answer is lost: re-sent once, recovered
    # (the agent alone gives up and the bonus is missing).
    pair = _pair(env_for, "db-upgrade-tier:tier-lost-ack", NAME)
    fault = pair["fault"]
    assert pair["method_applicable"] and pair["prefix_equivalent"]
    assert fault["fault_fired"] and fault["success"]
    assert _wire(fault) == ["get_account", "set_account_tier", "set_account_tier", "adjust_balance"]
    assert (fault["effects"]["duplicates"], fault["effects"]["missing"]) == (0, 0)
    assert [v["env_steps"] for v in fault["agent_transcript"]] == [1, 2, 1, 1]
    bare = _pair(env_for, "db-upgrade-tier:tier-lost-ack", "bare")["fault"]
    assert not bare["success"] and bare["effects"]["missing"] == 1
    # The charge (not idempotent) commits and its answer is lost: not re-sent, where B0's
    # blind re-send charges twice.
    pair = _pair(env_for, "pay-charge-customer:lost-ack", NAME)
    fault = pair["fault"]
    assert not pair["method_applicable"] and pair["prefix_equivalent"]
    assert _wire(fault) == ["get_customer", "create_charge"]
    assert fault["success"] and fault["effects"]["duplicates"] == 0
    assert [v["env_steps"] for v in fault["agent_transcript"]] == [1, 1, 1]
    b0 = _pair(env_for, "pay-charge-customer:lost-ack", "B0")["fault"]
    assert _wire(b0) == ["get_customer", "create_charge", "create_charge"]
    assert b0["effects"]["duplicates"] == 1


def test_a_taken_name_or_an_unknown_method_is_a_clear_error(registered: MethodSpec) -> None:
    with pytest.raises(UndoBenchError, match=f"method '{NAME}' is already registered"):
        methods.register(SPEC)
    with pytest.raises(UndoBenchError, match="method 'B0' is already registered"):
        methods.register(MethodSpec("B0", "another B0", NaiveRetry, idempotent_target))
    assert methods.method("B0").wrap is NaiveRetry  # the original entry stays
    available = "available: " + ", ".join((*BUILTIN_NAMES, NAME))
    for call in (
        lambda: methods.method("B9"),
        lambda: methods.wrap(gym.Env(), "B9"),
        lambda: methods.applicable("B9", [], None),
        lambda: methods.unregister("B9"),
    ):
        with pytest.raises(UndoBenchError, match=f"unknown method 'B9'; {available}$"):
            call()


def test_unregister_gives_back_the_original_registry() -> None:
    before = (methods.METHODS, dict(methods.DESCRIPTIONS))
    methods.register(SPEC)
    assert methods.unregister(NAME) is SPEC
    assert before == (methods.METHODS, methods.DESCRIPTIONS)
    with pytest.raises(UndoBenchError, match="unknown method"):
        methods.method(NAME)


def test_a_sweep_accepts_a_method_registered_after_its_import() -> None:
    from undobench_gym.harness.sweep import SweepSpec

    with pytest.raises(ValueError, match=f"unknown method '{NAME}'"):
        SweepSpec.model_validate({"split": "test", "methods": [NAME], "seeds": [1]})
    methods.register(SPEC)
    try:
        spec = SweepSpec.model_validate({"split": "test", "methods": [NAME], "seeds": [1]})
        assert spec.methods == [NAME]
    finally:
        methods.unregister(NAME)
