"""examples/train_grpo.py end to end in seconds: the same pipeline as the SmolLM2 smoke
(tests/rl/test_train_grpo.py, `make test-all`) on a randomly initialised one-layer model.

Warm start on scripted demonstrations, two GRPO steps through TRL's `environment_factory`
on real stacks, the LoRA saved, and the trained model evaluated by the `undobench run`
harness. A random model learns nothing, so this checks the path, not the learning: every
stage ran, the losses are finite, the warm start moved the LoRA, every rollout got a
reward from the oracles and the evaluation wrote its summary."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import Any

import pytest

from ..agents.test_llm_agents import tiny_model
from . import train_grpo_example

pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("trl", "peft", "transformers", "torch")),
    reason="needs the rl and train extras",
)


def _tool_template_model(folder: Path) -> Path:
    """The tiny model with the Hermes tool-call chat template TRL's GRPO needs."""
    import transformers
    from trl.chat_template_utils import qwen2_5_chat_template

    path = tiny_model(folder)
    tok = transformers.AutoTokenizer.from_pretrained(path)
    tok.chat_template = qwen2_5_chat_template
    tok.save_pretrained(path)
    return path


def test_the_training_example_runs_every_stage_on_a_tiny_model(tmp_path: Path) -> None:
    model = _tool_template_model(tmp_path / "tiny")
    out = tmp_path / "grpo"
    argv = ["--smoke", "--seed", "1", "--model", str(model), "--out", str(out)]
    result: dict[str, Any] = train_grpo_example().main(argv)
    warm = result["warm_start"]
    assert warm["demos"] >= 2 and all(math.isfinite(x) for x in warm["losses"])
    assert result["lora_tensors"] > 0 and result["lora_changed_by_warm_start"] > 0
    assert len(result["losses"]) == 2 and all(math.isfinite(x) for x in result["losses"])
    rewards = [r["reward"] for r in result["rollouts"]]
    assert len(rewards) == 4 and all(r is not None for r in rewards)  # every stack answered
    for group in result["groups"]:
        assert None in group["scenarios"] and len(set(group["scenarios"])) == 2
    assert {"generation_s", "env_s", "optim_s"} <= set(result["step_times"][0])
    assert (out / "eval-after" / "summary.json").exists()
    assert (out / "lora" / "adapter_config.json").exists()
