"""Soak one stack with many episodes and report what leaked, measured in one run.

    python benchmarks/bench_soak.py [--episodes 1000] [--domain payments]
        [--runtime process|docker] [--mix all|no-timeout|no-crash|control] [--json]

Episodes rotate over every workflow of the domain, control and every fault scenario
(`--mix` narrows that: `no-crash` keeps the service one process for the whole soak, so its
memory can be followed), with the scripted agent and seeds 1, 2, ... Reports leaked
processes, open descriptors (of this process and of the stack's processes, from
/proc/PID/fd), listening ports and, on docker, containers, networks and volumes (all must
be 0), and the RSS growth of the service and the proxy (first and last reading after the
warm-up, and a least-squares slope per episode). Exits 1 if anything leaked.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.reliability.soak

from tests.reliability.soak import MIXES, Sample, soak


def report(result: dict[str, Any]) -> str:
    lines = [
        f"soak: {result['episodes']} episodes of {result['domain']} on {result['runtime']} "
        f"(mix {result['mix']}, rotation of {result['rotation']}), {result['wall_s']} s, "
        f"{result['episodes_per_s']} episodes/s, {result['service_restarts']} service restarts",
        "",
        "| leak | count |",
        "|---|---|",
    ]
    lines += [f"| {k} | {v} |" for k, v in result["leaks"].items()]
    lines += [
        "",
        "| process | RSS first | RSS last | growth | slope | over | processes |",
        "|---|---|---|---|---|---|---|",
    ]
    for role, g in result["rss"].items():
        lines.append(
            f"| {role} | {g['first_kib'] / 1024:.1f} MiB | {g['last_kib'] / 1024:.1f} MiB | "
            f"{g['growth_kib']} KiB | {g['slope_kib_per_episode']} KiB/episode | "
            f"{g['episodes_measured']} episodes | {g['processes']} |"
        )
    fds = result["fds"]
    lines += [
        "",
        f"open descriptors: first {fds['first']}, last {fds['last']}, max {fds['max']}",
        f"listening ports: first {result['listening_ports']['first']}, "
        f"last {result['listening_ports']['last']}",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--domain", default="payments")
    parser.add_argument("--runtime", default="process", choices=["process", "docker"])
    parser.add_argument("--mix", default="all", choices=MIXES)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--every", type=int, default=10, help="sample every N episodes")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    t0 = time.monotonic()

    def progress(i: int, s: Sample) -> None:
        if not args.json and i % 100 == 0:
            rss = {k: f"{v / 1024:.1f}" for k, v in s.rss_kib.items()}
            print(
                f"  {i:5d} episodes, {time.monotonic() - t0:6.0f} s, RSS MiB {rss}, fds {s.fds}",
                file=sys.stderr,
                flush=True,
            )

    result = soak(
        args.domain,
        episodes=args.episodes,
        runtime=args.runtime,
        warmup=args.warmup,
        every=args.every,
        mix=args.mix,
        progress=progress,
    )
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(report(result))
    return 1 if any(result["leaks"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
