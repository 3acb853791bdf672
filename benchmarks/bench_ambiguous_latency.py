"""Does the faulted call's latency tell an agent the hidden coin of an ambiguous fault?

For every ambiguous scenario and seeds 1..N, times (client side, as an agent would) the
step of the targeted call, groups it by the coin (committed or not), and prints the medians
and the accuracy of the best single latency threshold at guessing the coin, beside the same
fitted on shuffled coins (what noise alone scores: no tell when the two agree).
Run: .venv/bin/python benchmarks/bench_ambiguous_latency.py [--seeds 20]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from typing import Any

from undobench_gym.agents.scripted import ScriptedAgent
from undobench_gym.core.catalog import all_workflows
from undobench_gym.core.env import AMBIGUOUS_PAD_S, UndoBenchEnv


def faulted_latencies(env: UndoBenchEnv, workflow: str, scenario: str, seed: int) -> Any:
    """(coin, seconds of the step that carried the fault)."""
    env.reset(seed=seed, options={"workflow": workflow, "fault": scenario})
    target = env.harness_info()
    agent = ScriptedAgent()
    agent.reset(env.gold_plan())
    obs = '{"task": ""}'
    while True:
        action = agent.act(obs)
        t0 = time.perf_counter()
        obs, _r, term, trunc, _info = env.step(action)
        took = time.perf_counter() - t0
        if '"transport"' in obs or '"status": 50' in obs:
            env.truncate("time_limit") if not (term or trunc) else None
            return target["hidden_commit_coin"], took
        if term or trunc:
            return target["hidden_commit_coin"], None


def best_threshold_accuracy(samples: list[tuple[bool, float]]) -> float:
    """The best accuracy of "committed iff latency > t" (or <), over every t."""
    best = 0.5
    for _, t in samples:
        for sign in (1, -1):
            hits = sum((sign * (x - t) > 0) == coin for coin, x in samples)
            best = max(best, hits / len(samples))
    return best


def shuffled_baseline(samples: list[tuple[bool, float]], rounds: int = 200) -> float:
    """The same in-sample best-threshold accuracy with the coins shuffled: what noise alone
    scores with this many samples (the threshold is fitted on the data it is scored on)."""
    rng = random.Random(0)
    coins = [c for c, _ in samples]
    total = 0.0
    for _ in range(rounds):
        rng.shuffle(coins)
        total += best_threshold_accuracy(list(zip(coins, (x for _, x in samples), strict=True)))
    return total / rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args()
    print(f"pad: {AMBIGUOUS_PAD_S * 1000:.0f} ms")
    for wf in all_workflows():
        ambiguous = [s for s in wf.scenarios if s.ambiguous]
        if not ambiguous:
            continue
        env = UndoBenchEnv(wf.domain, workflow=wf.id)
        try:
            for sc in ambiguous:
                samples = []
                for seed in range(1, args.seeds + 1):
                    coin, took = faulted_latencies(env, wf.id, sc.id, seed)
                    if took is not None and coin is not None:
                        samples.append((coin, took))
                yes = [x * 1000 for c, x in samples if c]
                no = [x * 1000 for c, x in samples if not c]
                if not yes or not no:
                    print(f"{wf.id}:{sc.id}: one coin side only ({len(yes)}/{len(no)})")
                    continue
                print(
                    f"{wf.id}:{sc.id}: committed median {statistics.median(yes):.1f} ms "
                    f"(n={len(yes)}), not committed {statistics.median(no):.1f} ms "
                    f"(n={len(no)}), best threshold guesses "
                    f"{best_threshold_accuracy(samples):.2f} "
                    f"(shuffled coins: {shuffled_baseline(samples):.2f})"
                )
        finally:
            env.close()


if __name__ == "__main__":
    main()
