"""Executors: same verdicts whatever runs the pairs, and one retry policy for everyone.

The agents below misbehave on purpose (sleep past the timeout, block the alarm, kill their
worker, raise); they are loaded by spec (`python:tests.test_executors:NAME`) inside the
worker processes, as a user's agent would be.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from undobench_gym.agents.scripted import ScriptedAgent
from undobench_gym.contract.errors import ProviderUnavailable, UndoBenchError
from undobench_gym.core.trials import read_trials
from undobench_gym.harness.executors import InlineExecutor, RetryPolicy
from undobench_gym.harness.executors.base import (
    HARNESS,
    PROVIDER,
    TIMEOUT,
    USAGE,
    WORKER_DIED,
    TrialTask,
)
from undobench_gym.harness.executors.schedule import Scheduler
from undobench_gym.harness.executors.timeline import read_timeline
from undobench_gym.harness.runner import build_tasks, expand, parse_seeds, run_sweep

HERE = "python:tests.test_executors:"


class SleepsOnThirdEpisode(ScriptedAgent):
    """The gold plan, but the third episode it plays hangs (a stuck model call)."""

    name = "sleeps-once"
    episodes = 0

    def reset(self, plan: list[dict[str, Any]]) -> None:
        type(self).episodes += 1
        super().reset(plan)

    def act(self, observation: str) -> dict[str, Any]:
        if type(self).episodes == 3:
            time.sleep(30)
        return super().act(observation)


class AlwaysHangs(ScriptedAgent):
    name = "always-hangs"

    def act(self, observation: str) -> dict[str, Any]:
        time.sleep(30)
        return super().act(observation)


class BlocksTheAlarm(ScriptedAgent):
    """Hangs where the worker's own alarm cannot reach it: only the driver can end it."""

    name = "blocks-alarm"

    def act(self, observation: str) -> dict[str, Any]:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        time.sleep(60)
        return super().act(observation)


class KillsItsWorkerOnce(ScriptedAgent):
    """Takes its worker process down the first time (marker file), then behaves."""

    name = "kills-worker-once"

    def act(self, observation: str) -> dict[str, Any]:
        marker = Path(os.environ["UNDOBENCH_TEST_MARKER"])
        if not marker.exists():
            marker.write_text("died")
            os._exit(3)
        return super().act(observation)


class Raises(ScriptedAgent):
    name = "raises"

    def act(self, observation: str) -> dict[str, Any]:
        if self.cursor >= 1:
            raise RuntimeError("model endpoint returned garbage")
        return super().act(observation)


class ProviderDown(ScriptedAgent):
    """The gold plan while the model server is up; `ProviderUnavailable` (what the LLM agents
    raise once their own retries run out) while `down` is set, or for the first `fail_next`
    model calls."""

    name = "provider-down"
    down = False
    fail_next = 0

    def act(self, observation: str) -> dict[str, Any]:
        cls = type(self)
        if cls.down or cls.fail_next > 0:
            cls.fail_next = max(0, cls.fail_next - 1)
            raise ProviderUnavailable("provider-down: connection refused after 3 retries")
        return super().act(observation)


@pytest.fixture(scope="module")
def inline() -> Iterator[InlineExecutor]:
    """One in-process worker (and its stacks) for the fast tests; 3 s per pair at most."""
    ex = InlineExecutor(max_stacks=2, trial_timeout=3.0)
    yield ex
    ex.close()


def _sweep(out: Path, agent: str, trials: Any = None, **kw: Any) -> list[dict[str, Any]]:
    trials = trials or expand(["pay-charge-customer"], ["lost-ack"], ["bare"], [1])
    run_sweep(trials, agent_spec=agent, runtime="process", out=out, progress=False, **kw)
    return read_trials(out / "trials.jsonl")


def _meta(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "run_meta.json").read_text())
    return data


def _verdicts(trials: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        t["pair_id"]: [
            (t[s]["success"], t[s]["verdict"], t[s]["state_hash"], t[s]["transcript"])
            for s in ("control", "fault")
        ]
        for t in trials
    }


# ---- policy and scheduling (no stacks) -------------------------------------------------


def test_only_infrastructure_errors_are_retried_and_the_cap_is_the_same_for_all() -> None:
    p = RetryPolicy(max_attempts=2)
    for kind in (TIMEOUT, WORKER_DIED, HARNESS):
        assert p.should_retry(kind, 1) and not p.should_retry(kind, 2)
    assert not p.should_retry(None, 1)  # a finished pair, success or not
    assert not p.should_retry(USAGE, 1)
    with pytest.raises(ValueError, match="only infrastructure errors"):
        RetryPolicy(retry_on=("agent_failure",))
    assert p.describe()["max_attempts"] == 2


def _task(workflow: str, domain: str, method: str, seed: int) -> TrialTask:
    return TrialTask(f"{workflow}-{method}-{seed}", workflow, domain, "s", method, seed,
                     "scripted", None, "process", 20)  # fmt: skip


def test_scheduler_keeps_workers_on_their_stacks() -> None:
    tasks = [_task("pay", "payments", m, s) for m in ("bare", "B2-K") for s in (1, 2)]
    tasks += [_task("db", "database", "bare", s) for s in (1, 2)]
    q = Scheduler(tasks)
    first = q.pop_for([], set())
    assert first is not None and first.stack_key == ("payments", "native")
    # Another worker gets a stack nobody holds, in sweep order.
    second = q.pop_for([], {("payments", "native")})
    assert second is not None and second.stack_key == ("payments", "all")
    again = q.pop_for([("payments", "native")], {("payments", "all")})
    assert again is not None and again.pair_id == "pay-bare-2"
    q.push_front(again)  # a retry keeps its place
    assert q.pop_for([("payments", "native")], set()) == again
    assert len(q) == 3


def _shared(scenario: str, seed: int, method: str = "bare") -> TrialTask:
    return TrialTask(f"wf-{scenario}-{method}-{seed}", "wf", "payments", scenario, method,
                     seed, "scripted", None, "process", 20, share_control=True)  # fmt: skip


def test_scheduler_keeps_a_control_group_on_the_worker_that_ran_its_control() -> None:
    # Sweep order puts seeds innermost; pairs sharing a control come out next to each
    # other, and once slot 0 takes one, slot 1 never gets the rest of that group.
    tasks = [_shared(sc, seed) for sc in ("a", "b", "c") for seed in (1, 2)]
    q = Scheduler(tasks)
    first = q.pop_for([], set(), 0)
    assert first is not None and first.pair_id == "wf-a-bare-1"
    other = q.pop_for([], set(), 1)
    assert other is not None and other.pair_id == "wf-a-bare-2"  # the next group
    assert [q.pop_for([], set(), 0).pair_id for _ in range(2)] == ["wf-b-bare-1", "wf-c-bare-1"]  # type: ignore[union-attr]
    assert q.pop_for([], set(), 0) is None  # slot 1's group is kept for slot 1
    assert len(q) == 2
    assert [q.pop_for([], set(), 1).pair_id for _ in range(2)] == ["wf-b-bare-2", "wf-c-bare-2"]  # type: ignore[union-attr]
    assert len(q) == 0
    # Pairs that do not share (an LLM agent's) keep the sweep's order.
    plain = [_task("pay", "payments", "bare", s) for s in (1, 2)]
    assert Scheduler(plain).pop_for([], set(), 0) == plain[0]


def test_only_an_agent_whose_control_ignores_the_scenario_shares_it() -> None:
    trials = expand(["pay-split-payout"], None, ["bare"], [1])
    tasks, _ = build_tasks(trials, agent_spec="scripted", framework=None, runtime="process",
                           max_steps=20)  # fmt: skip
    assert {t.share_control for t in tasks} == {True} and len(tasks) == 2
    assert len({t.control_key for t in tasks}) == 1
    own, _ = build_tasks(trials, agent_spec="scripted", framework=None, runtime="process",
                         max_steps=20, share_controls=False)  # fmt: skip
    assert {t.control_key for t in own} == {None}
    theirs, _ = build_tasks(trials, agent_spec=HERE + "NotDeclared", framework=None,
                            runtime="process", max_steps=20)  # fmt: skip
    assert {t.share_control for t in theirs} == {False}
    # A model agent's turns are seeded by the task instance, not the scenario: it shares.
    model, _ = build_tasks(trials, agent_spec="openai:m@http://127.0.0.1:9/v1", framework="F1",
                           runtime="process", max_steps=20)  # fmt: skip
    assert {t.share_control for t in model} == {True}
    assert len({t.control_key for t in model}) == 1


class NotDeclared(ScriptedAgent):
    """A user's agent that says nothing about its determinism: it runs its own controls."""

    name = "not-declared"
    deterministic = "yes"  # only `True` counts


# ---- real stacks ---------------------------------------------------------------------------


def test_a_shared_control_is_the_control_the_pair_would_have_run(tmp_path: Path) -> None:
    """The second scenario of a workflow, method and seed reuses the first one's control
    episode, and it is exactly the control it runs itself with --own-controls."""
    trials = expand(["pay-split-payout"], None, ["bare", "B2-K"], [1, 2])
    runs = {}
    for share in (True, False):
        out = tmp_path / str(share)
        run_sweep(trials, agent_spec="scripted", runtime="process", out=out, progress=False,
                  report=False, share_controls=share)  # fmt: skip
        runs[share] = {t["pair_id"]: t for t in read_trials(out / "trials.jsonl")}
    shared, own = runs[True], runs[False]
    assert shared.keys() == own.keys() and len(shared) == 8
    reused = [t for t in shared.values() if "control_from" in t]
    assert len(reused) == 4 and not any("control_from" in t for t in own.values())
    for t in reused:
        ran = shared[t["control_from"]]
        assert (ran["workflow"], ran["method"], ran["seed"]) == (
            t["workflow"],
            t["method"],
            t["seed"],
        )
        assert ran["scenario"] != t["scenario"]
    drop = ("wall_ms",)
    for pid, t in shared.items():
        for side in ("control", "fault"):
            a = {k: v for k, v in t[side].items() if k not in drop}
            b = {k: v for k, v in own[pid][side].items() if k not in drop}
            assert a == b, (pid, side)
        assert t["prefix_equivalent"] == own[pid]["prefix_equivalent"]
    meta = json.loads((tmp_path / "True" / "run_meta.json").read_text())
    assert meta["sessions"][-1]["shared_controls"] is True


def test_agent_exceptions_are_agent_failures_and_never_retried(
    tmp_path: Path, inline: InlineExecutor
) -> None:
    [t] = _sweep(tmp_path, HERE + "Raises", executor=inline)
    assert t["attempts"] == 1 and t["infra_errors"] == [] and t["agent_exceptions"] == 2
    for side in ("control", "fault"):
        assert t[side]["error"] is None and t[side]["success"] is False
        last = t[side]["transcript"][-1]["action"]
        assert last["tool"] == "finish" and "RuntimeError" in last["arguments"]["summary"]
    assert _meta(tmp_path)["counts"]["pairs_with_agent_exceptions"] == 1


def test_a_provider_outage_is_an_infrastructure_error_not_an_agent_failure(
    tmp_path: Path, inline: InlineExecutor
) -> None:
    ProviderDown.down, ProviderDown.fail_next = False, 1
    [t] = _sweep(tmp_path, HERE + "ProviderDown", executor=inline)
    assert t["attempts"] == 2 and [f["kind"] for f in t["infra_errors"]] == [PROVIDER]
    assert t["agent_exceptions"] == 0
    assert t["control"]["success"] and t["control"]["error"] is None
    assert _meta(tmp_path)["counts"]["pairs_with_agent_exceptions"] == 0


def test_a_provider_that_stays_down_stops_the_sweep_and_resume_runs_its_pairs(
    tmp_path: Path, inline: InlineExecutor
) -> None:
    trials = expand(["pay-charge-customer"], ["lost-ack"], ["bare"], [1, 2, 3, 4])
    ProviderDown.down, ProviderDown.fail_next = True, 0
    with pytest.raises(UndoBenchError, match=r"5 attempts in a row.*--resume"):
        _sweep(tmp_path, HERE + "ProviderDown", trials, executor=inline)
    assert read_trials(tmp_path / "trials.jsonl") == []  # no outage recorded as a result
    ProviderDown.down = False
    got = _sweep(tmp_path, HERE + "ProviderDown", trials, executor=inline, resume=True)
    assert sorted(t["seed"] for t in got) == [1, 2, 3, 4]
    assert all(t["attempts"] == 1 and t["control"]["success"] for t in got)


@pytest.mark.slow
def test_a_hung_agent_ends_truncated_and_is_never_retried(
    tmp_path: Path, inline: InlineExecutor
) -> None:
    """An agent too slow for its episode's share of the trial time (a stuck model call) has
    failed: its episode ends truncated and is scored; excluding it would drop exactly the
    long recovery attempts from N."""
    SleepsOnThirdEpisode.episodes = 0
    trials = expand(["pay-charge-customer"], ["lost-ack"], ["bare"], [1, 2])
    got = {t["seed"]: t for t in _sweep(tmp_path / "a", HERE + "SleepsOnThirdEpisode",
                                        trials, executor=inline)}  # fmt: skip
    assert got[1]["attempts"] == 1 and got[1]["infra_errors"] == []
    assert got[2]["attempts"] == 1 and got[2]["infra_errors"] == []
    control = got[2]["control"]
    assert control["error"] is None and not control["success"]
    assert control["truncated"] and control["truncated_reason"] == "time_limit"
    assert got[2]["fault"]["truncated"] is False  # the next episode has its own budget

    [t] = _sweep(tmp_path / "b", HERE + "AlwaysHangs", executor=inline)
    assert t["attempts"] == 1 and t["infra_errors"] == []
    assert all(t[s]["truncated_reason"] == "time_limit" for s in ("control", "fault"))
    assert _meta(tmp_path / "b")["counts"]["infra_error_pairs"] == 0


def test_a_hung_harness_is_an_infrastructure_error_retried_once(
    tmp_path: Path, inline: InlineExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hang outside agent code (here the env's step) is the harness's: the trial alarm
    ends it, the pair is retried on a fresh stack and kept apart from agent failures."""
    from undobench_gym.core.env import UndoBenchEnv

    real_step = UndoBenchEnv.step
    hangs = {"left": 1}

    def step(self: UndoBenchEnv, action: Any) -> Any:
        if hangs["left"]:
            hangs["left"] -= 1
            time.sleep(30)
        return real_step(self, action)

    monkeypatch.setattr(UndoBenchEnv, "step", step)
    [t] = _sweep(tmp_path, "scripted", executor=inline)
    assert t["attempts"] == 2 and [f["kind"] for f in t["infra_errors"]] == [TIMEOUT]
    assert t["control"]["error"] is None and t["control"]["success"]
    counts = _meta(tmp_path)["counts"]
    assert counts["retried_pairs"] == 1 and counts["recovered_by_retry"] == 1


@pytest.mark.slow
def test_one_and_two_workers_give_the_same_verdicts(tmp_path: Path) -> None:
    trials = expand(["pay-charge-customer"], ["lost-ack", "pre-503"], ["bare", "B0"], [1, 2])
    trials += expand(["db-create-order"], ["lost-ack"], ["bare"], parse_seeds("1-2"))
    one = _sweep(tmp_path / "one", "scripted", trials)
    two = _sweep(tmp_path / "two", "scripted", trials, workers=2)
    assert len(one) == len(two) == len(trials)
    assert _verdicts(one) == _verdicts(two)
    assert {t["attempts"] for t in two} == {1}
    assert _meta(tmp_path / "two")["sessions"][0]["workers"] == 2
    # each worker process ran its first pair on the stack it started while loading
    # (executors/prestart.py); the one in-driver worker starts stacks as pairs come
    attempts = read_timeline(tmp_path / "two")
    firsts = {a.worker: a for a in reversed(attempts)}
    assert len(firsts) == 2 and all(a.prestarted for a in firsts.values())
    assert sum(a.prestarted for a in attempts) == 2
    assert not any(a.prestarted for a in read_timeline(tmp_path / "one"))


@pytest.mark.slow
def test_a_worker_that_dies_is_replaced_and_its_pair_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UNDOBENCH_TEST_MARKER", str(tmp_path / "marker"))
    [t] = _sweep(tmp_path / "run", HERE + "KillsItsWorkerOnce", workers=2)
    assert [f["kind"] for f in t["infra_errors"]] == [WORKER_DIED]
    assert "exit code 3" in t["infra_errors"][0]["error"]
    assert t["attempts"] == 2 and t["control"]["success"] and t["control"]["error"] is None


@pytest.mark.slow
def test_a_hung_worker_is_killed_after_the_grace_period(tmp_path: Path) -> None:
    t0 = time.monotonic()
    [t] = _sweep(
        tmp_path, HERE + "BlocksTheAlarm", workers=2, trial_timeout=1.0, hard_timeout_grace=1.0
    )
    assert [f["kind"] for f in t["infra_errors"]] == [TIMEOUT, TIMEOUT]
    assert "worker killed" in t["infra_errors"][0]["error"]
    assert t["control"]["error"].startswith("timeout:")
    assert time.monotonic() - t0 < 60  # not the agent's 60 s sleep, twice


@pytest.mark.slow
def test_local_and_ray_give_the_same_verdicts(tmp_path: Path) -> None:
    if importlib.util.find_spec("ray") is None:
        if os.environ.get("CI"):
            pytest.fail("CI installs the ray extra (make setup): it must be importable")
        pytest.skip("needs the ray extra: pip install 'undobench-gym[ray]'")
    trials = expand(["pay-charge-customer"], ["lost-ack", "ambiguous"], ["bare", "B2"], [1, 2])
    local = _sweep(tmp_path / "local", "scripted", trials)
    ray = _sweep(tmp_path / "ray", "scripted", trials, executor="ray", workers=2)
    assert _verdicts(local) == _verdicts(ray)
    assert _meta(tmp_path / "ray")["sessions"][0]["executor"] == "ray"
