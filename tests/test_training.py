"""The training example in its CI size: a REINFORCE policy learned through `gym.make`
beats naive retry on CRSR over held-out seeds."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "train_recovery_policy.py"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("torch") is None,
        reason="needs torch: pip install 'undobench-gym[train]' (torch==2.13.0, CPU)",
    ),
]


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("train_recovery_policy", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_learned_policy_beats_naive_retry_on_held_out_seeds() -> None:
    result = _example().main(["--quick", "--episodes", "80", "--eval-seeds", "2"])
    assert result["crsr_learned"] > result["crsr_naive_retry"]
    # "naive retry" in the decision task is the project's B0 method, outcome for outcome.
    assert result["crsr_naive_retry"] == result["crsr_B0"]
    assert result["train_reward_first_last"][1] > result["train_reward_first_last"][0]
