"""A worker's first stack started while it loads (`executors/prestart.py`): the pair runs on
the very stack that was started early, a start that fails early costs nothing but the
time (the pool starts its own, and records its error if that fails too), and nothing is
left running whichever way the worker ends."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from undobench_gym.contract.errors import StackStartError
from undobench_gym.core.env import UndoBenchEnv
from undobench_gym.core.runtime import make_runtime
from undobench_gym.core.runtime.process import ProcessRuntime
from undobench_gym.harness.executors import prestart
from undobench_gym.harness.executors.base import TrialTask
from undobench_gym.harness.executors.prestart import Prestart
from undobench_gym.harness.executors.worker import TrialWorker
from undobench_gym.harness.runner import build_tasks, expand

WORKFLOW = "pay-split-payout"
EPISODES = ("control", "fault")


def task(scenario: str = "lost-ack") -> TrialTask:
    trials = expand([WORKFLOW], [scenario], ["bare"], [1])
    [t], _ = build_tasks(
        trials, agent_spec="scripted", framework=None, runtime="process", max_steps=20
    )
    return t


def alive(pids: list[int]) -> list[int]:
    """Those of `pids` still running (a zombie is not)."""
    out = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            out.append(pid)
    return out


class FailsToStart(ProcessRuntime):
    """A stack whose start fails, as one whose ports were taken or whose service crashed on
    import would."""

    def start(self):  # type: ignore[no-untyped-def]
        raise StackStartError("the service exited with 1 (a test's stand-in)")


def test_the_first_pair_runs_on_the_stack_started_early() -> None:
    runtime = make_runtime("process", "payments")
    worker = TrialWorker("w", max_stacks=2, trial_timeout=120)
    try:
        worker.hold("process", Prestart(runtime))
        out = worker.run(task(), attempt=1)
        assert out.error is None and out.record is not None
        assert out.prestarted and out.prestart_s > 0 and out.stack_s <= out.wall_s
        assert out.record["control"]["success"] and out.record["fault"]["fault_fired"]
        [env] = [env for pool in worker.pools.values() for env in pool.envs.values()]
        assert env.runtime is runtime, "the pair started a stack of its own"
        assert not worker.prestarts
        pids = runtime.process_pids()
    finally:
        worker.close()
    assert not alive(pids), f"stack processes survived: {alive(pids)}"


def test_a_stack_that_failed_to_start_early_is_started_again_by_the_pool() -> None:
    early = FailsToStart("payments")
    worker = TrialWorker("w", max_stacks=2, trial_timeout=120)
    try:
        worker.hold("process", Prestart(early))
        out = worker.run(task(), attempt=1)
        assert out.error is None, out.error
        assert not out.prestarted and out.stack_s > 0
        [env] = [env for pool in worker.pools.values() for env in pool.envs.values()]
        assert env.runtime is not early
    finally:
        worker.close()


def test_an_unused_early_stack_is_closed_with_the_worker() -> None:
    runtime = make_runtime("process", "storage")
    worker = TrialWorker("w", max_stacks=2, trial_timeout=120)
    worker.hold("process", Prestart(runtime))
    worker.prestarts[("process", "storage")].thread.join()
    pids = runtime.process_pids()
    assert pids, "the early stack did not start"
    worker.close()
    assert not alive(pids), f"stack processes survived: {alive(pids)}"


def test_an_env_adopts_only_a_stack_of_its_own_domain() -> None:
    env = UndoBenchEnv("payments")
    try:
        with pytest.raises(ValueError, match="storage stack for a payments env"):
            env.adopt_runtime(make_runtime("process", "storage"))
    finally:
        env.close()


class NeverStarts(ProcessRuntime):
    """A start that never ends: what a start thread waiting on an import lock that an
    interrupted main thread left held looks like from outside."""

    release = threading.Event()

    def start(self):  # type: ignore[no-untyped-def]
        self.release.wait()
        raise StackStartError("released")


def test_closing_does_not_wait_forever_for_a_start_that_hangs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(prestart, "CLOSE_JOIN_S", 0.5)
    worker = TrialWorker("w", max_stacks=2, trial_timeout=120)
    waiting = Prestart(NeverStarts("payments"))
    worker.hold("process", waiting)
    try:
        t0 = time.monotonic()
        worker.close()
        assert time.monotonic() - t0 < 5, "close() waited for the hung start"
        assert waiting.thread.is_alive()
    finally:
        NeverStarts.release.set()
        waiting.thread.join(5)
