"""The "add a fault boundary" checklist holds for every boundary: each one resolves to a
wire plan or a worker crash in boundaries.py, each way a fault fires has a mechanism, and
docs/architecture.md lists each one."""

from __future__ import annotations

import pytest

from undobench_gym.contract import FAULT_ACTIONS
from undobench_gym.contract.specs import Boundary, FaultScenario, FaultTarget
from undobench_gym.core import boundaries

from .import_graph import ROOT

DOC = (ROOT / "docs" / "architecture.md").read_text()
#: The stages the proxy records (undobench_gym/services/proxy/fault.py) and the worker crash's.
STAGES = {"request", "response", "crash", "post_ack"}


def _scenario(boundary: Boundary, **kw: object) -> FaultScenario:
    return FaultScenario(id="s", boundary=boundary, target=FaultTarget(tool="t"), **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("boundary", list(Boundary))
def test_every_boundary_resolves_to_a_concrete_fault(boundary: Boundary) -> None:
    setup = boundaries.resolve(_scenario(boundary), seed=1, workflow_id="w", http_timeout=2.0)
    assert (setup.plan is None) != (setup.worker_crash is None)
    if setup.plan is not None:
        assert setup.plan.action in FAULT_ACTIONS
        assert setup.plan.tool == "t" and setup.plan.nth == 1


@pytest.mark.parametrize("boundary", list(Boundary))
def test_every_boundary_is_in_the_architecture_doc(boundary: Boundary) -> None:
    assert boundary.value in DOC


def test_every_stage_has_a_mechanism() -> None:
    assert set(boundaries.MECHANISMS) == STAGES


def test_ambiguous_mode_hides_which_side_of_the_coin() -> None:
    amb = _scenario(Boundary.POST_MUTATION_PRE_ACK, ambiguous=True)
    actions = {boundaries.wire_action(amb, coin) for coin in (True, False)}
    assert actions == {"drop_request", "drop_response"}
    assert boundaries.target_commits(amb, True) and not boundaries.target_commits(amb, False)
    # The coin is a pure function of the seed, and the padding is the same on both sides.
    plans = [boundaries.resolve(amb, s, "w", 2.0) for s in range(16)]
    assert {p.coin for p in plans} == {True, False}
    assert {p.plan.pad_s for p in plans if p.plan} == {boundaries.AMBIGUOUS_PAD_S}
    assert boundaries.resolve(amb, 7, "w", 2.0) == boundaries.resolve(amb, 7, "w", 2.0)


def test_a_crash_point_crashes_and_a_composite_step_loses_its_reply() -> None:
    crash = _scenario(Boundary.DURING_MUTATION, crash_point="x.after_first")
    assert boundaries.wire_action(crash) == "crash"
    assert boundaries.wire_action(_scenario(Boundary.DURING_MUTATION)) == "drop_response"
