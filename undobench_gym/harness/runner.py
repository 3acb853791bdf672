"""Run a sweep of paired trials and write trials.jsonl, run_meta.json and summary.json.

The driver expands the factorial into pairs with stable ids, hands them to an executor
(in-process, local worker processes, or Ray actors), applies one retry policy to every
pair (infrastructure errors only), and alone appends to trials.jsonl (flushed and fsynced
per line), so a driver killed at any moment loses at most the pairs in flight and
`resume=True` runs exactly those again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from undobench_gym.agents.factory import make_agent as build_agent
from undobench_gym.agents.llm.model_server import local_agents
from undobench_gym.contract.errors import UndoBenchError
from undobench_gym.contract.specs import FaultScenario, WorkflowSpec
from undobench_gym.core.catalog import find_workflow
from undobench_gym.core.extras import require
from undobench_gym.core.pairing import Agent, pair_id
from undobench_gym.core.records import error_episode
from undobench_gym.core.runtime.warm import turned_off
from undobench_gym.core.trials import TrialWriter, read_trials
from undobench_gym.harness.executors import (
    DEFAULT_LANES,
    DEFAULT_MAX_STACKS,
    RetryPolicy,
    TrialTask,
    make_executor,
)
from undobench_gym.harness.executors.base import (
    DEFAULT_HTTP_TIMEOUT_S,
    INTERRUPTED,
    PROVIDER,
    USAGE,
    Executor,
    Outcome,
    StackKey,
)
from undobench_gym.harness.executors.meta import RunMeta, progress_bar
from undobench_gym.harness.executors.schedule import Scheduler
from undobench_gym.harness.executors.timeline import Timeline, cpu_seconds

DEFAULT_TRIAL_TIMEOUT_S = 300.0
#: Attempts the model server fails in a row (each after the agent's own retries) before the
#: sweep stops: past that it is down, and every further pair would only record the outage.
MAX_PROVIDER_STREAK = 5


@dataclass(frozen=True)
class TrialSpec:
    """One pair of the factorial. `agent`/`framework` None: the sweep's default agent."""

    workflow: WorkflowSpec
    scenario: FaultScenario
    method: str
    seed: int
    agent: str | None = None
    framework: str | None = None

    def pair_id(self, agent: str) -> str:
        return pair_id(self.workflow.id, self.scenario.id, self.method, self.seed, agent)


def parse_seeds(text: str) -> list[int]:
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            if sep:
                a, b = int(lo), int(hi)
                if b < a:
                    raise ValueError
                seeds.extend(range(a, b + 1))
            else:
                seeds.append(int(part))
        except ValueError:
            raise UndoBenchError(f"bad seed range {part!r}: use e.g. 1-20 or 1,2,5") from None
    if not seeds:
        raise UndoBenchError("no seeds given")
    return sorted(set(seeds))


def expand(
    workflows: list[str],
    scenarios: list[str] | None,
    methods: list[str],
    seeds: list[int],
    agents: list[tuple[str | None, str | None]] | None = None,
    boundaries: list[str] | None = None,
) -> list[TrialSpec]:
    """The deterministic trial list: workflow x scenario x method x seed (x agent, framework),
    in that order. `boundaries` keeps the scenarios at those fault boundaries (scenario ids
    differ between workflows; boundaries are the paper's factor)."""
    out = []
    for wid in workflows:
        wf = find_workflow(wid)
        chosen = wf.scenarios if not scenarios else [s for s in wf.scenarios if s.id in scenarios]
        if boundaries:
            chosen = [s for s in chosen if s.boundary.value in boundaries]
        if (scenarios or boundaries) and not chosen:
            wanted = ", ".join([*(scenarios or []), *(boundaries or [])])
            raise UndoBenchError(
                f"workflow {wid} has no scenario matching {wanted}; it has "
                + ", ".join(f"{s.id} ({s.boundary.value})" for s in wf.scenarios)
            )
        for sc in chosen:
            for m in methods:
                for s in seeds:
                    for agent, framework in agents or [(None, None)]:
                        out.append(TrialSpec(wf, sc, m, s, agent, framework))
    return out


def make_agent(spec: str, framework: str | None = None) -> Agent:
    """The factory's agent, typed as what the pairing drives."""
    agent: Agent = build_agent(spec, framework=framework)
    return agent


def _error_record(t: TrialTask, agent: str, meta: dict[str, Any], message: str) -> dict[str, Any]:
    wf = find_workflow(t.workflow)
    sc = wf.scenario(t.scenario)
    return {
        "pair_id": t.pair_id,
        "workflow": wf.id,
        "domain": wf.domain,
        "split": wf.split,
        "kind": wf.kind,
        "seed": t.seed,
        "method": t.method,
        "agent": agent,
        "model": meta.get("model"),
        "framework": meta.get("framework"),
        "runtime": t.runtime,
        "scenario": sc.id,
        "boundary": sc.boundary.value,
        "ambiguous": sc.ambiguous,
        "prefix_equivalent": None,
        "control": error_episode(message),
        "fault": error_episode(message),
    }


def build_tasks(
    trials: list[TrialSpec],
    *,
    agent_spec: str,
    framework: str | None,
    runtime: str,
    max_steps: int,
    http_timeout: float = DEFAULT_HTTP_TIMEOUT_S,
    share_controls: bool = True,
) -> tuple[list[TrialTask], dict[str, dict[str, Any]]]:
    """Pairs as executor tasks, plus each pair's agent name/model/framework. Builds every
    agent once here, so a bad agent spec fails before any stack starts. With
    `share_controls`, the pairs of an agent that declares itself `deterministic` (the
    scripted agent) or `seeded_controls` (a model agent whose turns are seeded by the task
    instance) share one control episode per workflow, method and seed (`pairing.run_pair`)."""
    agents: dict[tuple[str, str | None], dict[str, Any]] = {}
    tasks: list[TrialTask] = []
    info: dict[str, dict[str, Any]] = {}
    for t in trials:
        spec, fw = t.agent or agent_spec, t.framework or framework
        if (spec, fw) not in agents:
            a = make_agent(spec, fw)
            agents[spec, fw] = {
                "name": a.name,
                "model": getattr(a, "model", None),
                "framework": fw or getattr(a, "framework", None),
                "deterministic": getattr(a, "deterministic", False) is True,
                "shares_controls": getattr(a, "deterministic", False) is True
                or getattr(a, "seeded_controls", False) is True,
            }
        meta = agents[spec, fw]
        pid = t.pair_id(meta["name"])
        if pid in info:
            raise UndoBenchError(
                f"two trials share the pair id {pid} ({t.workflow.id}, {t.scenario.id}, "
                f"{t.method}, seed {t.seed}, agent {meta['name']!r}): agents in one sweep "
                "need distinct names"
            )
        info[pid] = meta
        wf, sc = t.workflow, t.scenario
        tasks.append(
            TrialTask(
                pid,
                wf.id,
                wf.domain,
                sc.id,
                t.method,
                t.seed,
                spec,
                fw,
                runtime,
                max_steps,
                http_timeout,
                share_controls and meta["shares_controls"],
            )
        )
    return tasks, info


def run_sweep(
    trials: list[TrialSpec],
    *,
    agent_spec: str,
    runtime: str,
    out: Path,
    resume: bool = False,
    max_steps: int = 20,
    progress: bool = True,
    on_trial: Callable[[dict[str, Any]], None] | None = None,
    framework: str | None = None,
    executor: str | Executor = "local",
    workers: int = 1,
    trial_timeout: float | None = DEFAULT_TRIAL_TIMEOUT_S,
    retry: RetryPolicy | None = None,
    ray_address: str | None = None,
    max_stacks: int = DEFAULT_MAX_STACKS,
    hard_timeout_grace: float | None = None,
    report: bool = True,
    http_timeout: float = DEFAULT_HTTP_TIMEOUT_S,
    share_controls: bool = True,
    lanes: int | None = None,
) -> dict[str, Any]:
    """Run `trials` (skipping recorded pairs when `resume`) and return the summary; with
    `report=False` only record the trials (no `eval` extra needed) and return {}.
    `share_controls=False` makes every pair run its own control episode, even for a
    deterministic agent (whose pairs otherwise share it: `build_tasks`).

    `executor` is "local" (one worker in this process; `workers` > 1 spawns processes) or
    "ray", or a ready `Executor` to reuse across sweeps (then `workers`, `lanes`,
    `trial_timeout`, `max_stacks` and `ray_address` are its own, and it is left open).
    `lanes`: pairs in flight per local worker process (None: `DEFAULT_LANES`)."""
    retry = retry or RetryPolicy()
    if report:
        require("eval", "the sweep's reports", hint=", or record trials only (--no-report)")
    trials_path = out / "trials.jsonl"
    if trials_path.exists() and trials_path.stat().st_size and not resume:
        raise UndoBenchError(
            f"{trials_path} already has trials: pass --resume to continue it, "
            "or choose another --out"
        )
    # `local:MODEL` agents: a model server the sweep owns, for as long as the sweep runs,
    # with a slot for every episode in flight (workers x lanes).
    in_flight = workers * (lanes or DEFAULT_LANES) if isinstance(executor, str) else executor.slots
    with local_agents({t.agent or agent_spec for t in trials}, parallel=in_flight) as served:
        agent_spec = served.get(agent_spec, agent_spec)
        trials = [replace(t, agent=served.get(t.agent, t.agent)) if t.agent else t for t in trials]
        tasks, info = build_tasks(
            trials,
            agent_spec=agent_spec,
            framework=framework,
            runtime=runtime,
            max_steps=max_steps,
            http_timeout=http_timeout,
            share_controls=share_controls,
        )
        with TrialWriter(trials_path) as writer:
            todo = [t for t in tasks if t.pair_id not in writer.done]
            recorded_before = len(writer.done)
            meta = RunMeta(out, retry, trial_timeout=trial_timeout)
            name = executor if isinstance(executor, str) else executor.name
            if isinstance(executor, str):
                lanes = lanes or DEFAULT_LANES
            else:
                lanes = int(getattr(executor, "lanes", 1))
                workers = executor.slots // lanes
            meta.start(
                executor=name,
                workers=workers,
                lanes=lanes,
                planned=len(tasks),
                todo=len(todo),
                http_timeout=http_timeout,
                shared_controls=any(t.share_control for t in tasks),
                model_servers=served.servers,
            )
            written = replaced = 0
            lost_nodes: list[dict[str, Any]] = []
            cpu0 = cpu_seconds()
            timeline: Timeline | None = None
            zygotes: str | None = None
            try:
                if todo:
                    # From before the executor starts: its start-up is the sweep's.
                    timeline = Timeline(len(meta.data["sessions"]) - 1)
                    owned = isinstance(executor, str)
                    ex = (
                        make_executor(
                            executor,
                            workers,
                            trial_timeout=trial_timeout,
                            max_stacks=max_stacks,
                            ray_address=ray_address,
                            grace=hard_timeout_grace,
                            lanes=lanes,
                        )
                        if isinstance(executor, str)
                        else executor
                    )
                    done = len(tasks) - len(todo)
                    timeline.slots = ex.slots
                    # Where the stacks were forked from (`core.runtime.warm`): the driver's
                    # zygotes, each worker's own, or nowhere (every start cold).
                    zygotes = "off" if turned_off() else "own"
                    zygotes = "shared" if getattr(ex, "zygotes", None) is not None else zygotes
                    try:
                        with progress_bar(progress, total=len(tasks), done=done) as bar:
                            written = _drive(ex, todo, writer, retry, info, bar, on_trial, timeline)
                    finally:
                        replaced = int(getattr(ex, "replaced", 0))
                        record_losses = getattr(ex, "node_losses_record", None)  # Ray's
                        lost_nodes = record_losses() if callable(record_losses) else []
                        if owned:
                            ex.close()
            finally:
                recorded = read_trials(trials_path)  # the report reuses them (1.5 s to read)
                # A session stopped by a signal never returns from `_drive`: count its pairs
                # from the file, so that run_meta says what it wrote.
                written = max(written, len(recorded) - recorded_before)
                usage: dict[str, Any] = {}
                if timeline is not None:
                    timeline.write(out)
                    # The workers and their services were reaped at close: their CPU is in.
                    usage = {"phases": timeline.phases(), "cpu_s": cpu_seconds() - cpu0}
                    usage["zygotes"] = zygotes
                meta.finish(
                    written=written,
                    replaced=replaced,
                    trials=recorded,
                    node_losses=lost_nodes,
                    **usage,
                )
    if not report:
        return {}
    from undobench_gym.evaluation.report import write_reports  # the eval extra: checked above

    summary: dict[str, Any] = write_reports(out, trials=recorded)
    return summary


def _drive(
    ex: Executor,
    todo: list[TrialTask],
    writer: TrialWriter,
    retry: RetryPolicy,
    info: dict[str, dict[str, Any]],
    bar: Any,
    on_trial: Callable[[dict[str, Any]], None] | None,
    timeline: Timeline,
) -> int:
    """Keep every slot busy; record each outcome, or requeue it under the retry policy."""
    queue = Scheduler(todo)
    by_id = {t.pair_id: t for t in todo}
    running: dict[int, StackKey] = {}
    seen: set[str] = set()  # workers that have finished a pair (their first start was cold)
    failures: dict[str, list[dict[str, Any]]] = {}
    written = retries = provider_streak = 0
    # Pairs the model server failed are written last: if it turns out to be down and the
    # sweep stops, they are not in trials.jsonl, so --resume runs them again.
    deferred: list[dict[str, Any]] = []
    while len(queue) or running:
        for slot in ex.idle():
            # The stack each other slot is on: the one it runs, else its most recent one.
            others: Counter[StackKey] = Counter()
            for s in range(ex.slots):
                held = ex.held(s)
                on = running.get(s) or (held[-1] if held else None)
                if s != slot and on is not None:
                    others[on] += 1
            task = queue.pop_for(ex.held(slot), others, slot)
            if task is None:
                continue  # another slot may still have its control group's pairs kept
            attempt = len(failures.get(task.pair_id, ())) + 1
            timeline.submitted(slot, task)
            ex.submit(slot, task, attempt)
            running[slot] = task.stack_key
        outcomes = ex.wait(timeout=0.5)
        busy = set(range(ex.slots)) - set(ex.idle())
        running = {s: k for s, k in running.items() if s in busy}
        for out in outcomes:
            timeline.done(out)
            if out.error_kind is None:
                queue.observe(out.pair_id, out.wall_s, out.stack_s, first=out.worker not in seen)
            seen.add(out.worker)
            task = by_id[out.pair_id]
            if out.error_kind == USAGE:
                raise UndoBenchError(f"{task.workflow}/{task.scenario}: {out.error}")
            provider_streak = provider_streak + 1 if out.error_kind == PROVIDER else 0
            if provider_streak >= MAX_PROVIDER_STREAK:
                raise UndoBenchError(
                    f"the model provider failed {provider_streak} attempts in a row "
                    f"(last: {out.error}). Recorded pairs are kept; fix the server, then "
                    "run the same command with --resume"
                )
            if out.error_kind == INTERRUPTED:  # killed beside another lane's pair
                queue.push_front(task)
                continue
            if out.error_kind is not None:
                failures.setdefault(task.pair_id, []).append(
                    {"attempt": out.attempt, "kind": out.error_kind, "error": out.error}
                )
                if retry.should_retry(out.error_kind, out.attempt):
                    retries += 1
                    queue.push_front(task)
                    bar.note(retries=retries)
                    continue
            record = _finalize(out, task, info[task.pair_id], failures.get(task.pair_id, []))
            if out.error_kind == PROVIDER:
                deferred.append(record)
                continue
            _write(record, writer, bar, on_trial)
            written += 1
    for record in deferred:
        _write(record, writer, bar, on_trial)
        written += 1
    return written


def _write(
    record: dict[str, Any],
    writer: TrialWriter,
    bar: Any,
    on_trial: Callable[[dict[str, Any]], None] | None,
) -> None:
    writer.write(record)
    if on_trial:
        on_trial(record)
    bar.advance(infra=record["control"]["error"] is not None)


def _finalize(
    out: Outcome, task: TrialTask, meta: dict[str, Any], failures: list[dict[str, Any]]
) -> dict[str, Any]:
    if out.record is not None:
        record = out.record
    else:
        message = f"{out.error_kind}: {out.error}"
        record = _error_record(task, meta["name"], meta, message)
    record["attempts"] = out.attempt
    record["infra_errors"] = failures
    record.setdefault("agent_exceptions", 0)
    return record
