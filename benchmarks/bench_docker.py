"""Docker runtime figures, measured in one run: reset is in place, restarts are not.

    python benchmarks/bench_docker.py [--resets 50] [--restarts 5] [--json]

Prints, for one payments stack in containers: stack start; `reset` latency (median, p95)
next to the cost of a container restart until the service answers again, both by the
engine (`docker restart`) and by a real crash point (exit at the crash point, the runtime
starting the container again, service answering); per-call latency through the proxy; and
the same reset on the process runtime for comparison.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import httpx

import undobench_gym  # noqa: F401
from undobench_gym.agents.scripted import ScriptedAgent
from undobench_gym.core.env import UndoBenchEnv
from undobench_gym.core.pairing import run_episode


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(ms: list[float]) -> dict[str, float]:
    return {"median_ms": round(statistics.median(ms), 1), "p95_ms": round(pct(ms, 0.95), 1)}


def resets(env: UndoBenchEnv, n: int) -> list[float]:
    env.reset(seed=0, options={"workflow": "pay-charge-customer"})
    out = []
    for seed in range(1, n + 1):
        t0 = time.perf_counter()
        env.reset(seed=seed, options={"workflow": "pay-charge-customer"})
        out.append((time.perf_counter() - t0) * 1000)
    return out


def engine_restarts(env: UndoBenchEnv, n: int) -> list[float]:
    rt: Any = env.runtime
    admin = rt.endpoints.admin_urls["payments"]
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        rt._service.restart(timeout=5)
        while True:
            try:
                auth = rt.endpoints.auth
                httpx.get(f"{admin}/admin/health", timeout=1, headers=auth).raise_for_status()
                break
            except httpx.HTTPError:
                time.sleep(0.01)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def crash_restarts(env: UndoBenchEnv, n: int) -> list[float]:
    """Wall time of a crash-point episode minus a control episode of the same workflow."""
    agent = ScriptedAgent()
    out = []
    for seed in range(n):
        t0 = time.perf_counter()
        run_episode(env, agent, seed=seed, workflow="pay-split-payout", fault=None)
        control = time.perf_counter() - t0
        t0 = time.perf_counter()
        run_episode(env, agent, seed=seed, workflow="pay-split-payout", fault="crash-mid-batch")
        out.append((time.perf_counter() - t0 - control) * 1000)
        time.sleep(10.5)  # let the engine's restart back-off reset (it doubles within 10 s)
    return out


def calls(env: UndoBenchEnv, n: int) -> list[float]:
    url = f"{env.runtime.endpoints.agent_url}/payments/v1/balance"
    out = []
    with httpx.Client() as client:
        for _ in range(20):
            client.get(url)
        for _ in range(n):
            t0 = time.perf_counter()
            client.get(url).raise_for_status()
            out.append((time.perf_counter() - t0) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--resets", type=int, default=50)
    parser.add_argument("--restarts", type=int, default=5)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results: dict[str, Any] = {}
    t0 = time.perf_counter()
    docker_env = UndoBenchEnv("payments", runtime="docker")
    process_env = UndoBenchEnv("payments", runtime="process")
    try:
        docker_env.reset(seed=0)
        results["docker_stack_start_s"] = round(time.perf_counter() - t0, 2)
        process_env.reset(seed=0)
        results["docker_reset"] = summary(resets(docker_env, args.resets))
        results["process_reset"] = summary(resets(process_env, args.resets))
        results["docker_call_through_proxy"] = summary(calls(docker_env, args.calls))
        results["container_restart_engine"] = summary(engine_restarts(docker_env, args.restarts))
        results["container_restart_crash_point"] = summary(
            crash_restarts(docker_env, args.restarts)
        )
    finally:
        docker_env.close()
        process_env.close()
    dr, rr = results["docker_reset"]["median_ms"], results["container_restart_engine"]["median_ms"]
    results["restart_over_reset"] = round(rr / dr, 1)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"docker stack start: {results['docker_stack_start_s']} s")
    for key in (
        "docker_reset",
        "process_reset",
        "docker_call_through_proxy",
        "container_restart_engine",
        "container_restart_crash_point",
    ):
        r = results[key]
        print(f"{key:32s} median {r['median_ms']:8.1f} ms   p95 {r['p95_ms']:8.1f} ms")
    print(f"a container restart costs {results['restart_over_reset']}x a docker reset")


if __name__ == "__main__":
    main()
