"""A real model in the loop: throughput of a sweep, and the two llama.cpp servers side by side.

    python benchmarks/bench_real_model.py sweep  [--out DIR] [undobench run flags...]
    python benchmarks/bench_real_model.py report DIR [DIR...]
    python benchmarks/bench_real_model.py servers [--workflows A,B] [--seeds 1]
    python benchmarks/bench_real_model.py speculative [--settings none,ngram-simple:3,12]

`sweep` runs `undobench run --agent local:MODEL ...` (default: Qwen2.5-Coder-1.5B on
llama-server, 2 DEV workflows at a lost acknowledgement, F1) while sampling /proc/stat, then
prints scored pairs per hour, prompt and completion tokens per second, the prefix-cache hit
rate (prompt tokens the server took from its cache) and the share of wall time the cores
were busy. `report` prints the same figures for finished runs (without the CPU share).
`servers` runs one small sweep against each server (llama-server, llama-cpp-python) with
the same model, settings and pairs, and prints both: wall time, native tool calls, calls
read from text, text replies, provider errors. `speculative` runs the same pairs (F1 and
F2, temperature 0, two workers) once per llama-server speculative setting and prints their
figures side by side, with how many actions differ from the first setting's (greedy
decoding with exact-match drafts writes the same replies, up to batch arithmetic).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
UNDOBENCH = [sys.executable, "-m", "undobench_gym.harness.cli"]
MODEL = "qwen2.5-coder-1.5b"
DEFAULT_RUN = [
    "--workflows",
    "pay-charge-customer,db-create-order",
    "--boundaries",
    "POST_MUTATION_PRE_ACK",
    "--method",
    "bare",
    "--seeds",
    "1-2",
    "--framework",
    "F1",
    "--max-steps",
    "8",
]


def _cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies over all cores since boot, from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


class CpuSampler:
    """The share of all cores' time spent busy while it runs (machine-wide)."""

    def __enter__(self) -> CpuSampler:
        self.start = _cpu_times()
        return self

    def __exit__(self, *exc: object) -> None:
        end = _cpu_times()
        busy, total = end[0] - self.start[0], end[1] - self.start[1]
        self.busy_share = busy / total if total else 0.0


def _pairs(run: Path) -> list[dict[str, Any]]:
    with (run / "trials.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def scored(pair: dict[str, Any]) -> bool:
    """A pair the recovery metrics count: no infrastructure error, the fault happened as
    planned and both episodes agree up to it (evaluation.indicators.exclusion)."""
    from undobench_gym.evaluation.indicators import exclusion, is_infra_error

    return not is_infra_error(pair) and exclusion(pair) is None


def figures(run: Path) -> dict[str, Any]:
    pairs = _pairs(run)
    meta = json.loads((run / "run_meta.json").read_text(encoding="utf-8"))
    wall = sum(s.get("wall_s") or 0.0 for s in meta.get("sessions", []))
    stats = [p.get("agent_stats") or {} for p in pairs]
    prompt = sum(s.get("prompt_tokens", 0) for s in stats)
    cached = sum(s.get("cached_prompt_tokens", 0) for s in stats)
    completion = sum(s.get("completion_tokens", 0) for s in stats)
    n_scored = sum(scored(p) for p in pairs)
    controls = sum(bool((p.get("control") or {}).get("success")) for p in pairs)
    pair_walls = [p["wall_ms"] / 1000 for p in pairs if p.get("wall_ms")]
    return {
        "run": str(run),
        "pairs": len(pairs),
        "scored_pairs": n_scored,
        "control_successes": controls,
        "wall_s": round(wall, 1),
        "scored_pairs_per_hour": round(n_scored / wall * 3600, 1) if wall else None,
        "pairs_per_hour": round(len(pairs) / wall * 3600, 1) if wall else None,
        "median_pair_s": round(statistics.median(pair_walls), 1) if pair_walls else None,
        # prompt tokens the server was sent (cached or not) and those it had to encode
        "prompt_tokens_per_s": round(prompt / wall, 1) if wall else None,
        "encoded_prompt_tokens_per_s": round((prompt - cached) / wall, 1) if wall else None,
        "completion_tokens_per_s": round(completion / wall, 1) if wall else None,
        "prefix_cache_hit_rate": round(cached / prompt, 3) if prompt else None,
        "text_tool_calls": sum(s.get("text_tool_calls", 0) for s in stats),
        "actions": sum(s.get("actions", 0) for s in stats),
        "text_replies": sum(s.get("text_replies", 0) for s in stats),
        "provider_errors": sum(s.get("provider_errors", 0) for s in stats),
        # requests the server answered, and fault-episode turns taken from the control
        "model_requests_per_pair": round(sum(s.get("requests", 0) for s in stats) / len(pairs), 2)
        if pairs
        else None,
        "replayed_replies": sum(s.get("replayed_replies", 0) for s in stats),
        "parted_before_the_fault": sum(p.get("prefix_equivalent") is False for p in pairs),
        "model_servers": [
            s.get("model_servers") for s in meta.get("sessions", []) if s.get("model_servers")
        ][-1:],
    }


def run_sweep(out: Path, flags: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    cmd = [*UNDOBENCH, "run", *flags, "--out", str(out), "--no-report", "--quiet"]
    if "--agent" not in flags:
        cmd += ["--agent", f"local:{MODEL}"]
    print("$", " ".join(cmd[2:]), file=sys.stderr, flush=True)
    with CpuSampler() as cpu:
        subprocess.run(cmd, check=True, env={**os.environ, **(env or {})})
    result = figures(out)
    result["cores_busy_share"] = round(cpu.busy_share, 3)
    return result


def _print(result: dict[str, Any]) -> None:
    width = max(len(k) for k in result)
    for key, value in result.items():
        print(f"  {key:<{width}}  {value}")


def _lost_ack_flags(workflows: str, seeds: str, *, framework: str, workers: int) -> list[str]:
    """`undobench run` flags for the comparisons: the workflows at a lost acknowledgement,
    bare, 8 steps."""
    return [
        *("--workflows", workflows, "--scenarios", "lost-ack", "--method", "bare"),
        *("--seeds", seeds, "--framework", framework, "--max-steps", "8"),
        *("--workers", str(workers)),
    ]


def servers(args: argparse.Namespace) -> None:
    """The same pairs against each server kind; each sweep owns its server (local:)."""
    flags = _lost_ack_flags(args.workflows, args.seeds, framework="F1", workers=1)
    results = {}
    for kind in ("llama-server", "llama-cpp-python"):
        out = Path(args.out) / kind
        if out.exists():
            subprocess.run(["rm", "-rf", str(out)], check=True)
        print(f"== {kind}", flush=True)
        results[kind] = run_sweep(out, flags, {"UNDOBENCH_MODEL_SERVER": kind})
        _print(results[kind])
    keys = [
        "pairs",
        "wall_s",
        "median_pair_s",
        "actions",
        "text_tool_calls",
        "text_replies",
        "provider_errors",
        "control_successes",
        "completion_tokens_per_s",
        "prefix_cache_hit_rate",
        "cores_busy_share",
    ]
    print("\n| figure | llama-server | llama-cpp-python |\n|---|---|---|")
    for key in keys:
        print(f"| {key} | {results['llama-server'][key]} | {results['llama-cpp-python'][key]} |")


def _actions(run: Path) -> dict[tuple[str, str], list[Any]]:
    return {
        (p["pair_id"], part): [t.get("action") for t in (p.get(part) or {}).get("transcript", [])]
        for p in _pairs(run)
        for part in ("control", "fault")
    }


def speculative(args: argparse.Namespace) -> None:
    """The same pairs once per speculative setting; each sweep owns its server."""
    flags = _lost_ack_flags(args.workflows, args.seeds, framework="F1,F2", workers=2)
    flags.append("--own-controls")
    settings = args.settings.split(";")
    results, actions = {}, {}
    for setting in settings:
        out = Path(args.out) / setting.replace(":", "-").replace(",", "-")
        if out.exists():
            subprocess.run(["rm", "-rf", str(out)], check=True)
        print(f"== speculative {setting}", flush=True)
        env = {"UNDOBENCH_MODEL_SPECULATIVE": setting, "UNDOBENCH_LLM_TEMPERATURE": "0"}
        results[setting] = run_sweep(out, flags, env)
        actions[setting] = _actions(out)
        _print(results[setting])
    first = settings[0]
    for setting in settings:
        mine, base = actions[setting], actions[first]
        results[setting]["episodes_with_other_actions"] = sum(
            mine.get(k) != v for k, v in base.items()
        )
    keys = [
        "pairs",
        "wall_s",
        "median_pair_s",
        "actions",
        "completion_tokens_per_s",
        "encoded_prompt_tokens_per_s",
        "prefix_cache_hit_rate",
        "control_successes",
        "provider_errors",
        "cores_busy_share",
        "episodes_with_other_actions",
    ]
    print("\n| figure | " + " | ".join(settings) + " |\n|---|" + "---|" * len(settings))
    for key in keys:
        print(f"| {key} | " + " | ".join(str(results[s][key]) for s in settings) + " |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("sweep")
    s.add_argument("--out", default="runs/bench-real-model")
    s.add_argument("flags", nargs=argparse.REMAINDER)
    r = sub.add_parser("report")
    r.add_argument("runs", nargs="+")
    c = sub.add_parser("servers")
    c.add_argument("--workflows", default="pay-charge-customer,db-create-order")
    c.add_argument("--seeds", default="1")
    c.add_argument("--out", default="runs/bench-servers")
    sp = sub.add_parser("speculative")
    sp.add_argument(
        "--settings",
        default="none;ngram-simple:3,12;ngram-map-k:3,12",
        help="speculative settings separated by ';' (TYPE or TYPE:N,M)",
    )
    sp.add_argument("--workflows", default="pay-charge-customer,db-create-order")
    sp.add_argument("--seeds", default="1")
    sp.add_argument("--out", default="runs/bench-speculative")
    args = p.parse_args()
    started = time.time()
    if args.mode == "sweep":
        out = Path(args.out)
        if out.exists():
            subprocess.run(["rm", "-rf", str(out)], check=True)
        flags = [f for f in args.flags if f != "--"] or [*DEFAULT_RUN, "--workers", "2"]
        _print(run_sweep(out, flags))
    elif args.mode == "report":
        for run in args.runs:
            _print(figures(Path(run)))
    elif args.mode == "servers":
        servers(args)
    else:
        speculative(args)
    print(f"(bench took {time.time() - started:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
