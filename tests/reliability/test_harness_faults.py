"""Faults injected into the harness itself, during sweeps (process runtime).

A killed service or proxy must not lose or duplicate a trial, and must not silently change
one: every trial of a sweep with kills is either recorded as an infrastructure error or
identical to the same trial of a sweep without kills (trials are deterministic per seed).
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from undobench_gym.agents.scripted import ScriptedAgent
from undobench_gym.core.env import UndoBenchEnv
from undobench_gym.core.pairing import run_episode
from undobench_gym.core.runtime.process import ProcessRuntime
from undobench_gym.core.trials import read_trials
from undobench_gym.harness.runner import TrialSpec, expand, run_sweep

from .chaos import KillingAgent, RandomKiller
from .conftest import Figures
from .procs import alive, kill, stack_children, stack_processes, wait_gone

AGENT = "python:tests.reliability.chaos:KillingAgent"


def trial_key(rec: dict[str, Any]) -> tuple[str, str, str, int]:
    return (rec["workflow"], rec["scenario"], rec["method"], rec["seed"])


def outcome(rec: dict[str, Any]) -> Any:
    """What a kill must not change unnoticed: transcripts, final states, verdicts."""
    return [
        (ep["transcript"], ep["state_hash"], ep["success"], ep["fault_fired"])
        for ep in (rec["control"], rec["fault"])
    ]


def errored(rec: dict[str, Any]) -> bool:
    return bool(rec["control"]["error"] or rec["fault"]["error"])


def sweep(
    trials: list[TrialSpec],
    out: Path,
    agent: str = "scripted",
    workers: int = 1,
    on_trial: Any = None,
) -> list[dict[str, Any]]:
    run_sweep(
        trials,
        agent_spec=agent,
        runtime="process",
        out=out,
        progress=False,
        workers=workers,
        on_trial=on_trial,
    )
    return read_trials(out / "trials.jsonl")


def check_exactly_once(trials: list[TrialSpec], records: list[dict[str, Any]]) -> None:
    keys = [trial_key(r) for r in records]
    expected = {(t.workflow.id, t.scenario.id, t.method, t.seed) for t in trials}
    assert len(keys) == len(set(keys)), "a trial was recorded twice"
    assert set(keys) == expected, f"missing: {sorted(expected - set(keys))[:5]}"


def silent_changes(
    baseline: list[dict[str, Any]], records: list[dict[str, Any]]
) -> list[tuple[str, str, str, int]]:
    """Trials that differ from the baseline but carry no infrastructure error."""
    ref = {trial_key(r): outcome(r) for r in baseline}
    return [trial_key(r) for r in records if not errored(r) and outcome(r) != ref[trial_key(r)]]


@pytest.fixture(scope="module")
def trials() -> list[TrialSpec]:
    return expand(
        ["pay-charge-customer", "pay-split-payout", "db-transfer-funds"],
        None,
        ["bare"],
        [1, 2, 3],
    )


@pytest.fixture(scope="module")
def baseline(trials: list[TrialSpec], tmp_path_factory: pytest.TempPathFactory) -> Any:
    return sweep(trials, tmp_path_factory.mktemp("baseline"))


@pytest.mark.slow
def test_sweep_survives_random_kills(
    trials: list[TrialSpec], baseline: Any, tmp_path: Path, figures: Figures
) -> None:
    """Two worker processes; services, proxies and workers killed at random moments."""
    before = {p.pid for p in stack_processes()}  # other tests' stacks: never touched
    chaos = RandomKiller(protect=before, seed=7)
    t0 = time.monotonic()
    records = sweep(trials, tmp_path, workers=2, on_trial=chaos)
    kills = chaos.kills
    check_exactly_once(trials, records)
    assert kills, "the chaos thread never found a process to kill"
    left = [p.pid for p in stack_processes() if p.pid not in before]
    assert not wait_gone(left, timeout=10), "the sweep left processes running"
    changed = silent_changes(baseline, records)
    figures.add(
        "harness_faults",
        "random_kills_process",
        {
            "trials": len(records),
            "kills": len(kills),
            **{f"{role}_kills": sum(k.role == role for k in kills) for role in chaos.roles},
            "infrastructure_errors": sum(errored(r) for r in records),
            "retried": sum(r.get("attempts", 1) > 1 for r in records),
            "silently_changed": len(changed),
            "lost": 0,
            "seconds": round(time.monotonic() - t0, 1),
        },
    )


@pytest.mark.parametrize("role", ["service", "proxy"])
def test_process_killed_mid_call_is_an_infrastructure_error(
    role: str, trials: list[TrialSpec], baseline: Any, tmp_path: Path
) -> None:
    chosen = [t for t in trials if t.workflow.id == "pay-charge-customer"][:2]
    # Episode 1 is the first pair's control episode; its step 2 is create_charge.
    KillingAgent.configure({1: (2, role)}, protect={p.pid for p in stack_children()})
    records = sweep(chosen, tmp_path, agent=AGENT)
    assert [k.role for k in KillingAgent.kills] == [role]
    check_exactly_once(chosen, records)
    assert not silent_changes(baseline, records)


def test_restarted_proxy_still_fires_tool_targeted_faults() -> None:
    env = UndoBenchEnv("payments")
    try:
        first = run_episode(
            env, ScriptedAgent(), seed=1, workflow="pay-charge-customer", fault="lost-ack"
        )
        assert first["fault_fired"]
        _service, old = env.runtime.pids()  # type: ignore[attr-defined]
        kill(old)
        deadline = time.monotonic() + 20
        while old in env.runtime.pids() and time.monotonic() < deadline:  # type: ignore[attr-defined]
            time.sleep(0.05)
        env.runtime.wait_healthy(probe=True)
        again = run_episode(
            env, ScriptedAgent(), seed=1, workflow="pay-charge-customer", fault="lost-ack"
        )
        assert again["fault_fired"], again["wire"]
    finally:
        env.close()


def test_stack_started_in_a_thread_outlives_the_thread() -> None:
    rt = ProcessRuntime("payments")
    try:
        starter = threading.Thread(target=rt.start)
        starter.start()
        starter.join()
        pids = rt.pids()
        time.sleep(1.5)
        assert rt.restarts == 0 and all(alive(p) for p in pids), rt.service_exits
    finally:
        rt.close()


def test_interrupted_children_are_process_group_leaders() -> None:
    """A Ctrl-C in a terminal signals the foreground process group: the stack's children
    sit in their own groups, so only the driver decides when they stop."""
    with UndoBenchEnv("payments") as env:
        env.reset(seed=1)
        rt: Any = env.runtime
        pids = rt.process_pids()  # the service's fork server and its server process too
        leaders = [c.proc.pid for c in (rt._service, rt._proxy)]
        assert all(os.getpgid(p) == p for p in leaders)
        assert {os.getpgid(p) for p in pids} == set(leaders)
        assert all(os.getpgid(p) != os.getpgid(0) for p in pids)
    assert not wait_gone(pids, timeout=10)


@pytest.mark.slow
@pytest.mark.docker
def test_docker_sweep_survives_random_container_kills(
    trials: list[TrialSpec],
    baseline: Any,
    tmp_path: Path,
    figures: Figures,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same sweep on the docker runtime, with the main process of a random service or
    proxy container SIGKILLed every few seconds (an unplanned exit: the runtime restarts the
    container and the env voids the episode, so the pair is retried)."""
    from undobench_gym.core.runtime.docker import DockerRuntime

    from .soak import docker_counts

    started: list[DockerRuntime] = []
    original = DockerRuntime.start

    def spy(self: DockerRuntime) -> Any:
        started.append(self)  # only records which stacks this sweep made
        return original(self)

    monkeypatch.setattr(DockerRuntime, "start", spy)
    stop = threading.Event()
    kills: list[str] = []

    def chaos() -> None:
        rng = random.Random(11)
        # At most six kills, which keeps the sweep's retries (and its time) bounded. The
        # first comes soon after a stack is up: on a fast machine the whole sweep takes
        # about 14 s, and a first wait of up to 6 s could miss it (stop 29's serial run).
        while len(kills) < 6 and not stop.wait(
            rng.uniform(0.5, 1.5) if not kills else rng.uniform(3.0, 6.0)
        ):
            live = [rt for rt in started if rt._endpoints is not None and not rt._closed]
            if not live:
                continue
            rt = rng.choice(live)
            role = rng.choice(["service", "proxy"])
            with contextlib.suppress(Exception):
                container = rt._service if role == "service" else rt._proxy
                container.reload()
                pid = int(container.attrs["State"]["Pid"])
                if pid and kill(pid):
                    kills.append(role)

    chosen = [t for t in trials if t.workflow.domain == "payments"]
    thread = threading.Thread(target=chaos, daemon=True)
    thread.start()
    t0 = time.monotonic()
    try:
        run_sweep(chosen, agent_spec="scripted", runtime="docker", out=tmp_path, progress=False)
    finally:
        stop.set()
        thread.join(10)
    records = read_trials(tmp_path / "trials.jsonl")
    check_exactly_once(chosen, records)
    assert kills, "no container was killed"
    left = {rt.stack_id: docker_counts(rt.stack_id) for rt in started}
    assert not any(any(c.values()) for c in left.values()), left
    changed = silent_changes(baseline, records)
    figures.add(
        "harness_faults",
        "random_kills_docker",
        {
            "trials": len(records),
            "kills": len(kills),
            "service_kills": kills.count("service"),
            "proxy_kills": kills.count("proxy"),
            "stacks": len(started),
            "infrastructure_errors": sum(errored(r) for r in records),
            "retried": sum(r.get("attempts", 1) > 1 for r in records),
            "silently_changed": len(changed),
            "objects_left": 0,
            "lost": 0,
            "seconds": round(time.monotonic() - t0, 1),
        },
    )
    assert not changed, f"changed without an infrastructure error: {changed}"


@pytest.mark.slow
@pytest.mark.docker
def test_docker_crash_restarts_do_not_slow_down() -> None:
    """The engine's on-failure policy doubles its delay for a container that ran under
    10 s (1.3, 1.4, 1.6, 2.0, 2.8, 4.4 s, then 7.6, 14 s, ... until wait_healthy timed
    out): the runtime restarts exited containers itself, at once."""
    env = UndoBenchEnv("payments", runtime="docker")
    try:
        env.reset(seed=1)
        restarts = env.runtime.restarts
        times = []
        for seed in range(1, 7):
            t0 = time.monotonic()
            ep = run_episode(
                env,
                ScriptedAgent(),
                seed=seed,
                workflow="pay-split-payout",
                fault="crash-mid-batch",
            )
            env.runtime.wait_healthy(probe=True)
            times.append(time.monotonic() - t0)
            assert ep["fault_fired"]
        assert times[-1] < 2 * times[0] + 1.0, [round(t, 2) for t in times]
        assert env.runtime.restarts == restarts + 6
        assert env.runtime.unplanned_exits == 0  # exit code 75 each time: all planned
    finally:
        env.close()
