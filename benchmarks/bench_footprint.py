"""What a stack costs to hold: image size, container start and memory per stack.

    python benchmarks/bench_footprint.py [--image TAG ...] [--starts 5] [--episodes 20] [--json]

Process runtime: every domain's stack after `--episodes` gold-plan pairs, its memory as the
PSS (proportional set size) of each process: a fork server's zygote and child share their
pages, so the sum of their RSS would count the shared ones twice. Docker runtime, per image
given (default: the current one; pass an old and a new tag to compare them in one run): the
image's size and its Python packages, container stack start to healthy (median of
`--starts`), and the containers' memory as `docker stats` counts it (usage less inactive
file cache) after a payments stack served `--episodes` episodes of calls.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import httpx

from undobench_gym.agents.scripted import ScriptedAgent
from undobench_gym.core.catalog import domain as domain_of
from undobench_gym.core.env import UndoBenchEnv
from undobench_gym.core.pairing import run_pair
from undobench_gym.services.domains import DOMAIN_NAMES

MIB = 1024 * 1024


def pss_mib(pid: int) -> tuple[float, float]:
    """(PSS, RSS) of one process, from the kernel's rollup of its mappings."""
    fields = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        key, value, *_ = line.split()
        fields[key.rstrip(":")] = int(value)
    return fields["Pss"] / 1024, fields["Rss"] / 1024


def process_stacks(episodes: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in DOMAIN_NAMES:
        workflows = domain_of(name).workflows
        env = UndoBenchEnv(name, runtime="process")
        try:
            for i in range(episodes):
                wf = workflows[i % len(workflows)]
                scenario = wf.scenarios[i % len(wf.scenarios)]
                run_pair(
                    env,
                    ScriptedAgent(),
                    workflow=wf,
                    scenario=scenario,
                    seed=i + 1,
                    method="bare",
                    runtime="process",
                )
            rt: Any = env.runtime
            per = {pid: pss_mib(pid) for pid in rt.process_pids()}
            out[name] = {
                "processes": len(per),
                "pss_mib": round(sum(p for p, _ in per.values()), 1),
                "rss_sum_mib": round(sum(r for _, r in per.values()), 1),
            }
        finally:
            env.close()
    return out


def container_mib(container: Any) -> float:
    mem = container.stats(stream=False)["memory_stats"]
    inactive = mem.get("stats", {}).get("inactive_file", 0)
    return float(mem["usage"] - inactive) / MIB


def docker_image(tag: str, starts: int, episodes: int) -> dict[str, Any]:
    from undobench_gym.core.runtime.docker import DockerRuntime
    from undobench_gym.core.runtime.images import docker_client

    client = docker_client()
    image = client.images.get(tag)
    du = client.containers.run(
        tag, ["du", "-sm", "/opt/undobench"], remove=True, network_mode="none"
    )
    start_ms = []
    for _ in range(starts):
        t0 = time.perf_counter()
        with DockerRuntime("payments", image=tag) as rt:
            rt.wait_healthy()
            start_ms.append((time.perf_counter() - t0) * 1000)
    with DockerRuntime("payments", image=tag) as rt, httpx.Client(timeout=10) as http:
        rt.wait_healthy()
        ep = rt.endpoints
        for i in range(episodes):
            admin = ep.admin_urls["payments"]
            http.post(f"{admin}/admin/reset", json={"seed": i + 1}, headers=ep.auth)
            http.post(
                f"{ep.control_url}/control/episode",
                json={"episode_id": f"fp-{i}", "plan": None},
                headers=ep.auth,
            ).raise_for_status()
            for _ in range(5):
                http.get(f"{ep.agent_url}/payments/v1/customers").raise_for_status()
        rt_any: Any = rt
        service, proxy = container_mib(rt_any._service), container_mib(rt_any._proxy)
    return {
        "image_mb": round(image.attrs["Size"] / 1e6),
        "python_packages_mb": int(du.split()[0]),
        "stack_start_ms_median": round(statistics.median(start_ms)),
        "service_mib": round(service, 1),
        "proxy_mib": round(proxy, 1),
        "stack_mib": round(service + proxy, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image", action="append", help="docker image tag (repeat to compare)")
    ap.add_argument("--starts", type=int, default=5)
    ap.add_argument("--episodes", type=int, default=20)
    ap.add_argument(
        "--restart", default="fork,exec", help="service restart modes to measure (process)"
    )
    ap.add_argument("--no-docker", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    results: dict[str, Any] = {"process": {}, "docker": {}}
    for mode in args.restart.split(","):
        os.environ["UNDOBENCH_SERVICE_RESTART"] = mode  # read by each stack as it starts
        results["process"][mode] = process_stacks(args.episodes)
    os.environ.pop("UNDOBENCH_SERVICE_RESTART")
    if not args.no_docker:
        for tag in args.image or ["undobench/stack:latest"]:
            results["docker"][tag] = docker_image(tag, args.starts, args.episodes)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for mode, stacks in results["process"].items():
        print(f"process runtime ({mode} restarts), memory per stack after {args.episodes} pairs:")
        print(f"  {'domain':<10} {'PSS MiB':>8} {'RSS sum':>8} processes")
        for name, r in stacks.items():
            print(f"  {name:<10} {r['pss_mib']:>8} {r['rss_sum_mib']:>8} {r['processes']}")
        pss = [r["pss_mib"] for r in stacks.values()]
        print(f"  median PSS {statistics.median(pss):.1f} MiB, max {max(pss):.1f} MiB")
    for tag, r in results["docker"].items():
        print(
            f"docker {tag}: image {r['image_mb']} MB (python packages {r['python_packages_mb']}"
            f" MB), stack start {r['stack_start_ms_median']} ms, memory {r['stack_mib']} MiB "
            f"(service {r['service_mib']} + proxy {r['proxy_mib']})"
        )


if __name__ == "__main__":
    main()
