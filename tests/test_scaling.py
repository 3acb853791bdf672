"""Scaling: the phases a sweep records, the longest-first schedule with work stealing, and
the schedule simulator (exact on a made-up run, close on a real one)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from undobench_gym.harness.executors.base import TrialTask
from undobench_gym.harness.executors.schedule import STACK_START_S, Scheduler, pair_cost
from undobench_gym.harness.executors.timeline import TIMELINE_FILE, read_timeline
from undobench_gym.harness.runner import expand, run_sweep
from undobench_gym.harness.simulate import RunModel, calibrated, model_from_run, simulate


def _task(pair: str, workflow: str, domain: str, scenario: str = "s") -> TrialTask:
    return TrialTask(pair, workflow, domain, scenario, "bare", 1, "scripted", None, "process", 20)


def test_longest_stacks_and_crash_pairs_go_first() -> None:
    tasks = [_task("db", "db-create-order", "database", "lost-ack")]
    tasks += [_task("git", "git-update-config", "git", "lost-ack")]
    tasks += [_task("pay", "pay-split-payout", "payments", "lost-ack")]
    tasks += [_task("pay-crash", "pay-split-payout", "payments", "crash-mid-batch")]
    assert pair_cost(tasks[-1]) > pair_cost(tasks[-2])  # a crash restarts a service
    q = Scheduler(tasks)
    assert q.pop_for([], set()).pair_id == "git"  # type: ignore[union-attr]
    assert q.pop_for([], set()).pair_id == "pay-crash"  # type: ignore[union-attr]


def test_a_worker_joins_a_stack_only_when_its_work_ends_sooner_for_it() -> None:
    one_s = {f"p{n}": 1.0 for n in range(10)}
    tasks = [_task(p, "wf", "payments") for p in one_s]
    q = Scheduler(tasks, cost=lambda t: one_s[t.pair_id])
    key = tasks[0].stack_key
    assert q.pop_for([], set(), 0) is not None  # 9 s left
    # 9 s left, one worker on it: 9 s alone, (9 + 2)/2 s with a second one.
    assert q.pop_for([], {key: 1}, 1) is not None
    while q.remaining[key] / 2 >= STACK_START_S:
        q.pop_for([key], {key: 2}, 0)
    # Under 2 s each for the two on it: they finish before a new stack would start.
    assert q.pop_for([], {key: 2}, 2) is None
    assert q.remaining[key] >= STACK_START_S  # one alone would take longer than a start:
    assert q.pop_for([], {key: 1}, 2) is not None  # a second one joins
    assert q.pop_for([], {}, 3) is not None  # nobody else on it: take it


def test_a_workers_first_stack_start_is_not_what_joining_costs() -> None:
    q = Scheduler([_task("p0", "wf", "payments")])
    q.observe("p0", 3.0, 2.5, first=True)  # new interpreters, before the zygotes
    assert q.stack_start_s == STACK_START_S
    q.observe("p0", 1.0, 0.4)
    assert q.stack_start_s == 0.4


def _model(pairs: int, work: float, stack: float, u: float = 1.0) -> RunModel:
    tasks = [_task(f"p{n}", "wf", "payments") for n in range(pairs)]
    return RunModel(
        tasks=tasks,
        work_s={t.pair_id: work for t in tasks},
        stack_s={"payments": stack},
        spawn_s=1.0,
        handoff_s=0.0,
        u=u,
    )


def test_the_simulator_adds_up_stack_starts_work_and_contention() -> None:
    m = _model(8, 1.0, 2.0)
    assert simulate(m, 1, 4)["wall_s"] == 10.0  # in the driver: stack 2, 8 pairs of 1
    two = simulate(m, 2, 4)  # both start (1 + 2), then 4 pairs each
    assert two["wall_s"] == 7.0 and two["stacks_started"] == 2
    # Two workers on one core, each busy worker using a whole one: no faster than one.
    shared = simulate(m, 2, 1)
    assert shared["contention"] == 2.0
    assert shared["wall_s"] >= simulate(m, 1, 1)["wall_s"]


def test_a_worker_process_and_the_driver_pay_their_own_first_stack_start() -> None:
    m = dataclasses.replace(_model(8, 1.0, 0.5), first_stack_s=1.5, driver_first_stack_s=3.0)
    assert simulate(m, 1, 4)["wall_s"] == 11.0  # in the driver: new interpreters, 3
    # worker processes: spawned (1), their first stack forked from the driver's zygotes
    assert simulate(m, 2, 4)["wall_s"] == 6.5  # 1 + 1.5, then 4 pairs each
    assert simulate(dataclasses.replace(m, driver_first_stack_s=None), 1, 4)["wall_s"] == 9.5


def test_a_sweep_records_its_phases_and_the_simulator_replays_it(tmp_path: Path) -> None:
    trials = expand(["pay-charge-customer", "db-transfer-funds"], None, ["bare", "B0"], [1])
    run_sweep(trials, agent_spec="scripted", runtime="process", out=tmp_path, progress=False,
              report=False, workers=2)  # fmt: skip
    session = json.loads((tmp_path / "run_meta.json").read_text())["sessions"][-1]
    ph = session["phases"]
    assert ph["slots"] == 2 and sum(w["pairs"] for w in ph["workers"]) == len(trials)
    assert 0 < ph["startup_s"] <= ph["wall_s"]
    assert ph["startup_s"] + ph["steady_s"] + ph["tail_s"] == pytest.approx(ph["wall_s"], abs=0.05)
    assert session["cpu_s"] > 0 and session["cores_busy"] > 0
    attempts = read_timeline(tmp_path)
    assert len(attempts) == len(trials) == len((tmp_path / TIMELINE_FILE).read_text().splitlines())
    assert {a.pair_id for a in attempts} == {
        json.loads(line)["pair_id"] for line in (tmp_path / "trials.jsonl").open()
    }
    model = model_from_run(tmp_path, cores=2)
    # each worker started one stack, its first, forked from the driver's zygotes
    assert model.stack_s == {} and model.first_stack_s and model.u > 0
    assert model.driver_first_stack_s is None  # no worker ran in the driver
    predicted = simulate(model, 2, 2)["wall_s"]
    assert predicted == pytest.approx(ph["wall_s"], rel=0.5)
    # Calibrated on one worker's run of the same pairs: the cores that run really gave.
    alone = tmp_path / "alone"
    run_sweep(trials, agent_spec="scripted", runtime="process", out=alone, progress=False,
              report=False, workers=1)  # fmt: skip
    tuned = calibrated(tmp_path, alone, cores=2)
    assert tuned.effective_cores is not None and 0 < tuned.effective_cores <= 2
    assert tuned.driver_first_stack_s == model_from_run(alone, cores=2).first_stack_s
    one = json.loads((alone / "run_meta.json").read_text())["sessions"][-1]["phases"]
    assert simulate(tuned, 1)["wall_s"] == pytest.approx(one["wall_s"], rel=0.5)
