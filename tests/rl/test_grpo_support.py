"""The bookkeeping of examples/train_grpo.py: GRPO groups and their reward spread, and the
LoRA comparison the smoke test relies on (it must be able to say "changed" and "unchanged",
and refuse to compare a renamed model)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _support() -> ModuleType:
    spec = importlib.util.spec_from_file_location("grpo_support", EXAMPLES / "grpo_support.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rollout(seed: int, scenario: str | None, reward: float | None) -> dict[str, object]:
    return {"seed": seed, "workflow": "w", "scenario": scenario, "reward": reward, "steps": 2}


def test_groups_and_their_reward_spread() -> None:
    rollouts = [
        _rollout(0, None, 0.0),
        _rollout(0, "lost-ack", 0.0),
        _rollout(1, None, 1.0),
        _rollout(1, "crash", 0.0),
        _rollout(2, None, 1.0),
        _rollout(2, "crash", None),  # a stack failure is not scored: no spread from it
    ]
    groups = _support().groups(rollouts, 2)
    assert [g["seed"] for g in groups] == [0, 1, 2]
    assert [g["spread"] for g in groups] == [False, True, False]
    assert groups[1]["scenarios"] == [None, "crash"] and groups[1]["rewards"] == [1.0, 0.0]


def test_lora_changed_counts_changed_tensors_and_refuses_other_names() -> None:
    torch = pytest.importorskip("torch")
    support = _support()

    class Tiny(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.lora_A = torch.nn.Linear(2, 2)
            self.lora_B = torch.nn.Linear(2, 2)
            self.base = torch.nn.Linear(2, 2)

    model = Tiny()
    snap = support.lora_snapshot(model)
    assert set(snap) == {"lora_A.weight", "lora_A.bias", "lora_B.weight", "lora_B.bias"}
    assert support.lora_changed(model, snap) == 0
    with torch.no_grad():
        model.lora_B.weight += 1.0
        model.base.weight += 1.0  # not a LoRA tensor: not counted
    assert support.lora_changed(model, snap) == 1
    with pytest.raises(KeyError):
        support.lora_changed(model, {"other.lora_A.weight": snap["lora_A.weight"]})
