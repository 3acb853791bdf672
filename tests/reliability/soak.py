"""Many episodes on one stack, and what they leave behind: processes, containers, networks,
open files, listening ports, memory. Shared by tests/reliability/test_soak.py and
benchmarks/bench_soak.py.

Episodes rotate over every workflow of the domain, each control and each fault scenario
(crash points included, so the service restarts now and then), with the scripted agent and
seeds 1, 2, ... A leak is something present after the soak that was not there after the
warm-up (the first `warmup` episodes), or anything of the stack left after `close()`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from undobench_gym.agents.methods import wrap
from undobench_gym.agents.scripted import ScriptedAgent
from undobench_gym.core.catalog import domain as catalog_domain
from undobench_gym.core.env import UndoBenchEnv
from undobench_gym.core.pairing import run_episode

from . import procs

ROLES = ("service", "proxy")


@dataclass
class Sample:
    episode: int
    t: float
    pids: dict[str, int]
    rss_kib: dict[str, int]
    fds: dict[str, int]  # per role, and "driver" (this process)
    ports: dict[str, list[int]]
    descendants: int  # live processes below this one
    docker: dict[str, int] = field(default_factory=dict)  # containers/networks/volumes


def docker_counts(stack_id: str) -> dict[str, int]:
    """Containers, networks and volumes labelled with this stack's id."""
    from undobench_gym.core.runtime.images import docker_client

    client = docker_client()
    flt = {"label": [f"io.undobench.stack={stack_id}"]}
    return {
        "containers": len(client.containers.list(all=True, filters=flt)),
        "networks": len(client.networks.list(filters=flt)),
        "volumes": len(client.volumes.list(filters=flt)),
    }


def stack_pids(env: UndoBenchEnv) -> dict[str, int]:
    """The host pids of the stack's service and proxy (containers' main processes too)."""
    rt: Any = env.runtime
    if env.runtime_kind == "docker":
        out = {}
        for role, container in (("service", rt._service), ("proxy", rt._proxy)):
            container.reload()
            out[role] = int(container.attrs["State"]["Pid"])
        return out
    service, proxy = rt.pids()
    return {"service": service, "proxy": proxy}


def sample(env: UndoBenchEnv, episode: int) -> Sample:
    pids = stack_pids(env)
    fds = {role: procs.fd_count(pid) for role, pid in pids.items()}
    fds["driver"] = procs.fd_count(os.getpid())
    return Sample(
        episode=episode,
        t=time.monotonic(),
        pids=pids,
        rss_kib={role: procs.rss_kib(pid) for role, pid in pids.items()},
        fds=fds,
        ports={role: procs.listening_ports(pid) for role, pid in pids.items()},
        descendants=len(procs.descendants()),
        docker=docker_counts(env.runtime.stack_id) if env.runtime_kind == "docker" else {},  # type: ignore[attr-defined]
    )


MIXES = ("all", "no-timeout", "no-crash", "control")


def schedule(domain: str, mix: str = "all") -> list[tuple[str, str | None]]:
    """(workflow, scenario or None) for one round over the domain. `mix`: every scenario
    ("all"), all but those whose visible error is a timeout (each waits out the client's
    timeout: "no-timeout"), all but crash points ("no-crash": the service never restarts,
    so its memory can be followed over the whole soak), or control episodes only."""
    if mix not in MIXES:
        raise ValueError(f"mix must be one of {MIXES}")
    out: list[tuple[str, str | None]] = []
    for wf in catalog_domain(domain).workflows:
        out.append((wf.id, None))
        for sc in wf.scenarios if mix != "control" else ():
            if mix == "no-timeout" and sc.visible_error.value == "timeout":
                continue
            if mix == "no-crash" and sc.crash_point:
                continue
            out.append((wf.id, sc.id))
    return out


def _growth(samples: list[Sample], role: str) -> dict[str, Any]:
    """RSS growth of `role` over the longest run of samples of one process (a crash
    restart starts a new process), as total KiB and a least-squares slope per episode."""
    runs: list[list[Sample]] = []
    for s in samples:
        if runs and runs[-1][-1].pids[role] == s.pids[role]:
            runs[-1].append(s)
        else:
            runs.append([s])
    best = max(runs, key=len)
    xs = [s.episode for s in best]
    ys = [s.rss_kib[role] for s in best]
    slope = 0.0
    if len(xs) > 1:
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        den = sum((x - mx) ** 2 for x in xs)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den
    return {
        "first_kib": ys[0],
        "last_kib": ys[-1],
        "max_kib": max(ys),
        "growth_kib": ys[-1] - ys[0],
        "slope_kib_per_episode": round(slope, 3),
        "episodes_measured": xs[-1] - xs[0],
        "processes": len(runs),
    }


def soak(
    domain: str = "payments",
    episodes: int = 300,
    runtime: str = "process",
    warmup: int = 30,
    every: int = 10,
    mix: str = "all",
    progress: Callable[[int, Sample], None] | None = None,
) -> dict[str, Any]:
    """Run `episodes` episodes on one stack; returns the figures and the leak counts."""
    before_pids = {p.pid for p in procs.descendants()}
    env = UndoBenchEnv(domain, runtime=runtime)
    agent, plan = ScriptedAgent(), schedule(domain, mix)
    samples: list[Sample] = []
    t0 = time.monotonic()
    try:
        env.reset(seed=0)
        wrapped = wrap(env, "bare")
        for i in range(episodes):
            workflow, scenario = plan[i % len(plan)]
            run_episode(wrapped, agent, seed=i + 1, workflow=workflow, fault=scenario)
            if i + 1 == warmup or (i + 1 > warmup and (i + 1) % every == 0) or i + 1 == episodes:
                samples.append(sample(env, i + 1))
                if progress:
                    progress(i + 1, samples[-1])
        wall = time.monotonic() - t0
        restarts = env.runtime.restarts
        stack = stack_pids(env)
        stack_id = getattr(env.runtime, "stack_id", "")
        ports = sorted({p for s in samples[-1:] for v in s.ports.values() for p in v})
    finally:
        env.close()
    closed_left = [p for p in procs.descendants() if p.pid not in before_pids]
    for pid in stack.values():
        if procs.alive(pid) and env.runtime_kind == "process":
            closed_left.append(procs.read_proc(pid))  # type: ignore[arg-type]
    ports_left = [p for p in ports if procs.port_open(p)] if runtime == "process" else []
    first, last = samples[0], samples[-1]
    # Keep-alive connections come and go (a descriptor or two): compare the highest count
    # of the last third of the samples with the highest before it, not two single readings.
    third = max(1, len(samples) // 3)
    early, late = samples[:-third] or samples[:1], samples[-third:]

    def grew(key: Callable[[Sample], int]) -> int:
        return max(0, max(map(key, late)) - max(map(key, early)))

    leaks = {
        "processes": grew(lambda s: s.descendants),
        "processes_after_close": len(closed_left),
        "fds_driver": grew(lambda s: s.fds["driver"]),
        "fds_proxy": grew(lambda s: s.fds["proxy"]),
        "fds_service": grew(lambda s: s.fds["service"]),
        "ports": len(
            {p for v in last.ports.values() for p in v}
            - {p for v in first.ports.values() for p in v}
        ),
        "ports_after_close": len(ports_left),
    }
    if runtime == "docker":
        after = docker_counts(stack_id)
        for kind in ("containers", "networks", "volumes"):
            leaks[kind] = grew(lambda s, kind=kind: s.docker[kind])  # type: ignore[misc]
            leaks[f"{kind}_after_close"] = after[kind]
    return {
        "domain": domain,
        "runtime": runtime,
        "episodes": episodes,
        "mix": mix,
        "rotation": len(plan),
        "warmup": warmup,
        "episodes_per_s": round(episodes / wall, 2),
        "wall_s": round(wall, 1),
        "service_restarts": restarts,
        "leaks": leaks,
        "rss": {role: _growth(samples[samples.index(first) :], role) for role in ROLES},
        "fds": {"first": first.fds, "last": last.fds, "max": _max_fds(samples)},
        "listening_ports": {"first": first.ports, "last": last.ports},
        "samples": [asdict(s) for s in samples],
    }


def _max_fds(samples: list[Sample]) -> dict[str, int]:
    return {k: max(s.fds[k] for s in samples) for k in samples[0].fds}
