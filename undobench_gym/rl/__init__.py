"""Training language-model agents on UndoBench (the `rl` extra): TRL's environment mode
(`UndoBenchEnvFactory`), rewards from the verdict, the per-rollout fault draw, and
demonstrations for a supervised warm start (`demos`).
docs/training.md shows the whole loop (examples/train_grpo.py)."""

from .demos import Demo, Recorder, record_demo, record_demos, tool_schemas
from .faults import FaultMix, scenarios_for
from .rewards import REWARDS, reward_fn, shaped_reward, verdict_reward
from .trl_env import UndoBenchEnvFactory, UndoBenchTRLEnv

__all__ = [
    "REWARDS",
    "Demo",
    "FaultMix",
    "Recorder",
    "UndoBenchEnvFactory",
    "UndoBenchTRLEnv",
    "record_demo",
    "record_demos",
    "reward_fn",
    "scenarios_for",
    "shaped_reward",
    "tool_schemas",
    "verdict_reward",
]
