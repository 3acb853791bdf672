"""Core performance figures, measured in one run on this machine.

    python benchmarks/bench_core.py [--calls 300] [--resets 50] [--pairs 20] [--json]

Prints: reset latency (median, p95); latency of the same request made directly to the
service, through a bare mitmproxy reverse proxy, and through our proxy with its addons
(medians and ratios); env.step latency end to end; paired trials per second with the
scripted agent; resident memory per stack. Quote the figures of one run together: the
machine is shared and noisy, so compare ratios, not absolute numbers across runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

import undobench_gym  # noqa: F401
from undobench_gym.agents.methods import wrap
from undobench_gym.agents.scripted import ScriptedAgent
from undobench_gym.core.catalog import find_workflow
from undobench_gym.core.env import UndoBenchEnv
from undobench_gym.core.pairing import run_pair
from undobench_gym.core.runtime.process import ProcessRuntime, free_port


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def start_bare_mitmproxy(upstream_port: int) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from mitmproxy.tools.main import mitmdump; mitmdump()",
            "--mode",
            f"reverse:http://127.0.0.1:{upstream_port}/",
            "--listen-host",
            "127.0.0.1",
            "--listen-port",
            str(port),
            "--set",
            "flow_detail=0",
            "--set",
            "termlog_verbosity=warn",
            "--set",
            "connection_strategy=lazy",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/v1/balance", timeout=1)
            return proc, port
        except httpx.HTTPError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("bare mitmproxy did not start")


def time_calls(client: httpx.Client, url: str, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        client.get(url).raise_for_status()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def bench_wire(env: UndoBenchEnv, calls: int) -> dict[str, Any]:
    rt = env.runtime
    assert isinstance(rt, ProcessRuntime)
    svc_port = rt._service.ports[0]
    bare, bare_port = start_bare_mitmproxy(svc_port)
    urls = {
        "direct": f"http://127.0.0.1:{svc_port}/v1/balance",
        "bare_mitmproxy": f"http://127.0.0.1:{bare_port}/v1/balance",
        "undobench_proxy": f"{rt.endpoints.agent_url}/payments/v1/balance",
    }
    samples: dict[str, list[float]] = {k: [] for k in urls}
    try:
        with httpx.Client() as client:
            for url in urls.values():
                time_calls(client, url, 20)  # warm up connections and code paths
            rounds = 10
            for _ in range(rounds):  # interleave so drift hits all three alike
                for name, url in urls.items():
                    samples[name] += time_calls(client, url, calls // rounds)
    finally:
        bare.kill()
        bare.wait()
    med = {k: statistics.median(v) for k, v in samples.items()}
    return {
        "median_ms": {k: round(v, 3) for k, v in med.items()},
        "p95_ms": {k: round(pct(v, 0.95), 3) for k, v in samples.items()},
        "ratio_bare_over_direct": round(med["bare_mitmproxy"] / med["direct"], 3),
        "ratio_ours_over_bare": round(med["undobench_proxy"] / med["bare_mitmproxy"], 3),
        "addon_overhead_ms": round(med["undobench_proxy"] - med["bare_mitmproxy"], 3),
    }


def bench_reset(env: UndoBenchEnv, n: int) -> dict[str, float]:
    env.reset(seed=0, options={"workflow": "pay-charge-customer"})
    times = []
    for seed in range(1, n + 1):
        t0 = time.perf_counter()
        env.reset(seed=seed, options={"workflow": "pay-charge-customer"})
        times.append((time.perf_counter() - t0) * 1000)
    return {"median_ms": round(statistics.median(times), 2), "p95_ms": round(pct(times, 0.95), 2)}


def bench_step(env: UndoBenchEnv, n: int) -> dict[str, float]:
    env.reset(seed=1, options={"workflow": "pay-charge-customer"})
    cid = env._episode.params["customer_id"] if env._episode else ""
    action = {"tool": "get_customer", "arguments": {"customer_id": cid}}
    times = []
    for _ in range(n):
        if env._episode and env._episode.steps >= env.max_steps - 1:
            env.reset(seed=1, options={"workflow": "pay-charge-customer"})
        t0 = time.perf_counter()
        env.step(action)
        times.append((time.perf_counter() - t0) * 1000)
    return {"median_ms": round(statistics.median(times), 2), "p95_ms": round(pct(times, 0.95), 2)}


def bench_pairs(env: UndoBenchEnv, n: int) -> dict[str, float]:
    cases = [
        ("pay-charge-customer", "lost-ack", "B0"),
        ("pay-charge-customer", "pre-503", "bare"),
        ("pay-refund-duplicate-charge", "comp-lost-ack", "B2"),
        ("pay-cross-border-wire", "wire-lost-ack", "B2"),
    ]
    agent = ScriptedAgent()
    t0 = time.perf_counter()
    for i in range(n):
        wid, sc, method = cases[i % len(cases)]
        wf = find_workflow(wid)
        run_pair(
            wrap(env, method),
            agent,
            workflow=wf,
            scenario=wf.scenario(sc),
            seed=i,
            method=method,
            runtime="process",
        )
    elapsed = time.perf_counter() - t0
    return {"pairs": n, "seconds": round(elapsed, 2), "pairs_per_s": round(n / elapsed, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--resets", type=int, default=50)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    t0 = time.perf_counter()
    env = UndoBenchEnv("payments", max_steps=10_000)
    try:
        env.reset(seed=0)
        startup_s = time.perf_counter() - t0
        rt = env.runtime
        assert isinstance(rt, ProcessRuntime)
        results: dict[str, Any] = {"stack_start_s": round(startup_s, 2)}
        results["reset"] = bench_reset(env, args.resets)
        results["per_call"] = bench_wire(env, args.calls)
        results["env_step"] = bench_step(env, args.steps)
        env.max_steps = 20
        results["paired_trials"] = bench_pairs(env, args.pairs)
        results["memory_mib"] = {
            "service": round(rss_mib(rt.pids()[0]), 1),
            "proxy": round(rss_mib(rt.pids()[1]), 1),
        }
        results["memory_mib"]["stack"] = round(sum(results["memory_mib"].values()), 1)
    finally:
        env.close()
    if args.json:
        print(json.dumps(results, indent=2))
        return
    w = results["per_call"]
    print(f"stack start (service + proxy ready): {results['stack_start_s']} s")
    print(
        f"reset latency:  median {results['reset']['median_ms']} ms, "
        f"p95 {results['reset']['p95_ms']} ms  (n={args.resets})"
    )
    print(f"per-call latency, same GET, medians over {args.calls} calls each:")
    for k in ("direct", "bare_mitmproxy", "undobench_proxy"):
        print(f"  {k:16s} {w['median_ms'][k]:8.3f} ms  (p95 {w['p95_ms'][k]:.3f})")
    print(
        f"  bare mitmproxy / direct: {w['ratio_bare_over_direct']}x;  ours / bare mitmproxy: "
        f"{w['ratio_ours_over_bare']}x  (addons add {w['addon_overhead_ms']} ms)"
    )
    print(
        f"env.step end to end: median {results['env_step']['median_ms']} ms, "
        f"p95 {results['env_step']['p95_ms']} ms  (n={args.steps})"
    )
    p = results["paired_trials"]
    print(
        f"paired trials, scripted agent: {p['pairs_per_s']} pairs/s "
        f"({p['pairs']} pairs in {p['seconds']} s)"
    )
    m = results["memory_mib"]
    print(
        f"memory per stack (RSS): service {m['service']} MiB + proxy {m['proxy']} MiB = "
        f"{m['stack']} MiB"
    )


if __name__ == "__main__":
    main()
