"""The per-rollout fault draw: deterministic, balanced within a group, validated."""

from __future__ import annotations

import pytest

from undobench_gym.core import catalog
from undobench_gym.harness.rl import FaultMix, scenarios_for

WF = "crm-convert-lead"  # DEV, with a crash and a lost-ack scenario


def test_a_group_of_the_cycles_length_sees_the_control_and_every_fault_once() -> None:
    ids = scenarios_for(catalog.find_workflow(WF), ["DURING_MUTATION", "POST_MUTATION_PRE_ACK"])
    assert ids == ["crash-after-account", "lost-ack"]
    mix = FaultMix({WF: ids})
    group = [mix.draw(9, WF) for _ in range(3)]
    assert sorted(group, key=str) == sorted([None, *ids], key=str)
    again = FaultMix({WF: ids})  # same seed, same dataset order: same draws
    assert [again.draw(9, WF) for _ in range(3)] == group
    assert [mix.draw(9, WF) for _ in range(3)] == group  # the next group cycles again
    assert len({tuple(FaultMix({WF: ids}).cycle(s, WF)) for s in range(12)}) > 1  # seeded


def test_bad_mixes_are_clear_errors() -> None:
    with pytest.raises(KeyError, match="known"):
        FaultMix({WF: ["no-such-scenario"]})
    with pytest.raises(ValueError, match="no scenario and no control"):
        FaultMix({WF: []}, controls=0)
    with pytest.raises(ValueError, match="not in this fault mix"):
        FaultMix({WF: []}).draw(1, "pay-charge-customer")
    # worker crashes need a memory rollback a single conversation cannot do
    assert "worker-crash" not in scenarios_for(catalog.find_workflow("pay-charge-customer"))
