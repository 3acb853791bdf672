"""Lanes: several pairs in flight in one worker process, each on its own stacks, with time
limits that work off the main thread and a kill that costs the other lanes no attempt.

The agents are loaded by spec (`python:tests.test_lanes:NAME`) inside the worker
processes, as a user's agent would be.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from undobench_gym.agents.scripted import ScriptedAgent
from undobench_gym.contract.errors import UndoBenchError
from undobench_gym.core.deadline import AgentOverTime, agent_time_limit, time_limit
from undobench_gym.core.trials import read_trials
from undobench_gym.harness.executors import DEFAULT_LANES, make_executor
from undobench_gym.harness.executors.base import TIMEOUT
from undobench_gym.harness.runner import expand, run_sweep
from undobench_gym.harness.sweep import Execution

HERE = "python:tests.test_lanes:"


class Outer(BaseException):
    pass


def _in_thread(fn: Any) -> dict[str, Any]:
    got: dict[str, Any] = {}
    t = threading.Thread(target=lambda: got.update(fn()))
    t.start()
    t.join(10)
    assert not t.is_alive()
    return got


# ---- time limits off the main thread ----------------------------------------------------


def test_a_limit_stops_python_code_in_a_thread_and_leaves_nothing_pending() -> None:
    def body() -> dict[str, Any]:
        t0 = time.monotonic()
        try:
            with agent_time_limit(0.2):
                while True:
                    time.sleep(0.005)
        except AgentOverTime as exc:
            stopped = (time.monotonic() - t0, str(exc))
        # A limit that ends in time leaves no exception behind to land later.
        with agent_time_limit(0.05):
            pass
        time.sleep(0.15)
        return {"stopped": stopped, "after": "clean"}

    got = _in_thread(body)
    assert 0.2 <= got["stopped"][0] < 1.0
    assert got["stopped"][1] == "the agent took over 0.2s"
    assert got["after"] == "clean"


def test_an_outer_limit_still_fires_after_an_inner_one_did() -> None:
    def body() -> dict[str, Any]:
        out: dict[str, Any] = {}
        try:
            with time_limit(0.4, Outer, "trial over"):
                try:
                    with agent_time_limit(0.1):
                        while True:
                            time.sleep(0.005)
                except AgentOverTime:
                    out["inner"] = True
                while True:
                    time.sleep(0.005)
        except Outer as exc:
            out["outer"] = str(exc)
        return out

    assert _in_thread(body) == {"inner": True, "outer": "trial over"}


def test_a_call_blocked_in_c_ends_when_it_returns() -> None:
    """What a lane cannot do (documented): break a blocking call. The limit still holds
    once the call returns, so the episode ends truncated, not later."""

    def body() -> dict[str, Any]:
        t0 = time.monotonic()
        try:
            with agent_time_limit(0.05):
                time.sleep(0.3)
        except AgentOverTime:
            return {"after": time.monotonic() - t0}
        return {}

    assert _in_thread(body)["after"] >= 0.3


# ---- defaults and errors -----------------------------------------------------------------


def test_lanes_are_one_by_default_and_local_only() -> None:
    assert DEFAULT_LANES == 1  # measured: lanes slow a CPU-bound scripted sweep down
    with pytest.raises(UndoBenchError, match="more workers"):
        make_executor("ray", 2, trial_timeout=None, lanes=2)
    with pytest.raises(ValueError):
        Execution.model_validate({"lanes": 0})


# ---- sweeps ------------------------------------------------------------------------------


class SpinsForever(ScriptedAgent):
    """Hangs in Python code (a busy agent loop): a lane's limit can reach it."""

    name = "spins"

    def act(self, observation: str) -> dict[str, Any]:
        while True:
            time.sleep(0.01)


class BlocksInCTwice(ScriptedAgent):
    """The first two acts of the whole test (each claims a marker file) block in C for a
    minute, where no lane's limit reaches; later ones follow the plan."""

    name = "blocks-in-c"

    def act(self, observation: str) -> dict[str, Any]:
        base = os.environ["UNDOBENCH_TEST_MARKER"]
        for n in (1, 2):
            try:
                os.close(os.open(f"{base}.{n}", os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                continue
            time.sleep(60)
        return super().act(observation)


def _meta(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "run_meta.json").read_text())
    return data


@pytest.mark.slow
def test_an_agent_spinning_in_a_lane_ends_truncated_and_is_not_retried(tmp_path: Path) -> None:
    trials = expand(["pay-charge-customer", "db-create-order"], ["lost-ack"], ["bare"], [1])
    run_sweep(trials, agent_spec=HERE + "SpinsForever", runtime="process", out=tmp_path,
              progress=False, report=False, workers=1, lanes=2, trial_timeout=2.0)  # fmt: skip
    got = read_trials(tmp_path / "trials.jsonl")
    assert len(got) == 2
    for t in got:
        assert t["attempts"] == 1 and t["infra_errors"] == []
        assert all(t[s]["truncated_reason"] == "time_limit" for s in ("control", "fault"))
    session = _meta(tmp_path)["sessions"][0]
    assert (session["workers"], session["lanes"]) == (1, 2)


@pytest.mark.slow
def test_a_lane_killed_beside_a_hung_one_is_rerun_without_using_an_attempt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The driver's hard timeout counts from the hand-over, stack start included: the
    grace leaves room for the new worker's two stacks to start, and the trial timeout
    for a first pair on a cold stack while the other lane starts its own."""
    monkeypatch.setenv("UNDOBENCH_TEST_MARKER", str(tmp_path / "marker"))
    # Two domains: a lane takes a stack nobody holds, so both lanes run at once.
    trials = expand(["pay-charge-customer", "db-create-order"], ["lost-ack"], ["bare"], [1])
    t0 = time.monotonic()
    run_sweep(trials, agent_spec=HERE + "BlocksInCTwice", runtime="process",
              out=tmp_path / "run", progress=False, report=False, workers=1, lanes=2,
              trial_timeout=3.0, hard_timeout_grace=5.0)  # fmt: skip
    got = sorted(read_trials(tmp_path / "run" / "trials.jsonl"), key=lambda t: t["attempts"])
    assert time.monotonic() - t0 < 50  # not the agents' 60 s sleeps
    assert [t["attempts"] for t in got] == [1, 2]
    bystander, culprit = got
    assert bystander["infra_errors"] == []  # killed with the worker, at no attempt's cost
    assert [f["kind"] for f in culprit["infra_errors"]] == [TIMEOUT]
    assert "worker killed" in culprit["infra_errors"][0]["error"]
    assert all(t["control"]["success"] and t["control"]["error"] is None for t in got)
