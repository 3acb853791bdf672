"""Bookkeeping for examples/train_grpo.py: the per-step time split, the LoRA comparison and
the reward spread of each GRPO group."""

from __future__ import annotations

import time
from typing import Any


def lora_snapshot(model: Any) -> dict[str, Any]:
    """A copy of every LoRA tensor (A and B) of a peft model."""
    return {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" in n}


def lora_changed(model: Any, snapshot: dict[str, Any]) -> int:
    """How many of the snapshot's LoRA tensors differ now (every one must still be there:
    a renamed or missing tensor raises rather than counting as unchanged)."""
    import torch

    now = {n: p.detach() for n, p in model.named_parameters() if "lora_" in n}
    if set(now) != set(snapshot):
        raise KeyError("the model's LoRA tensors are not the snapshot's")
    return sum(not torch.equal(snapshot[n], now[n]) for n in snapshot)


def groups(rollouts: list[dict[str, Any]], size: int) -> list[dict[str, Any]]:
    """The GRPO groups in rollout order (`size` consecutive rollouts of one task instance):
    seed, workflow, scenarios, rewards and whether the rewards differ (a reward spread,
    the only thing GRPO's advantage, reward minus the group mean, can learn from)."""
    out = []
    for i in range(0, len(rollouts) - size + 1, size):
        g = rollouts[i : i + size]
        rewards = [r.get("reward") for r in g]
        scored = [x for x in rewards if x is not None]
        out.append(
            {
                "seed": g[0]["seed"],
                "workflow": g[0]["workflow"],
                "scenarios": [r["scenario"] for r in g],
                "rewards": rewards,
                "steps": [r.get("steps") for r in g],
                "spread": len(set(scored)) > 1,
            }
        )
    return out


class StepClock:
    """Splits each optimizer step into generation, environment and optimisation time."""

    def __init__(self, factories: dict[str, Any]) -> None:
        self.factories = factories
        self.steps: list[dict[str, float]] = []
        self._gen = 0.0

    def env_s(self) -> float:
        return sum(f.timing["env_s"] for f in self.factories.values())

    def wrap(self, trainer: Any) -> None:
        inner = trainer._generate_and_score_completions

        def timed(*a: Any, **kw: Any) -> Any:
            t0, e0 = time.monotonic(), self.env_s()
            try:
                return inner(*a, **kw)
            finally:
                self._gen_env = (time.monotonic() - t0, self.env_s() - e0)

        trainer._generate_and_score_completions = timed

    def callback(self) -> Any:
        from transformers import TrainerCallback

        clock = self

        class _CB(TrainerCallback):  # type: ignore[misc]
            def on_step_begin(self, *_a: Any, **_k: Any) -> None:
                clock._t0, clock._gen_env = time.monotonic(), (0.0, 0.0)

            def on_step_end(self, *_a: Any, **_k: Any) -> None:
                total = time.monotonic() - clock._t0
                gen_env, env = clock._gen_env
                clock.steps.append(
                    {"generation_s": gen_env - env, "env_s": env, "optim_s": total - gen_env}
                )
                split = ", ".join(f"{k} {v:.1f}" for k, v in clock.steps[-1].items())
                print(f"step {len(clock.steps)}: {split}", flush=True)

        return _CB()
