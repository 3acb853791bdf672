"""UndoBench envs in TRL's environment mode: `GRPOTrainer(environment_factory=...)`.

TRL makes one environment instance per rollout (pooled, reset between batches), calls
`reset(**row)` with the dataset row, exposes the instance's public methods as tools, and
scores each rollout with `get_reward()`. Here every instance owns one
`gym.make("UndoBench/<Domain>-v0")` env, hence one stack, so a batch's rollouts run on
several stacks at once; the row's `seed` fixes the task instance (shared by a GRPO group)
and `FaultMix` draws the fault per rollout, the control episode included. The reward comes
from the verdict (`rewards`). Episodes still running when rewards are asked for (the model
stopped calling tools) are ended, and judged, on all the batch's stacks in parallel.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymnasium as gym

from undobench_gym.contract.errors import UndoBenchError
from undobench_gym.contract.seeding import derive_seed
from undobench_gym.core import catalog
from undobench_gym.core.catalog import FINISH_TOOL
from undobench_gym.core.registration import ENV_IDS
from undobench_gym.harness.rl.faults import FaultMix, scenarios_for
from undobench_gym.harness.rl.rewards import reward_fn
from undobench_gym.harness.rl.tools import tool_method

EPISODE_OVER = json.dumps(
    {"error": {"type": "episode_over", "message": "the task has ended; no more calls are taken"}}
)


class UndoBenchTRLEnv:
    """One rollout's environment. Public methods other than `reset` and `get_reward` are
    the tools (added per domain by `UndoBenchEnvFactory`); keep helpers private."""

    def __init__(self, factory: UndoBenchEnvFactory) -> None:
        self._factory = factory
        self._env: Any = gym.make(
            factory.env_id,
            split=factory.split,
            runtime=factory.runtime,
            max_steps=factory.max_steps,
            http_timeout=factory.http_timeout,
        )
        self._done = True
        self._verdict: dict[str, Any] | None = None
        self._error: str | None = None
        self._record: dict[str, Any] = {}

    def reset(self, seed: int | None = None, workflow: str | None = None, **_row: Any) -> str:
        """Start the row's task instance with this rollout's fault; returns the task text."""
        f = self._factory
        if seed is None:
            raise ValueError("each dataset row needs a `seed` column (the task instance)")
        wf = workflow or f.default_workflow(int(seed))
        fault = f.mix.draw(int(seed), wf)
        t0 = time.monotonic()
        try:
            _obs, info = self._env.reset(seed=int(seed), options={"workflow": wf, "fault": fault})
        finally:
            f.timing["env_s"] += time.monotonic() - t0
        self._done = False
        self._verdict = None
        self._error = None
        self._record = {"seed": int(seed), "workflow": wf, "scenario": fault, "steps": 0}
        return str(info["task"])

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        if self._done:
            return EPISODE_OVER
        t0 = time.monotonic()
        try:
            obs, _r, terminated, truncated, info = self._env.step(
                {"tool": name, "arguments": arguments}
            )
        except UndoBenchError as exc:  # the stack failed, not the policy: void, not scored
            self._done = True
            self._error = str(exc)
            return json.dumps({"error": {"type": "unavailable", "message": "service error"}})
        finally:
            self._factory.timing["env_s"] += time.monotonic() - t0
        self._record["steps"] += 1
        if terminated or truncated:
            self._done = True
            self._verdict = info["verdict"]
        return str(obs)

    def _finalize(self) -> None:
        """End a running episode (the model stopped calling tools): truncated, and judged."""
        if self._done:
            return
        self._done = True
        try:
            self._verdict = self._env.unwrapped.truncate("no_finish")["verdict"]
        except UndoBenchError as exc:
            self._error = str(exc)

    def get_reward(self) -> float | None:
        """The verdict's reward; None (not scored) when the stack failed under the rollout."""
        f = self._factory
        f.finalize_running()
        self._finalize()
        if self._verdict is None:
            f.rollouts.append({**self._record, "reward": None, "error": self._error})
            return None
        reward = f.reward(self._verdict)
        v = self._verdict
        f.rollouts.append(
            {
                **self._record,
                "reward": reward,
                "success": bool(v.get("success")),
                "harmless": not any(
                    v.get(k) for k in ("duplicates", "unrequired", "forbidden", "partial")
                ),
                "finished": bool(v.get("finished")),
                "fault_fired": v.get("fault_fired"),
                "error": None,
            }
        )
        self._record = {}
        return reward

    def _close(self) -> None:
        self._env.close()


class UndoBenchEnvFactory:
    """`environment_factory` for one domain. `workflows`: the ids rows may name (default:
    the domain's workflows in `split`); `boundaries`: the fault boundaries drawn (default:
    every one a rollout supports); `controls`: control slots per fault cycle; `reward`:
    "verdict" (success: right state, no harm) or "shaped". Call `close()` when done."""

    def __init__(
        self,
        domain: str,
        *,
        workflows: Iterable[str] | None = None,
        split: str | None = None,
        boundaries: Iterable[str] | None = None,
        ambiguous: bool = True,
        controls: int = 1,
        reward: str = "verdict",
        max_steps: int = 8,
        runtime: str = "process",
        http_timeout: float = 2.0,
        parallel: bool = True,
    ) -> None:
        self.domain = domain.lower()
        ids = {d: e for e, d in ENV_IDS.items()}
        if self.domain not in ids:
            raise ValueError(f"unknown domain {domain!r}; known: {', '.join(sorted(ids))}")
        self.env_id = ids[self.domain]
        specs = [
            w for w in catalog.domain(self.domain).workflows if split is None or w.split == split
        ]
        if workflows is not None:
            wanted = list(workflows)
            specs = [catalog.find_workflow(w) for w in wanted]
            for w in specs:
                if w.domain != self.domain:
                    raise ValueError(f"workflow {w.id!r} is in {w.domain}, not {self.domain}")
        if not specs:
            raise ValueError(f"{self.domain}: no workflows (split {split!r})")
        self.workflows = [w.id for w in specs]
        self.split = split
        self.mix = FaultMix(
            {w.id: scenarios_for(w, boundaries, ambiguous=ambiguous) for w in specs},
            controls=controls,
        )
        self.reward: Callable[[dict[str, Any]], float] = reward_fn(reward)
        self.reward_name = reward
        self.max_steps = max_steps
        self.runtime = runtime
        self.http_timeout = http_timeout
        self.parallel = parallel
        self.instances: list[UndoBenchTRLEnv] = []
        self.rollouts: list[dict[str, Any]] = []
        self.timing: dict[str, float] = {"env_s": 0.0}
        self._cls = self._env_class(specs)

    def _env_class(self, specs: list[Any]) -> type[UndoBenchTRLEnv]:
        tools = catalog.domain(self.domain).tools
        names = sorted({n for w in specs for n in w.tools})
        reserved = {"reset", "get_reward"}
        methods: dict[str, Any] = {}
        for schema in [tools[n].openai_schema() for n in names] + [FINISH_TOOL]:
            name = schema["function"]["name"]
            if name in reserved or name.startswith("_"):
                raise ValueError(f"tool name {name!r} collides with TRL's environment API")
            methods[name] = tool_method(schema, UndoBenchTRLEnv._call)
        cls_name = "UndoBench" + self.env_id.split("/")[1].split("-")[0] + "Env"
        return type(cls_name, (UndoBenchTRLEnv,), methods)

    def default_workflow(self, seed: int) -> str:
        return self.workflows[derive_seed(seed, "rl-workflow") % len(self.workflows)]

    def __call__(self) -> UndoBenchTRLEnv:
        t0 = time.monotonic()
        env = self._cls(self)
        self.timing["env_s"] += time.monotonic() - t0
        self.instances.append(env)
        return env

    def finalize_running(self) -> None:
        """Judge every episode the model left running, on all stacks at once: each verdict
        waits on its own stack's admin API (and a crashed service's restart)."""
        running = [e for e in self.instances if not e._done]
        if not running:
            return
        t0 = time.monotonic()
        if self.parallel and len(running) > 1:
            with ThreadPoolExecutor(max_workers=len(running)) as pool:
                list(pool.map(lambda e: e._finalize(), running))
        else:
            for e in running:
                e._finalize()
        self.timing["env_s"] += time.monotonic() - t0

    def close(self) -> None:
        """Close every instance's stack (idempotent)."""
        while self.instances:
            self.instances.pop()._close()

    def __enter__(self) -> UndoBenchEnvFactory:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
