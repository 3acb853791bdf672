"""Run a sweep of paired trials on one machine and write trials.jsonl and summary.json."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .catalog import find_workflow
from .env import UndoBenchEnv
from .errors import StackStartError, StackUnhealthyError, UndoBenchError
from .pairing import Agent, pair_id, run_pair
from .specs import FaultScenario, WorkflowSpec
from .trials import TrialWriter, read_trials


@dataclass(frozen=True)
class TrialSpec:
    workflow: WorkflowSpec
    scenario: FaultScenario
    method: str
    seed: int

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
    workflows: list[str], scenarios: list[str] | None, methods: list[str], seeds: list[int]
) -> list[TrialSpec]:
    """The deterministic trial list: workflow x scenario x method x seed, in that order."""
    out = []
    for wid in workflows:
        wf = find_workflow(wid)
        chosen = wf.scenarios if not scenarios else [s for s in wf.scenarios if s.id in scenarios]
        if scenarios and not chosen:
            raise UndoBenchError(
                f"workflow {wid} has none of the scenarios {scenarios}; "
                f"it has {', '.join(s.id for s in wf.scenarios)}"
            )
        for sc in chosen:
            for m in methods:
                for s in seeds:
                    out.append(TrialSpec(wf, sc, m, s))
    return out


def make_agent(spec: str, framework: str | None = None) -> Agent:
    from .agents.factory import make_agent as build

    agent: Agent = build(spec, framework=framework)
    return agent


def _error_episode(message: str) -> dict[str, Any]:
    return {
        "success": False,
        "verdict": None,
        "steps": 0,
        "transcript": [],
        "state_hash": None,
        "effects": {
            "physical": 0,
            "committed": 0,
            "semantic": 0,
            "duplicates": 0,
            "missing": 0,
            "forbidden": 0,
            "reissued_after_commit": 0,
        },
        "fault_fired": None,
        "wall_ms": 0,
        "error": message,
    }


def _error_record(
    t: TrialSpec,
    agent: str,
    runtime: str,
    message: str,
    model: str | None = None,
    framework: str | None = None,
) -> dict[str, Any]:
    return {
        "pair_id": t.pair_id(agent),
        "workflow": t.workflow.id,
        "domain": t.workflow.domain,
        "split": t.workflow.split,
        "kind": t.workflow.kind,
        "seed": t.seed,
        "method": t.method,
        "agent": agent,
        "model": model,
        "framework": framework,
        "runtime": runtime,
        "scenario": t.scenario.id,
        "boundary": t.scenario.boundary.value,
        "ambiguous": t.scenario.ambiguous,
        "prefix_equivalent": None,
        "control": _error_episode(message),
        "fault": _error_episode(message),
    }


class _Envs:
    """One env (one stack) per (domain, server-idempotency mode), replaced when it breaks."""

    def __init__(self, runtime: str, max_steps: int) -> None:
        self.runtime, self.max_steps = runtime, max_steps
        self.envs: dict[tuple[str, str], UndoBenchEnv] = {}

    def get(self, domain: str, idem: str) -> UndoBenchEnv:
        key = (domain, idem)
        if key not in self.envs:
            self.envs[key] = UndoBenchEnv(
                domain, runtime=self.runtime, server_idempotency=idem, max_steps=self.max_steps
            )
        return self.envs[key]

    def discard(self, domain: str, idem: str) -> None:
        env = self.envs.pop((domain, idem), None)
        if env is not None:
            env.close()

    def close(self) -> None:
        for env in self.envs.values():
            env.close()
        self.envs.clear()


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
) -> dict[str, Any]:
    from .agents.methods import server_idempotency_for, wrap
    from .evaluation.report import write_reports

    trials_path = out / "trials.jsonl"
    if trials_path.exists() and trials_path.stat().st_size and not resume:
        raise UndoBenchError(
            f"{trials_path} already has trials: pass --resume to continue it, "
            "or choose another --out"
        )
    agent = make_agent(agent_spec, framework)
    model: str | None = getattr(agent, "model", None)
    framework = framework or getattr(agent, "framework", None)
    envs = _Envs(runtime, max_steps)
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with TrialWriter(trials_path) as writer, Progress(*columns, disable=not progress) as bar:
        todo = [t for t in trials if t.pair_id(agent.name) not in writer.done]
        task = bar.add_task("paired trials", total=len(trials), completed=len(trials) - len(todo))
        try:
            for t in todo:
                idem = server_idempotency_for(t.method)
                record = None
                for attempt in range(2):
                    env = envs.get(t.workflow.domain, idem)
                    try:
                        record = run_pair(
                            wrap(env, t.method),
                            agent,
                            workflow=t.workflow,
                            scenario=t.scenario,
                            seed=t.seed,
                            method=t.method,
                            runtime=runtime,
                            model=model,
                            framework=framework,
                        )
                        break
                    except (StackStartError, StackUnhealthyError) as exc:
                        failure: Exception = exc
                    except UndoBenchError:
                        raise  # a usage error: stop the sweep, it would fail every trial
                    except Exception as exc:
                        failure = exc
                    # An infrastructure failure: replace the stack and retry the pair once.
                    envs.discard(t.workflow.domain, idem)
                    if attempt == 1:
                        record = _error_record(
                            t,
                            agent.name,
                            runtime,
                            f"{type(failure).__name__}: {failure}",
                            model,
                            framework,
                        )
                assert record is not None
                writer.write(record)
                if on_trial:
                    on_trial(record)
                bar.advance(task)
        finally:
            envs.close()
    summary = write_reports(out)
    return summary


def load_summary(out: Path) -> dict[str, Any]:
    from .evaluation.summary import summarize

    return summarize(read_trials(out / "trials.jsonl"))


def dumps(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=False, default=str)
