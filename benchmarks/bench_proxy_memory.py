"""Does the fault proxy's memory grow with calls? One run, printed per batch of calls.

    python benchmarks/bench_proxy_memory.py [--batches 5] [--calls 6000] [--every 5]

Drives one payments stack's proxy (process runtime) alone: one GET per call through the
agent URL, an episode reset on the control API every `--every` calls (as the env does),
after a warm-up batch. A leak shows as a steady growth per batch; allocator warm-up shows
as growth in the first batch only.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import httpx

from undobench_gym.core.runtime.process import ProcessRuntime


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=5)
    ap.add_argument("--calls", type=int, default=6000, help="calls per batch")
    ap.add_argument("--every", type=int, default=5, help="calls per episode")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    with ProcessRuntime("payments") as rt, httpx.Client(timeout=5) as client:
        ep = rt.endpoints
        admin = ep.admin_urls["payments"]
        client.post(f"{admin}/admin/reset", json={"seed": 1}, headers=ep.auth).raise_for_status()
        proxy_pid = rt.pids()[1]
        episodes = 0

        def batch(n: int) -> None:
            nonlocal episodes
            for i in range(n):
                if i % args.every == 0:
                    episodes += 1
                    client.post(
                        f"{ep.control_url}/control/episode",
                        json={"episode_id": f"bench-{episodes}", "plan": None},
                        headers=ep.auth,
                    ).raise_for_status()
                client.get(f"{ep.agent_url}/payments/v1/customers").raise_for_status()

        start = rss_kib(proxy_pid)
        t0 = time.monotonic()
        batch(args.calls)
        warm = rss_kib(proxy_pid)
        growth = []
        for _ in range(args.batches):
            before = rss_kib(proxy_pid)
            batch(args.calls)
            growth.append(rss_kib(proxy_pid) - before)
        wall = time.monotonic() - t0
        assert rt.restarts == 0, "the stack restarted during the run"

    calls = args.calls * args.batches
    result = {
        "calls_per_batch": args.calls,
        "calls_per_episode": args.every,
        "rss_start_kib": start,
        "warmup_growth_kib": warm - start,
        "growth_per_batch_kib": growth,
        "bytes_per_call_after_warmup": round(sum(growth) * 1024 / calls, 1),
        "wall_s": round(wall, 1),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"proxy RSS at start {start / 1024:.1f} MiB; warm-up batch +{warm - start} KiB")
    for k, g in enumerate(growth, 1):
        print(f"  batch {k}: {args.calls} calls, RSS {g:+d} KiB")
    print(
        f"after warm-up: {result['bytes_per_call_after_warmup']} bytes per call over "
        f"{calls} calls ({wall:.0f} s in all)"
    )


if __name__ == "__main__":
    main()
