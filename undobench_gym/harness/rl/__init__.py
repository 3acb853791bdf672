"""Training language-model agents on UndoBench (the `rl` extra): TRL's environment mode
(`UndoBenchEnvFactory`), rewards from the verdict, the per-rollout fault draw, and
demonstrations for a supervised warm start (`demos`).
docs/training.md shows the whole loop (examples/train_grpo.py)."""

from undobench_gym.harness.rl.demos import Demo, Recorder, record_demo, record_demos, tool_schemas
from undobench_gym.harness.rl.faults import FaultMix, scenarios_for
from undobench_gym.harness.rl.rewards import REWARDS, reward_fn, shaped_reward, verdict_reward
from undobench_gym.harness.rl.trl_env import UndoBenchEnvFactory, UndoBenchTRLEnv

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
