"""The worker side, shared by every executor: it owns stacks and agents for its lifetime and
turns one `TrialTask` into one `Outcome`.

Failures are sorted here: an exception raised by agent code ends that episode as the
agent's give-up (an agent failure, recorded and never retried); anything that breaks the
harness or a stack becomes an infrastructure error of a named kind, and the stack it
happened on is discarded so a retry starts on a fresh one. A model server that stays down
(`ProviderUnavailable`) is an infrastructure error too; its stack is kept, being fine.
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from undobench_gym.agents.factory import make_agent
from undobench_gym.agents.methods import applicable, server_idempotency_for, workflow_schemas, wrap
from undobench_gym.contract.errors import (
    ProviderUnavailable,
    StackStartError,
    StackUnhealthyError,
    UndoBenchError,
)
from undobench_gym.core.catalog import find_workflow
from undobench_gym.core.deadline import time_limit
from undobench_gym.core.env import UndoBenchEnv
from undobench_gym.core.pairing import run_pair
from undobench_gym.core.runtime import Runtime
from undobench_gym.harness.executors.base import (
    HARNESS,
    PROVIDER,
    STACK_START,
    STACK_UNHEALTHY,
    TIMEOUT,
    USAGE,
    Outcome,
    StackKey,
    TrialTask,
)
from undobench_gym.harness.executors.prestart import Prestart, die_with_parent

__all__ = ["GuardedAgent", "StackPool", "TrialWorker", "die_with_parent"]
#: Of a pair's time limit, what each of its two episodes may use before it is truncated.
EPISODE_SHARE = 0.45


class TrialTimeout(BaseException):
    """Raised by the trial alarm. A BaseException, so neither agent code nor the harness's
    own `except Exception` can swallow it."""


@contextlib.contextmanager
def alarm(seconds: float | None) -> Iterator[None]:
    """Interrupt the block after `seconds` (SIGALRM on the main thread; off it, at the
    lane's next Python instruction: `deadline.time_limit`)."""
    if not seconds:
        yield
        return
    with time_limit(seconds, TrialTimeout, f"the trial ran past its {seconds:g}s timeout"):
        yield


class GuardedAgent:
    """Delegates to the agent; an exception in agent code becomes a `finish` (gave_up) with
    the exception in its summary, so the episode is scored as the agent's failure. Except
    `ProviderUnavailable`: a model server that is down says nothing about the agent."""

    _GUARDED = ("reset", "reset_task", "checkpoint", "restore")

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.name: str = inner.name
        self.exceptions = 0
        self._broken: str | None = None

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._inner, attr)  # AttributeError keeps hasattr() honest
        if attr in self._GUARDED and callable(value):
            return self._guard(value)
        return value

    def _guard(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kw: Any) -> Any:
            if fn.__name__ in ("reset", "reset_task"):
                self._broken = None
            try:
                return fn(*args, **kw)
            except Exception as exc:
                self._fail(exc)
                return None

        return call

    def _fail(self, exc: Exception) -> None:
        if isinstance(exc, ProviderUnavailable):
            raise exc  # infrastructure, not the agent: the worker records it as such
        self.exceptions += 1
        self._broken = f"agent raised {type(exc).__name__}: {exc}"[:1000]

    def act(self, observation: str) -> dict[str, Any] | str:
        if self._broken is None:
            try:
                action: dict[str, Any] | str = self._inner.act(observation)
                return action
            except Exception as exc:
                self._fail(exc)
        return {"tool": "finish", "arguments": {"status": "gave_up", "summary": self._broken}}


class StackPool:
    """At most `max_stacks` envs (one stack each), least recently used closed first."""

    def __init__(self, runtime: str, max_steps: int, max_stacks: int, http_timeout: float) -> None:
        self.runtime, self.max_steps, self.max_stacks = runtime, max_steps, max(1, max_stacks)
        self.http_timeout = http_timeout
        self.envs: OrderedDict[StackKey, UndoBenchEnv] = OrderedDict()

    def get(self, key: StackKey, started: Runtime | None = None) -> UndoBenchEnv:
        """The env for `key`, on `started` (a prestarted runtime of its domain) if it
        needs a new stack; a `started` runtime it does not use is closed."""
        if key in self.envs:
            if started is not None:
                started.close()
            self.envs.move_to_end(key)
            return self.envs[key]
        while len(self.envs) >= self.max_stacks:
            _, old = self.envs.popitem(last=False)
            old.close()
        domain, idem = key
        env = UndoBenchEnv(
            domain,
            runtime=self.runtime,
            server_idempotency=idem,
            max_steps=self.max_steps,
            http_timeout=self.http_timeout,
        )
        self.envs[key] = env
        if started is not None:
            env.adopt_runtime(started)
        return env

    def discard(self, key: StackKey) -> None:
        env = self.envs.pop(key, None)
        if env is not None:
            with contextlib.suppress(Exception):
                env.close()

    def keys_lru(self) -> list[StackKey]:
        return list(self.envs)

    def close(self) -> None:
        while self.envs:
            _, env = self.envs.popitem()
            with contextlib.suppress(Exception):
                env.close()


@dataclass(frozen=True)
class SharedControl:
    pair_id: str  # the pair that ran it
    control: dict[str, Any]
    exceptions: int  # the agent's exceptions during it
    #: a model agent's replies in it, replayed to the fault episodes that send the same
    #: requests (`pairing.run_pair`)
    replies: dict[str, Any] = field(default_factory=dict)


class ControlCache:
    """Shared control episodes by `TrialTask.control_key`, the most
    recent `size` kept: the scheduler hands a worker a control group's pairs in a row."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._kept: OrderedDict[tuple[Any, ...], SharedControl] = OrderedDict()

    def get(self, key: tuple[Any, ...] | None) -> SharedControl | None:
        if key is None or key not in self._kept:
            return None
        self._kept.move_to_end(key)
        return self._kept[key]

    def put(self, key: tuple[Any, ...], control: SharedControl) -> None:
        self._kept[key] = control
        self._kept.move_to_end(key)
        while len(self._kept) > self.size:
            self._kept.popitem(last=False)


class TrialWorker:
    """Owns stack pools (one per runtime and step budget) and agents (one per spec)."""

    def __init__(self, name: str, *, max_stacks: int, trial_timeout: float | None) -> None:
        self.name = name
        self.max_stacks = max_stacks
        self.trial_timeout = trial_timeout
        # Each episode gets a soft share of the trial's time: an agent past it ends
        # truncated (its failure, scored). The hard alarm at the full timeout stays for
        # what is not the agent's (a harness or a call that hangs).
        self.episode_time_limit = trial_timeout * EPISODE_SHARE if trial_timeout else None
        self.pools: dict[tuple[str, int, float], StackPool] = {}
        self.agents: dict[tuple[str, str | None], Any] = {}
        self.controls = ControlCache()
        self.prestarts: dict[tuple[str, str], Prestart] = {}  # by (runtime, domain)

    def hold(self, runtime_kind: str, waiting: Prestart) -> None:
        """Keep a stack being started for the next pair of its domain on `runtime_kind`."""
        key = (runtime_kind, waiting.runtime.domain)
        if key in self.prestarts:
            self.prestarts.pop(key).close()
        self.prestarts[key] = waiting

    def _prestarted(self, task: TrialTask, out: Outcome) -> Runtime | None:
        """The pair's stack if one was started for it and started well (noted in `out`)."""
        waiting = self.prestarts.pop((task.runtime, task.domain), None)
        early = waiting.take() if waiting is not None else None
        if waiting is not None and early is not None:
            out.prestarted, out.prestart_s = True, waiting.took_s
        return early

    def _agent(self, spec: str, framework: str | None) -> Any:
        key = (spec, framework)
        if key not in self.agents:
            self.agents[key] = make_agent(spec, framework=framework)
        return self.agents[key]

    def _pool(self, task: TrialTask) -> StackPool:
        key = (task.runtime, task.max_steps, task.http_timeout)
        if key not in self.pools:
            self.pools[key] = StackPool(
                task.runtime, task.max_steps, self.max_stacks, task.http_timeout
            )
        return self.pools[key]

    def held(self) -> list[StackKey]:
        return [k for pool in self.pools.values() for k in pool.keys_lru()]

    def run(self, task: TrialTask, attempt: int) -> Outcome:
        t0 = time.monotonic()
        out = Outcome(task.pair_id, attempt, worker=self.name)
        try:  # not infrastructure: a bad spec would fail every attempt the same way
            inner = self._agent(task.agent, task.framework)
            wf = find_workflow(task.workflow, task.domain)
            scenario = wf.scenario(task.scenario)
        except Exception as exc:
            out.error_kind, out.error = USAGE, f"{type(exc).__name__}: {exc}"
            return out
        pool = self._pool(task)
        agent = GuardedAgent(inner)
        stats = getattr(inner, "stats", None)
        before = dict(stats) if isinstance(stats, dict) else None
        shared = self.controls.get(task.control_key)
        ran: list[tuple[dict[str, Any], int]] = []  # the control this pair ran, if any
        replies: dict[str, Any] = shared.replies if shared else {}
        try:
            started = time.monotonic()
            out.setup_s = round(started - t0, 3)
            env = pool.get(task.stack_key, self._prestarted(task, out))
            env.runtime  # noqa: B018 - starts the stack; its own start timeout applies
            out.stack_s = round(time.monotonic() - started, 3)
            with alarm(self.trial_timeout):
                record = run_pair(
                    wrap(env, task.method),
                    agent,
                    workflow=wf,
                    scenario=scenario,
                    seed=task.seed,
                    method=task.method,
                    runtime=task.runtime,
                    model=getattr(inner, "model", None),
                    framework=task.framework or getattr(inner, "framework", None),
                    episode_time_limit=self.episode_time_limit,
                    control=copy.deepcopy(shared.control) if shared else None,
                    on_control=lambda c: ran.append((copy.deepcopy(c), agent.exceptions)),
                    replies=replies,
                )
            record["agent_exceptions"] = agent.exceptions + (shared.exceptions if shared else 0)
            if shared is not None:
                record["control_from"] = shared.pair_id
            elif ran and task.control_key is not None:
                self.controls.put(
                    task.control_key, SharedControl(task.pair_id, *ran[0], replies=replies)
                )
            config = getattr(inner, "config", None)
            if callable(getattr(config, "record", None)):  # an LLM agent's settings
                record["agent_config"] = config.record()  # type: ignore[union-attr]
            if before is not None:  # an LLM agent's counts over this pair (tokens, calls)
                after = dict(inner.stats)
                record["agent_stats"] = {k: after[k] - before.get(k, 0) for k in sorted(after)}
            # Whether the method can act on this pair at all (B2 without a keyed target
            # behaves as B0): contrasts between methods use the applicable pairs only.
            schemas = workflow_schemas(wf, server_idempotency_for(task.method))
            record["method_applicable"] = applicable(task.method, schemas, scenario.target.tool)
            out.record = record
        except TrialTimeout as exc:
            out.error_kind, out.error = TIMEOUT, str(exc)
        except StackStartError as exc:
            out.error_kind, out.error = STACK_START, f"{type(exc).__name__}: {exc}"
        except StackUnhealthyError as exc:
            out.error_kind, out.error = STACK_UNHEALTHY, f"{type(exc).__name__}: {exc}"
        except ProviderUnavailable as exc:
            out.error_kind, out.error = PROVIDER, f"{type(exc).__name__}: {exc}"
        except UndoBenchError as exc:
            out.error_kind, out.error = USAGE, f"{type(exc).__name__}: {exc}"
        except Exception as exc:
            out.error_kind, out.error = HARNESS, f"{type(exc).__name__}: {exc}"
        if out.error_kind not in (None, USAGE, PROVIDER):
            pool.discard(task.stack_key)  # the retry gets a fresh stack
        out.held = self.held()
        out.wall_s = round(time.monotonic() - t0, 3)
        return out

    def close(self) -> None:
        for waiting in self.prestarts.values():
            waiting.close()
        self.prestarts.clear()
        for pool in self.pools.values():
            pool.close()
        self.pools.clear()
