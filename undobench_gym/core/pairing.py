"""Paired counterfactual trials: the same seed twice, once healthy and once with one fault."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

import gymnasium as gym

from undobench_gym.contract.seeding import stable_id
from undobench_gym.contract.specs import FaultScenario, WorkflowSpec
from undobench_gym.core.deadline import AgentOverTime, agent_time_limit


class Agent(Protocol):
    """What the harness drives. A task agent (an LLM, a user's policy) implements
    `reset_task(info)` and sees only what a user would: `info["task"]`, `info["tools"]`,
    `info["observation"]`. A harness agent that follows the gold plan (the scripted
    baseline, the oracle-conformance perturbations) implements `reset(plan)` instead.
    Optional: `checkpoint() -> state` and `restore(state)` for POST_ACK_PRE_CHECKPOINT,
    and `end_episode(last_observation | None)`, called when an episode ends however it
    ends (None: it ended without a last step, e.g. on the time limit)."""

    name: str

    def act(self, observation: str) -> dict[str, Any] | str: ...


def _start(agent: Any, plan: list[dict[str, Any]], info: dict[str, Any], obs: str) -> None:
    if hasattr(agent, "reset_task"):
        agent.reset_task(
            {
                "task": info["task"],
                "tools": info["tools"],
                "observation": obs,
                "task_instance": info["task_instance"],
            }
        )
    else:
        agent.reset(plan)


def _with_agent_view(env: gym.Env[str, str], record: dict[str, Any]) -> dict[str, Any]:
    """Beside the env's wire-level transcript, what the agent itself saw when a recovery
    wrapper answered some of its steps (synthesised or replayed observations)."""
    view = getattr(env, "agent_transcript", None)
    if callable(view):
        record["agent_transcript"] = view()
    return record


def run_episode(
    env: gym.Env[str, str],
    agent: Agent,
    *,
    seed: int,
    workflow: str,
    fault: str | None,
    time_limit: float | None = None,
) -> dict[str, Any]:
    """One episode. Past `time_limit` seconds the episode ends truncated: an agent too
    slow for its budget has failed; that is not an infrastructure error."""
    t0 = time.monotonic()
    obs, reset_info = env.reset(seed=seed, options={"workflow": workflow, "fault": fault})
    initial = obs
    base: Any = env.unwrapped
    plan = base.gold_plan()
    _start(agent, plan, reset_info, obs)
    checkpoint = agent.checkpoint() if hasattr(agent, "checkpoint") else None
    last: str | None = None  # the observation of the step that ended the episode
    try:
        while True:
            left = None if time_limit is None else time_limit - (time.monotonic() - t0)
            try:
                with agent_time_limit(left):
                    action: Any = agent.act(obs)
            except AgentOverTime:
                return _with_agent_view(env, base.truncate("time_limit")["episode"])
            obs, _r, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                last = obs
                record: dict[str, Any] = info["episode"]
                return _with_agent_view(env, record)
            if info.get("worker_crash"):
                # POST_ACK_PRE_CHECKPOINT: the worker died after the acknowledgement. The
                # agent resumes from its last checkpoint (the task start unless it keeps
                # checkpoints) and is shown the task again, not the lost acknowledgement.
                if checkpoint is not None and hasattr(agent, "restore"):
                    agent.restore(checkpoint)
                else:
                    _start(agent, plan, reset_info, initial)
                obs = initial
    finally:
        # An agent that runs beside the harness (an MCP agent program) stops with its
        # episode, however the episode ended; it gets the last step's observation, if any.
        if hasattr(agent, "end_episode"):
            agent.end_episode(last)


def _faulted_step(transcript: list[dict[str, Any]], call_index: int | None) -> int | None:
    """0-based transcript position of the call the fault hit (calls are numbered on the wire)."""
    if call_index is None:
        return None
    n = 0
    for pos, entry in enumerate(transcript):
        obs = entry["observation"]
        if isinstance(obs, dict) and "tool" in obs:
            n += 1
            if n == call_index:
                return pos
    return None


def prefix_equivalent(control: dict[str, Any], fault: dict[str, Any]) -> bool:
    """Identical up to the moment the fault fired: every earlier step, and the faulted action."""
    a, b = control["transcript"], fault["transcript"]
    record = fault.get("fault") or {}
    pos = _faulted_step(b, record.get("index")) if fault.get("fault_fired") else None
    if pos is None:
        return bool(a == b)
    if len(a) <= pos:
        return False
    return bool(a[:pos] == b[:pos] and a[pos]["action"] == b[pos]["action"])


def pair_id(workflow: str, scenario: str, method: str, seed: int, agent: str) -> str:
    return stable_id("pair", workflow, scenario, method, seed, agent, length=16)


def run_pair(
    env: gym.Env[str, str],
    agent: Agent,
    *,
    workflow: WorkflowSpec,
    scenario: FaultScenario,
    seed: int,
    method: str,
    runtime: str,
    model: str | None = None,
    framework: str | None = None,
    episode_time_limit: float | None = None,
    control: dict[str, Any] | None = None,
    on_control: Callable[[dict[str, Any]], None] | None = None,
    replies: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """`control`: this seed's control episode as another pair of the same workflow, method
    and agent recorded it; only for a deterministic agent, whose control episode does not
    depend on the scenario (nothing of it reaches the env before the fault episode's
    reset). `on_control` gets the control episode this pair ran itself. `replies`: the
    model replies of that control episode (an agent with `use_replies`, as the LLM agents
    have, records them while this pair runs its own control); the fault episode takes them
    for the requests it sends unchanged."""
    t0 = time.monotonic()
    limit = episode_time_limit
    use_replies = getattr(agent, "use_replies", None)
    memo: dict[str, Any] = {} if replies is None else replies
    try:
        if control is None:
            if callable(use_replies):
                use_replies(memo, record=True)
            control = run_episode(
                env, agent, seed=seed, workflow=workflow.id, fault=None, time_limit=limit
            )
            if on_control is not None:
                on_control(control)
        if callable(use_replies):
            use_replies(memo, record=False)
        faulted = run_episode(
            env, agent, seed=seed, workflow=workflow.id, fault=scenario.id, time_limit=limit
        )
    finally:
        if callable(use_replies):
            use_replies(None)
    return {
        "pair_id": pair_id(workflow.id, scenario.id, method, seed, agent.name),
        "workflow": workflow.id,
        "domain": workflow.domain,
        "split": workflow.split,
        "kind": workflow.kind,
        "seed": seed,
        "method": method,
        "agent": agent.name,
        "model": model,
        "framework": framework,
        "runtime": runtime,
        "scenario": scenario.id,
        "boundary": scenario.boundary.value,
        "ambiguous": scenario.ambiguous,
        # A cascade's or a concurrent writer's pairs only: single-fault records keep their
        # shape (read as "single").
        **(
            {
                "schedule": workflow.schedule_kind or scenario.schedule_kind,
                "faults": scenario.fault_count,
            }
            if scenario.then or workflow.writer is not None
            else {}
        ),
        "prefix_equivalent": prefix_equivalent(control, faulted),
        "control": control,
        "fault": faulted,
        "wall_ms": round((time.monotonic() - t0) * 1000, 1),
    }
