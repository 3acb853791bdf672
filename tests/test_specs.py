"""Spec validation and stable seeding."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from undobench_gym.contract.seeding import derive_seed
from undobench_gym.contract.specs import Boundary, FaultScenario, FaultTarget, fill
from undobench_gym.core.boundaries import wire_action
from undobench_gym.core.catalog import all_workflows, domain


def test_seeds_are_stable_across_processes() -> None:
    assert derive_seed("a", 1) == 4742018630964328543  # sha256, not the salted hash()
    assert derive_seed("a", 1) == derive_seed("a", 1) != derive_seed("a", 2)


def test_target_needs_exactly_one_form() -> None:
    with pytest.raises(ValidationError):
        FaultTarget()
    with pytest.raises(ValidationError):
        FaultTarget(call_index=1, tool="x")


def test_scenario_consistency() -> None:
    t = FaultTarget(tool="x")
    with pytest.raises(ValidationError):
        FaultScenario(id="a", boundary=Boundary.PRE_MUTATION, target=t, crash_point="p")
    with pytest.raises(ValidationError):
        FaultScenario(id="a", boundary=Boundary.DURING_MUTATION, target=t, ambiguous=True)
    amb = FaultScenario(id="a", boundary=Boundary.POST_MUTATION_PRE_ACK, target=t, ambiguous=True)
    assert {wire_action(amb, True), wire_action(amb, False)} == {"drop_response", "drop_request"}


def test_fill_keeps_types_for_whole_templates() -> None:
    assert fill({"a": "{n}", "b": "x{n}", "c": ["{n}"]}, {"n": 5}) == {"a": 5, "b": "x5", "c": [5]}


def test_catalogue_is_consistent() -> None:
    workflows = all_workflows()
    assert len(workflows) >= 8 and len({w.id for w in workflows}) == len(workflows)
    kinds = {w.kind for w in workflows}
    assert {"single_effect", "multi_effect", "compensation", "composite"} <= kinds
    for w in workflows:
        tools = domain(w.domain).tools
        assert set(w.tools) <= set(tools), w.id
        assert any(tools[n].read_only for n in w.tools), f"{w.id} has no read-only tool"
        for step in w.gold_plan:
            assert step.tool in w.tools, (w.id, step.tool)
        for sc in w.scenarios:
            if sc.target.tool:
                assert sc.target.tool in w.tools, (w.id, sc.id)
        params = w.draw_params(3, domain(w.domain).fixture(3))
        w.instruction.format(**params)
    boundaries = {s.boundary for w in workflows for s in w.scenarios}
    assert {
        Boundary.PRE_MUTATION,
        Boundary.POST_MUTATION_PRE_ACK,
        Boundary.DURING_MUTATION,
    } <= boundaries
    assert any(s.crash_point for w in workflows for s in w.scenarios)
