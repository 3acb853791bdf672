"""Training language-model agents on UndoBench (the `rl` extra): TRL's environment mode
(`UndoBenchEnvFactory`), rewards from the verdict, and the per-rollout fault draw.
docs/training.md shows the whole loop (examples/train_grpo.py)."""

from .faults import FaultMix, scenarios_for
from .rewards import REWARDS, reward_fn, shaped_reward, verdict_reward
from .trl_env import UndoBenchEnvFactory, UndoBenchTRLEnv

__all__ = [
    "REWARDS",
    "FaultMix",
    "UndoBenchEnvFactory",
    "UndoBenchTRLEnv",
    "reward_fn",
    "scenarios_for",
    "shaped_reward",
    "verdict_reward",
]
