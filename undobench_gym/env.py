"""UndoBenchEnv: one domain's stack behind the fault proxy, as a Gymnasium environment."""

from __future__ import annotations

import json
import time
from typing import Any, SupportsFloat

import gymnasium as gym
import httpx
from gymnasium.error import ResetNeeded

from . import catalog
from .actions import ActionError, ToolCall, call_identity, parse_action, to_request
from .catalog import FINISH, FINISH_TOOL, ToolSpec
from .errors import StackUnhealthyError, UndoBenchError
from .oracles import evaluate
from .runtime import Runtime, make_runtime
from .seeding import derive_seed, stable_id
from .spaces import JsonText, ToolCallSpace
from .specs import Boundary, FaultScenario, Verdict, WorkflowSpec

SERVER_IDEMPOTENCY = ("native", "all", "none")
#: Ambiguous faults are shown no earlier than this after the request arrived, whichever way
#: the hidden coin fell: a forwarded (committed) call takes longer than a dropped one, and
#: the difference must not tell an agent the coin. Above the slowest mutating call's
#: latency measured here (benchmarks/bench_ambiguous_latency.py).
AMBIGUOUS_PAD_S = 0.25
#: How long past the client's own timeout the verdict waits for held flows' wire events.
WIRE_SETTLE_MARGIN_S = 2.0


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
        if server_idempotency not in SERVER_IDEMPOTENCY:
            raise ValueError(f"server_idempotency must be one of {SERVER_IDEMPOTENCY}")
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
        self.server_idempotency = server_idempotency
        self.max_steps = max_steps
        self.http_timeout = http_timeout
        self._runtime: Runtime | None = None
        self._http: httpx.Client | None = None
        all_tools = {n for w in workflows for n in w.tools}
        self.action_space = ToolCallSpace(self._tools_for(sorted(all_tools)))
        self.observation_space = JsonText()
        self._episode: dict[str, Any] | None = None
        self._suspect = False  # a failure was seen: probe the stack before the next call
        self._unplanned_exits = 0

    # ---- stack ------------------------------------------------------------------

    def _tools_for(self, names: list[str]) -> dict[str, ToolSpec]:
        tools = {n: self._domain.tools[n] for n in names}
        if self.server_idempotency == "all":
            tools = {n: t.with_key() for n, t in tools.items()}
        return tools

    @property
    def runtime(self) -> Runtime:
        if self._runtime is None:
            self._runtime = make_runtime(self.runtime_kind, self.domain_name)
            try:
                ep = self._runtime.start()
                self._http = httpx.Client(timeout=self.http_timeout)
                for url in ep.admin_urls.values():
                    self._http.post(
                        f"{url}/admin/config", json={"idempotency_mode": self.server_idempotency}
                    ).raise_for_status()
            except BaseException:
                self.close()
                raise
        return self._runtime

    def _admin(self, method: str, path: str, **kw: Any) -> Any:
        assert self._http is not None
        url = self.runtime.endpoints.admin_urls[self.domain_name] + path
        resp = self._http.request(method, url, **kw)
        resp.raise_for_status()
        return resp.json()

    def _control(self, method: str, path: str, **kw: Any) -> Any:
        assert self._http is not None
        resp = self._http.request(method, self.runtime.endpoints.control_url + path, **kw)
        resp.raise_for_status()
        return resp.json()

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
        rt.wait_healthy(probe=True)
        self._unplanned_exits = rt.unplanned_exits  # what happened before is not ours
        self._admin("POST", "/admin/reset", json={"seed": ep_seed})
        params = workflow.draw_params(ep_seed, self._domain.fixture(ep_seed))
        # What the agent sees is the same for the control and the fault episode of a pair
        # (an opaque pair-level id); the proxy and the harness know the episode apart.
        public_id = stable_id("task", ep_seed, workflow.id)
        wire_id = stable_id("ep", ep_seed, workflow.id, scenario.id if scenario else "control")
        coin = None
        plan = None
        worker_crash = None
        if scenario is not None and scenario.boundary is Boundary.POST_ACK_PRE_CHECKPOINT:
            # Not a wire fault: the call commits and is acknowledged, then the agent's
            # worker "crashes". The env marks the step (info["worker_crash"]) and the
            # harness rolls the agent's memory back to its last checkpoint.
            worker_crash = scenario.target
        elif scenario is not None:
            coin = bool(derive_seed(ep_seed, workflow.id, scenario.id, "coin") & 1)
            t = scenario.target
            plan = {
                "scenario": scenario.id,
                "action": scenario.action(coin),
                "tool": t.tool,
                "nth": t.nth,
                "visible_error": scenario.visible_error.value,
                "crash_point": scenario.crash_point,
                "timeout_s": self.http_timeout + 0.5,
                "pad_s": AMBIGUOUS_PAD_S if scenario.ambiguous else 0.0,
            }
        self._control("POST", "/control/episode", json={"episode_id": wire_id, "plan": plan})
        tools = self._tools_for(workflow.tools)
        task = workflow.instruction.format(**params)
        self._episode = {
            "id": public_id,
            "wire_id": wire_id,
            "seed": ep_seed,
            "workflow": workflow,
            "scenario": scenario,
            "coin": coin if scenario is not None and scenario.ambiguous else None,
            "plan": plan,
            "params": params,
            "tools": tools,
            "steps": 0,
            "transcript": [],
            "calls": [],
            "tool_counts": {},
            "worker_crash": worker_crash,
            "worker_fault": None,
            "worker_target": None,
            "finish_status": None,
            "truncated_reason": None,
            "done": False,
            "t0": time.monotonic(),
        }
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
        if ep is None or ep["done"]:
            raise ResetNeeded("the episode is over (or never started): call reset() first")
        ep["steps"] += 1
        parsed = parse_action(action, ep["tools"])
        finished = isinstance(parsed, ToolCall) and parsed.tool == FINISH
        if isinstance(parsed, ActionError):
            obs: dict[str, Any] = parsed.observation()
            logged: Any = action if isinstance(action, (dict, str)) else repr(action)
            if isinstance(logged, str) and len(logged) > 2000:
                logged = logged[:2000] + "…"
        elif finished:
            obs = {"finished": True}
            logged = parsed.as_dict()
            status = parsed.arguments.get("status", "done")
            ep["finish_status"] = status if status in ("done", "gave_up") else "done"
        else:
            obs = self._call(parsed, ep)
            logged = parsed.as_dict()
        ep["transcript"].append({"step": ep["steps"], "action": logged, "observation": obs})
        truncated = not finished and ep["steps"] >= self.max_steps
        if truncated:
            ep["truncated_reason"] = "max_steps"
        info: dict[str, Any] = {"episode_id": ep["id"], "step": ep["steps"]}
        if ep.pop("pending_worker_crash", False):
            info["worker_crash"] = True
        reward = 0.0
        if finished or truncated:
            verdict = self._finish(ep, finished=finished, truncated=truncated)
            info.update(self._last_info(verdict))
            reward = 1.0 if verdict.success else 0.0
        return json.dumps(obs, default=str), reward, finished, truncated, info

    def _call(self, call: ToolCall, ep: dict[str, Any]) -> dict[str, Any]:
        assert self._http is not None
        spec: ToolSpec = ep["tools"][call.tool]
        req = to_request(call, spec, self.domain_name)
        self.runtime.wait_healthy(probe=self._suspect)
        self._check_no_unplanned_exit(ep)
        self._suspect = False
        record = {
            "tool": call.tool,
            "read_only": spec.read_only,
            "identity": None if spec.read_only else call_identity(call, spec),
            "status": None,
        }
        ep["calls"].append(record)
        ep["tool_counts"][call.tool] = ep["tool_counts"].get(call.tool, 0) + 1
        try:
            resp = self._http.request(
                req.method,
                self.runtime.endpoints.agent_url + req.path,
                params=req.params,
                json=req.json,
                headers=req.headers,
            )
        except httpx.TimeoutException:
            self._suspect = True
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
        record["status"] = resp.status_code
        self._suspect = resp.status_code >= 500
        self._maybe_crash_worker(ep, call.tool, resp.status_code)
        try:
            body: Any = resp.json()
        except ValueError:
            body = resp.text[:4000]
        return {"tool": call.tool, "status": resp.status_code, "body": body}

    def _check_no_unplanned_exit(self, ep: dict[str, Any]) -> None:
        """A service or the proxy exited outside the fault plan (killed, crashed, OOM):
        what this episode saw is not what the plan asked for, so it is void. Raising makes
        a sweep replace the stack and retry the pair instead of scoring the agent for it."""
        seen = self.runtime.unplanned_exits
        if seen == self._unplanned_exits:
            return
        self._unplanned_exits = seen
        ep["done"] = True
        raise StackUnhealthyError(
            f"a process of the {self.domain_name!r} stack exited outside the fault plan "
            f"during episode {ep['id']}: the episode is void; call reset() to start again"
        )

    @staticmethod
    def _maybe_crash_worker(ep: dict[str, Any], tool: str, status: int) -> None:
        target = ep["worker_crash"]
        if target is None or ep["worker_fault"] is not None:
            return
        index, nth = len(ep["calls"]), ep["tool_counts"].get(tool, 0)
        if tool != target.tool or nth != target.nth:
            return
        if not 200 <= status < 300:
            # Refused: nothing was acknowledged, so there is no progress to lose.
            ep["worker_target"] = {
                "reason": "refused",
                "index": index,
                "tool": tool,
                "upstream_status": status,
            }
            return
        ep["worker_fault"] = {
            "scenario": ep["scenario"].id,
            "action": "worker_crash",
            "stage": "post_ack",
            "index": index,
            "tool": tool,
            "upstream_status": status,
            "committed": True,
        }
        ep["pending_worker_crash"] = True

    def _finish(self, ep: dict[str, Any], *, finished: bool, truncated: bool) -> Verdict:
        ep["done"] = True
        self.runtime.wait_healthy(probe=True)
        self._check_no_unplanned_exit(ep)
        state = self._admin("GET", "/admin/state")
        commit_log = self._admin("GET", "/admin/commit-log")
        # Held flows (a `timeout` fault) are recorded only when released: wait for them.
        wire = self._control(
            "GET", "/control/wire", params={"settle": self.http_timeout + WIRE_SETTLE_MARGIN_S}
        )
        scenario: FaultScenario | None = ep["scenario"]
        committed_calls = self._committed_call_indexes(ep, wire)
        verdict = evaluate(
            ep["workflow"],
            ep["params"],
            state,
            commit_log,
            len(wire["events"]),
            reissued_after_commit=self._reissues(ep, committed_calls),
            fault_fired=(bool(wire["fault_fired"]) or ep["worker_fault"] is not None)
            if scenario is not None
            else None,
            finished=finished,
            truncated=truncated,
            finish_status=ep["finish_status"],
        )
        ep.update(
            state_hash=state["hash"],
            verdict=verdict,
            wire=wire,
            commit_log=commit_log,
            wall_ms=round((time.monotonic() - ep["t0"]) * 1000, 1),
        )
        ep["fault_outcome"] = self._fault_outcome(ep)
        return verdict

    @staticmethod
    def _fault_outcome(ep: dict[str, Any]) -> dict[str, Any] | None:
        """Whether the fault happened as planned, and by which mechanism.

        As planned: it fired on the targeted call of the named mutating tool with the
        planned outcome: a dropped request; a reply lost after a 2xx commit; a crash at the
        crash point; a worker crash after a 2xx acknowledgement. A refused target call has no
        commit to lose, and a composite that answered never reached its crash point."""
        scenario: FaultScenario | None = ep["scenario"]
        if scenario is None:
            return None
        if ep["worker_fault"] is not None:
            fired: dict[str, Any] | None = ep["worker_fault"]
        else:
            fired = ep["wire"].get("fault") if ep["wire"].get("fault_fired") else None
        missed = ep["worker_target"] or ep["wire"].get("target")
        mechanism = None
        if fired is not None:
            mechanism = {
                "request": "request_dropped",
                "response": "reply_dropped_after_commit",
                "crash": "crash_mid_mutation",
                "post_ack": "worker_crash_after_ack",
            }.get(str(fired.get("stage")))
        reason = None
        if mechanism is None:
            reason = missed["reason"] if missed else "not_reached"
        return {
            "as_planned": mechanism is not None,
            "reason": reason,
            "mechanism": mechanism,
            "coin": ep["coin"],
            "tool": scenario.target.tool,
            "nth": scenario.target.nth,
        }

    @staticmethod
    def _committed_call_indexes(ep: dict[str, Any], wire: dict[str, Any]) -> set[int]:
        """Positions (0-based, among the env's calls) whose mutation reached the service and
        succeeded, as the wire saw it, lost acknowledgements included."""
        # The env is the stack's only client and calls one at a time, so its k-th call is
        # the proxy's global call index k: match by index, not by position in the log.
        by_index = {e["index"]: e for e in wire["events"] if e.get("index") is not None}
        out = set()
        for i in range(len(ep["calls"])):
            event = by_index.get(i + 1)
            status = None if event is None else event.get("upstream_status") or event.get("status")
            if status is not None and 200 <= status < 300:
                out.add(i)
        return out

    @staticmethod
    def _reissues(ep: dict[str, Any], committed: set[int]) -> int:
        seen_committed: set[str] = set()
        count = 0
        for i, call in enumerate(ep["calls"]):
            ident = call["identity"]
            if ident is None:
                continue
            if ident in seen_committed:
                count += 1
            if i in committed:
                seen_committed.add(ident)
        return count

    def harness_info(self) -> dict[str, Any]:
        """What only the harness may know about the current episode (never in `info`):
        the scenario, the hidden coin, the seed and the proxy's episode id."""
        ep = self._episode
        if ep is None:
            raise ResetNeeded("call reset() first")
        scenario: FaultScenario | None = ep["scenario"]
        return {
            "seed": ep["seed"],
            "workflow": ep["workflow"].id,
            "scenario": scenario.id if scenario else None,
            "boundary": scenario.boundary.value if scenario else None,
            "hidden_commit_coin": ep["coin"],
            "wire_episode_id": ep["wire_id"],
        }

    def truncate(self, reason: str = "time_limit") -> dict[str, Any]:
        """End the running episode as truncated (the agent ran out of time): an agent
        failure with a verdict, not an infrastructure error. Returns the last step's info."""
        ep = self._episode
        if ep is None or ep["done"]:
            raise ResetNeeded("no running episode to truncate")
        ep["truncated_reason"] = reason
        verdict = self._finish(ep, finished=False, truncated=True)
        return {"episode_id": ep["id"], "step": ep["steps"], **self._last_info(verdict)}

    def _last_info(self, verdict: Verdict) -> dict[str, Any]:
        """What the last step's `info` adds: the verdict and the trial-record episode."""
        return {"verdict": verdict.model_dump(), "episode": self.episode_record()}

    def gold_plan(self) -> list[dict[str, Any]]:
        """The current episode's gold plan with parameters filled in (for scripted agents);
        `@N.path` references stay for the agent to resolve from observations."""
        from .specs import fill

        if self._episode is None:
            raise ResetNeeded("call reset() first")
        params = self._episode["params"]
        return [
            {"tool": s.tool, "arguments": fill(s.arguments, params)}
            for s in self._episode["workflow"].gold_plan
        ]

    def episode_record(self) -> dict[str, Any]:
        """The trial-record view of the last finished episode."""
        ep = self._episode
        if ep is None or "verdict" not in ep:
            raise ResetNeeded("no finished episode yet")
        v: Verdict = ep["verdict"]
        return {
            "episode_id": ep["id"],
            "success": v.success,
            "verdict": v.model_dump(),
            "steps": ep["steps"],
            "transcript": ep["transcript"],
            "state_hash": ep["state_hash"],
            "effects": {
                "physical": v.layers.physical,
                "committed": v.layers.committed,
                "semantic": v.layers.semantic,
                "duplicates": len(v.duplicates),
                "missing": len(v.missing),
                "forbidden": len(v.forbidden),
                "unrequired": len(v.unrequired),
                "partial": len(v.partial),
                "reissued_after_commit": v.reissued_after_commit,
            },
            "fault_fired": v.fault_fired,
            "fault": ep["worker_fault"] or ep["wire"].get("fault"),
            "fault_outcome": ep["fault_outcome"],
            "finish_status": v.finish_status,
            "truncated": v.truncated,
            "truncated_reason": ep["truncated_reason"],
            # Compact logs for audits (wire/commit consistency): what crossed the proxy and
            # what the services committed.
            "wire": [
                {
                    k: e.get(k)
                    for k in (
                        "index",
                        "tool",
                        "method",
                        "path",
                        "read_only",
                        "outcome",
                        "status",
                        "upstream_status",
                        "forwarded",
                    )
                }
                for e in sorted(ep["wire"]["events"], key=lambda e: e.get("index") or 0)
            ],
            "commit_log": [
                {
                    k: r.get(k)
                    for k in (
                        "seq",
                        "op",
                        "effect_class",
                        "identity",
                        "idempotency_key",
                        "compensation",
                    )
                }
                for r in ep["commit_log"]
            ],
            "hidden_commit_coin": ep["coin"],
            "wall_ms": ep["wall_ms"],
            "error": None,
        }

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
        if self._http is not None:
            self._http.close()
            self._http = None
        if self._runtime is not None:
            self._runtime.close()
            self._runtime = None
        super().close()
