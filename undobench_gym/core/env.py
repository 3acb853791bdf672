"""UndoBenchEnv: one domain's stack behind the fault proxy, as a Gymnasium environment.

The env is thin: `StackClient` talks to the stack, `boundaries` owns what each fault
boundary does, `oracles` judge, `records` writes the trial record; the env keeps the
episode (`Episode`) and the Gymnasium contract.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, SupportsFloat, TypeVar

import gymnasium as gym
import httpx
from gymnasium.error import ResetNeeded

from undobench_gym.contract import IDEMPOTENCY_MODES, IdempotencyMode, WireLog
from undobench_gym.contract.errors import StackUnhealthyError, UndoBenchError
from undobench_gym.contract.seeding import derive_seed, stable_id
from undobench_gym.contract.specs import FaultScenario, Verdict, WorkflowSpec, fill
from undobench_gym.core import boundaries, catalog
from undobench_gym.core.actions import ActionError, ToolCall, parse_action, to_request
from undobench_gym.core.catalog import FINISH, FINISH_TOOL, ToolSpec
from undobench_gym.core.episode import Episode, Outcome
from undobench_gym.core.oracles import committed_calls, evaluate, reissues_after_commit
from undobench_gym.core.records import episode_record
from undobench_gym.core.runtime import Runtime
from undobench_gym.core.spaces import JsonText, ToolCallSpace
from undobench_gym.core.stack_client import StackClient
from undobench_gym.core.writer import WriterRun

_T = TypeVar("_T")


class UndoBenchEnv(gym.Env[str, str]):
    """Actions are tool calls (dict or JSON text); observations are JSON text.

    `reset(seed, options={"fault": scenario_id | None, "workflow": id})` restores the
    seeded state in place; the episode ends on `finish` or after `max_steps`, with the
    reward (1.0 on success) and `info["verdict"]`.
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        domain: str,
        workflow: str | None = None,
        split: str | None = None,
        runtime: str = "process",
        server_idempotency: str = "native",
        max_steps: int = 20,
        http_timeout: float = 2.0,
    ) -> None:
        if server_idempotency not in IDEMPOTENCY_MODES:
            raise ValueError(f"server_idempotency must be one of {IDEMPOTENCY_MODES}")
        if max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        self.domain_name = domain
        self._domain = catalog.domain(domain)
        workflows = [w for w in self._domain.workflows if split is None or w.split == split]
        if workflow is not None:
            spec = catalog.find_workflow(workflow)
            if spec.domain != domain:
                raise UndoBenchError(
                    f"workflow {workflow!r} belongs to {spec.domain}, not {domain}"
                )
            workflows = [spec]
        if not workflows:
            raise UndoBenchError(f"domain {domain!r} has no workflows in split {split!r}")
        self.workflows = workflows
        self.runtime_kind = runtime
        self.server_idempotency: IdempotencyMode = server_idempotency
        self.max_steps = max_steps
        self.http_timeout = http_timeout
        self._stack = StackClient(runtime, domain, self.server_idempotency, http_timeout)
        all_tools = {n for w in workflows for n in w.tools}
        self.action_space = ToolCallSpace(self._tools_for(sorted(all_tools)))
        self.observation_space = JsonText()
        self._episode: Episode | None = None
        self._suspect = False  # a failure was seen: probe the stack before the next call
        self._verified = False  # the last verdict probed and read the stack; no call since
        self._unplanned_exits = 0

    def _tools_for(self, names: list[str]) -> dict[str, ToolSpec]:
        tools = {n: self._domain.tools[n] for n in names}
        if self.server_idempotency == "all":
            tools = {n: t.with_key() for n, t in tools.items()}
        return tools

    @property
    def runtime(self) -> Runtime:
        return self._stack.runtime

    def adopt_runtime(self, runtime: Runtime) -> None:
        """Run on `runtime`, a stack of this env's domain made (and perhaps already
        started) elsewhere, instead of starting one: the sweep's workers start their first
        stack while they load. Only before the env has started its own."""
        if runtime.domain != self.domain_name:
            raise ValueError(f"a {runtime.domain} stack for a {self.domain_name} env")
        self._stack.adopt(runtime)

    # ---- gymnasium API ------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        options = options or {}
        ep_seed = seed if seed is not None else int(self.np_random.integers(0, 2**62))
        workflow = self._pick_workflow(ep_seed, options.get("workflow"))
        scenario = self._pick_scenario(workflow, options.get("fault"))
        rt = self.runtime
        # The last episode's verdict probed the stack and read it whole: nothing has run on
        # it since, so the reset itself is the check (a failed one probes and retries).
        rt.wait_healthy(probe=not self._verified)
        self._verified = False
        self._unplanned_exits = rt.unplanned_exits  # what happened before is not ours
        self._probed_retry(lambda: self._stack.reset_state(ep_seed))
        params = workflow.draw_params(ep_seed, self._domain.fixture(ep_seed))
        # What the agent sees is the same for the control and the fault episode of a pair
        # (an opaque pair-level id); the proxy and the harness know the episode apart.
        public_id = stable_id("task", ep_seed, workflow.id)
        wire_id = stable_id("ep", ep_seed, workflow.id, scenario.id if scenario else "control")
        fault = boundaries.resolve(scenario, ep_seed, workflow.id, self.http_timeout)
        self._probed_retry(lambda: self._stack.start_episode(wire_id, fault.plan, fault.then))
        tools = self._tools_for(workflow.tools)
        self._episode = Episode(
            public_id=public_id,
            wire_id=wire_id,
            seed=ep_seed,
            workflow=workflow,
            scenario=scenario,
            coin=fault.coin,
            coins=fault.coins,
            worker_crash=fault.worker_crash,
            params=params,
            tools=tools,
            writer=WriterRun(workflow.writer) if workflow.writer is not None else None,
        )
        task = workflow.instruction.format(**params)
        info = {
            "task": task,
            "tools": [t.openai_schema() for t in tools.values()] + [FINISH_TOOL],
            "workflow": workflow.id,
            "domain": workflow.domain,
            "split": workflow.split,
            # Opaque and pair-level: equal for the control and the fault episode, so that
            # nothing in `info` tells them apart before the fault (no seed, no scenario).
            "episode_id": public_id,
            "task_instance": public_id,
        }
        return json.dumps({"task": task, "tools": [*sorted(tools), FINISH]}), info

    def step(self, action: Any) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        ep = self._episode
        if ep is None or ep.done:
            raise ResetNeeded("the episode is over (or never started): call reset() first")
        ep.steps += 1
        parsed = parse_action(action, ep.tools)
        finished = isinstance(parsed, ToolCall) and parsed.tool == FINISH
        if isinstance(parsed, ActionError):
            obs: dict[str, Any] = parsed.observation()
            logged: Any = action if isinstance(action, (dict, str)) else repr(action)
            if isinstance(logged, str) and len(logged) > 2000:
                logged = logged[:2000] + "…"
        elif finished:
            obs = {"finished": True}
            logged = parsed.as_dict()
            ep.finish_status = parsed.arguments["status"]  # checked by parse_action
        else:
            obs = self._call(parsed, ep)
            logged = parsed.as_dict()
            if ep.writer is not None and ep.writer.due(parsed.tool, ep.tool_counts[parsed.tool]):
                self._writer_acts(ep, after_call=len(ep.calls))
        ep.transcript.append({"step": ep.steps, "action": logged, "observation": obs})
        truncated = not finished and ep.steps >= self.max_steps
        if truncated:
            ep.truncated_reason = "max_steps"
        info: dict[str, Any] = {"episode_id": ep.public_id, "step": ep.steps}
        if ep.worker_crash is not None and ep.worker_crash.pending:
            ep.worker_crash.pending = False
            info["worker_crash"] = True
        reward = 0.0
        if finished or truncated:
            verdict = self._finish(ep, finished=finished, truncated=truncated)
            info.update(self._last_info(verdict))
            reward = 1.0 if verdict.success else 0.0
        return json.dumps(obs, default=str), reward, finished, truncated, info

    def _call(self, call: ToolCall, ep: Episode) -> dict[str, Any]:
        spec = ep.tools[call.tool]
        req = to_request(call, spec, self.domain_name)
        self.runtime.wait_healthy(probe=self._suspect)
        self._check_no_unplanned_exit(ep)
        self._suspect = False
        record = ep.record_call(call, spec, keys_honoured=self.server_idempotency == "all")
        nth = ep.count_call(record)
        try:
            resp = self._stack.send(req)
        except httpx.TimeoutException:
            self._suspect = True
            record.timed_out = True
            return {
                "tool": call.tool,
                "error": {"type": "transport", "kind": "timeout", "message": "timed out"},
            }
        except httpx.TransportError as exc:
            self._suspect = True
            return {
                "tool": call.tool,
                "error": {
                    "type": "transport",
                    "kind": "connection_reset",
                    "message": str(exc) or type(exc).__name__,
                },
            }
        record.status = resp.status_code
        self._suspect = resp.status_code >= 500
        if ep.worker_crash is not None and ep.scenario is not None:
            boundaries.observe_call(
                ep.worker_crash,
                ep.scenario.id,
                tool=call.tool,
                nth=nth,
                index=len(ep.calls),
                status=resp.status_code,
            )
        try:
            body: Any = resp.json()
        except ValueError:
            body = resp.text[:4000]
        return {"tool": call.tool, "status": resp.status_code, "body": body}

    def _writer_acts(self, ep: Episode, after_call: int | None) -> None:
        """The task's concurrent writer makes its calls now (admin port, not the proxy)."""
        assert ep.writer is not None
        self.runtime.wait_healthy(probe=self._suspect)
        self._check_no_unplanned_exit(ep)
        ep.writer.act(self._stack, self._domain.tools, self.domain_name, ep.params, after_call)

    def _check_no_unplanned_exit(self, ep: Episode) -> None:
        """A service or the proxy exited outside the fault plan (killed, crashed, OOM):
        what this episode saw is not what the plan asked for, so it is void. Raising makes
        a sweep replace the stack and retry the pair instead of scoring the agent for it."""
        seen = self.runtime.unplanned_exits
        if seen == self._unplanned_exits:
            return
        self._unplanned_exits = seen
        ep.done = True
        raise StackUnhealthyError(
            f"a process of the {self.domain_name!r} stack exited outside the fault plan "
            f"during episode {ep.public_id}: the episode is void; call reset() to start again"
        )

    def _check_no_unplanned_timeout(self, ep: Episode, wire: WireLog) -> None:
        """A call the client gave up on although no fault was planned on it: the stack was
        slow (a loaded machine, a short `http_timeout`), and the agent saw a failure the
        plan did not ask for. Like an unplanned exit, that voids the episode; a sweep
        records it as an infrastructure error and retries the pair on a fresh stack."""
        faulted = {e.index for e in wire.events if e.fault}
        late = [n for n, c in enumerate(ep.calls, 1) if c.timed_out and n not in faulted]
        if late:
            raise StackUnhealthyError(
                f"call {late[0]} ({ep.calls[late[0] - 1].tool}) of episode {ep.public_id} "
                f"timed out after {self.http_timeout:g}s with no fault planned on it: the "
                "stack was slow, not faulted, so the episode is void (a longer http_timeout "
                "helps on a loaded machine); call reset() to start again"
            )

    def _verdict_read(self, ep: Episode, read: Callable[[], _T]) -> _T:
        """A read of the verdict; if the stack does not answer, probe it (which restarts
        what exited and counts the exit) and read once more, unless the exit voids it."""
        try:
            return read()
        except httpx.TransportError:
            self.runtime.wait_healthy(probe=True)
            self._check_no_unplanned_exit(ep)
            return read()

    def _probed_retry(self, call: Callable[[], None]) -> None:
        """A harness call between episodes; if the stack does not answer, probe it (which
        restarts what exited) and call once more."""
        try:
            call()
        except httpx.TransportError:
            self.runtime.wait_healthy(probe=True)
            self._unplanned_exits = self.runtime.unplanned_exits
            call()

    def _finish(self, ep: Episode, *, finished: bool, truncated: bool) -> Verdict:
        ep.done = True
        rt = self.runtime
        rt.wait_healthy(probe=rt.verdict_probe or ep.writer is not None)
        self._check_no_unplanned_exit(ep)
        if ep.writer is not None and not ep.writer.acted:
            self._writer_acts(ep, after_call=None)  # the other client does not wait
        state, commit_log = self._verdict_read(ep, self._stack.final_state)
        wire = self._verdict_read(ep, self._stack.wire)  # waits for held flows (timeouts)
        if not rt.verdict_probe:
            rt.wait_healthy()  # both answered, so every exit until now has been seen
            self._check_no_unplanned_exit(ep)
        self._verified = True
        self._check_no_unplanned_timeout(ep, wire)
        statuses = {
            e.index: e.upstream_status or e.status for e in wire.events if e.index is not None
        }
        committed = committed_calls(statuses, len(ep.calls))
        unsafe, safe = reissues_after_commit(ep.calls, committed)
        verdict = evaluate(
            ep.workflow,
            ep.params,
            state.model_dump(),
            [r.model_dump() for r in commit_log],
            len(wire.events),
            reissued_after_commit=unsafe,
            safe_reissues=safe,
            fault_fired=boundaries.fault_fired(ep.scenario, ep.worker_crash, wire),
            finished=finished,
            truncated=truncated,
            finish_status=ep.finish_status,
        )
        ep.outcome = Outcome(
            verdict=verdict,
            state_hash=state.hash,
            wire=wire,
            commit_log=commit_log,
            wall_ms=round((time.monotonic() - ep.t0) * 1000, 1),
            fault_outcome=boundaries.fault_outcome(
                ep.scenario, ep.worker_crash, wire, ep.coin, ep.coins
            ),
        )
        return verdict

    def harness_info(self) -> dict[str, Any]:
        """What only the harness may know about the current episode (never in `info`):
        the scenario, the hidden coin, the seed and the proxy's episode id."""
        ep = self._episode
        if ep is None:
            raise ResetNeeded("call reset() first")
        return {
            "seed": ep.seed,
            "workflow": ep.workflow.id,
            "scenario": ep.scenario.id if ep.scenario else None,
            "boundary": ep.scenario.boundary.value if ep.scenario else None,
            "hidden_commit_coin": ep.coin,
            "wire_episode_id": ep.wire_id,
        }

    def truncate(self, reason: str = "time_limit") -> dict[str, Any]:
        """End the running episode as truncated (the agent ran out of time): an agent
        failure with a verdict, not an infrastructure error. Returns the last step's info."""
        ep = self._episode
        if ep is None or ep.done:
            raise ResetNeeded("no running episode to truncate")
        ep.truncated_reason = reason
        verdict = self._finish(ep, finished=False, truncated=True)
        return {"episode_id": ep.public_id, "step": ep.steps, **self._last_info(verdict)}

    def _last_info(self, verdict: Verdict) -> dict[str, Any]:
        """What the last step's `info` adds: the verdict and the trial-record episode."""
        return {"verdict": verdict.model_dump(), "episode": self.episode_record()}

    def gold_plan(self) -> list[dict[str, Any]]:
        """The current episode's gold plan with parameters filled in (for scripted agents);
        `@N.path` references stay for the agent to resolve from observations."""
        if self._episode is None:
            raise ResetNeeded("call reset() first")
        params = self._episode.params
        return [
            {"tool": s.tool, "arguments": fill(s.arguments, params)}
            for s in self._episode.workflow.gold_plan
        ]

    def episode_record(self) -> dict[str, Any]:
        """The trial-record view of the last finished episode."""
        ep = self._episode
        if ep is None or ep.outcome is None:
            raise ResetNeeded("no finished episode yet")
        return episode_record(ep)

    def _pick_workflow(self, seed: int, requested: str | None) -> WorkflowSpec:
        if requested is not None:
            for w in self.workflows:
                if w.id == requested:
                    return w
            raise UndoBenchError(
                f"workflow {requested!r} is not available in this env; "
                f"available: {', '.join(w.id for w in self.workflows)}"
            )
        return self.workflows[derive_seed(seed, "workflow") % len(self.workflows)]

    @staticmethod
    def _pick_scenario(workflow: WorkflowSpec, fault: Any) -> FaultScenario | None:
        if fault is None:
            return None
        if isinstance(fault, FaultScenario):
            return fault
        try:
            return workflow.scenario(str(fault))
        except KeyError as exc:
            raise UndoBenchError(str(exc.args[0])) from None

    def close(self) -> None:
        self._stack.close()
        super().close()
