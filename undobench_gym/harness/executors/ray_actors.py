"""The Ray executor: one actor per slot, each owning its stacks for its lifetime.

Ray never retries anything here: actors are created with `max_restarts=0` and
`max_task_retries=0`, because a re-executed method would re-send mutating calls to the
services behind our back. A dead actor or a trial past its deadline comes back as an
infrastructure error, the actor is killed and replaced, and the driver's retry policy
decides (the same policy as the local executor). Results stream back to the driver, which
alone writes trials.jsonl.

`address=None` starts a local Ray bound to 127.0.0.1 (no dashboard, no usage reporting);
otherwise it connects to an existing cluster, where every node needs this package
installed (the actors import it). A cluster on this machine must have been started on
loopback too (`RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 ray start --head
--node-ip-address=127.0.0.1`), or Ray advertises the machine's external address.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import socket
import sys
import time
from dataclasses import dataclass
from typing import Any

from undobench_gym.contract.errors import UndoBenchError
from undobench_gym.harness.executors.base import TIMEOUT, WORKER_DIED, Outcome, StackKey, TrialTask
from undobench_gym.harness.executors.local import HARD_TIMEOUT_GRACE_S
from undobench_gym.harness.executors.worker import TrialWorker


def import_ray() -> Any:
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise UndoBenchError(
            "--executor ray needs Ray: pip install 'undobench-gym[ray]' "
            "(or .venv/bin/pip install 'ray[default]')"
        ) from None


class StackActor:
    """The actor body (Ray wraps it with `ray.remote` in `RayExecutor`)."""

    def __init__(self, name: str, max_stacks: int, trial_timeout: float | None) -> None:
        self.worker = TrialWorker(name, max_stacks=max_stacks, trial_timeout=trial_timeout)

    def run(self, task: dict[str, Any], attempt: int) -> dict[str, Any]:
        return self.worker.run(TrialTask(**task), attempt).to_dict()

    def pids(self) -> list[int]:
        return [os.getpid()]

    def close(self) -> None:
        self.worker.close()


@dataclass
class _Slot:
    index: int
    actor: Any = None
    ref: Any = None
    task: TrialTask | None = None
    attempt: int = 0
    started: float = 0.0
    generation: int = 0
    held: tuple[StackKey, ...] = ()


def _is_loopback(address: str | None) -> bool:
    host = (address or "").removeprefix("ray://").rsplit(":", 1)[0].strip("[]")
    return address is None or host in ("localhost", "::1") or host.startswith("127.")


def _check_reachable(address: str) -> None:
    """Fail fast: Ray itself retries an absent GCS for minutes."""
    if "://" in address or ":" not in address:
        return  # ray://…, "auto": Ray resolves those
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=3).close()
    except (OSError, ValueError) as exc:
        raise UndoBenchError(
            f"no Ray cluster answers at {address} ({exc}): start one "
            "(`ray start --head ...`) or leave out --ray-address to start a local Ray"
        ) from None


def _loopback_only() -> None:
    """Keep Ray on 127.0.0.1: by default it swaps a loopback address for the node's
    external one (and listens on all interfaces); never phone home either. Set before
    Ray reads its constants, and patched in case Ray was imported already."""
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    if "ray" in sys.modules:
        constants: Any = importlib.import_module("ray._private.ray_constants")
        constants.ENABLE_RAY_CLUSTER = False


class RayExecutor:
    name = "ray"

    def __init__(
        self,
        workers: int,
        *,
        address: str | None,
        max_stacks: int,
        trial_timeout: float | None,
        grace: float = HARD_TIMEOUT_GRACE_S,
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be at least 1")
        os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
        if _is_loopback(address):
            _loopback_only()
        ray = self.ray = import_ray()
        self._owns_ray = False
        if not ray.is_initialized():
            if address:
                _check_reachable(address)
                try:
                    ray.init(address=address, log_to_driver=False, configure_logging=False)
                except (ConnectionError, ray.exceptions.RayError) as exc:
                    raise UndoBenchError(
                        f"cannot reach the Ray cluster at {address}: {exc}. Is it running "
                        "(`ray status --address ...`)? A cluster with token authentication "
                        "needs RAY_AUTH_MODE=token here too."
                    ) from None
            else:
                ray.init(
                    num_cpus=workers,
                    include_dashboard=False,
                    _node_ip_address="127.0.0.1",
                    log_to_driver=False,
                    configure_logging=False,
                )
                self._owns_ray = True
        self.slots = workers
        self.max_stacks, self.trial_timeout, self.grace = max_stacks, trial_timeout, grace
        self._actor_cls = ray.remote(max_restarts=0, max_task_retries=0, num_cpus=1)(StackActor)
        self._slots = [_Slot(i) for i in range(workers)]
        self.replaced = 0

    def _start(self, s: _Slot) -> None:
        s.generation += 1
        s.actor = self._actor_cls.options(max_concurrency=1).remote(
            f"actor-{s.index}.{s.generation}", self.max_stacks, self.trial_timeout
        )
        s.held = ()

    def _kill(self, s: _Slot) -> None:
        if s.actor is not None:
            with contextlib.suppress(Exception):
                self.ray.kill(s.actor, no_restart=True)
        s.actor = s.ref = None
        s.held = ()

    def idle(self) -> list[int]:
        return [s.index for s in self._slots if s.task is None]

    def held(self, slot: int) -> list[StackKey]:
        return list(self._slots[slot].held)

    def submit(self, slot: int, task: TrialTask, attempt: int) -> None:
        s = self._slots[slot]
        if s.actor is None:
            self._start(s)
        s.task, s.attempt, s.started = task, attempt, time.monotonic()
        s.ref = s.actor.run.remote(task.__dict__, attempt)

    def _fail(self, s: _Slot, kind: str, message: str) -> Outcome:
        assert s.task is not None
        out = Outcome(s.task.pair_id, s.attempt, error_kind=kind, error=message)
        out.worker = f"actor-{s.index}.{s.generation}"
        out.wall_s = round(time.monotonic() - s.started, 3)
        self._kill(s)
        self.replaced += 1
        s.task = None
        return out

    def wait(self, timeout: float) -> list[Outcome]:
        busy = {s.ref: s for s in self._slots if s.task is not None}
        if not busy:
            return []
        if self.trial_timeout:
            deadline = min(s.started + self.trial_timeout + self.grace for s in busy.values())
            timeout = max(0.0, min(timeout, deadline - time.monotonic()))
        refs = [s.ref for s in busy.values()]
        ready, rest = self.ray.wait(refs, num_returns=1, timeout=timeout)
        if ready and rest:  # pick up whatever else has finished too, without waiting
            ready += self.ray.wait(rest, num_returns=len(rest), timeout=0)[0]
        outcomes: list[Outcome] = []
        for ref in ready:
            s = busy.pop(ref)
            try:
                out = Outcome.from_dict(self.ray.get(ref))
            except self.ray.exceptions.RayError as exc:
                outcomes.append(self._fail(s, WORKER_DIED, f"Ray actor failed: {exc}"[:2000]))
                continue
            s.held, s.task, s.ref = tuple(out.held), None, None
            outcomes.append(out)
        now = time.monotonic()
        for s in busy.values():
            if self.trial_timeout and now > s.started + self.trial_timeout + self.grace:
                outcomes.append(
                    self._fail(
                        s,
                        TIMEOUT,
                        f"the trial ran past its {self.trial_timeout:g}s timeout and the "
                        f"actor did not answer {self.grace:g}s later: actor killed",
                    )
                )
        return outcomes

    def pids(self) -> list[int]:
        live = [s.actor for s in self._slots if s.actor is not None]
        return [p for pids in self.ray.get([a.pids.remote() for a in live]) for p in pids]

    def close(self) -> None:
        idle = [s for s in self._slots if s.actor is not None and s.task is None]
        if idle:
            with contextlib.suppress(Exception):
                self.ray.get([s.actor.close.remote() for s in idle], timeout=30)
        for s in self._slots:
            self._kill(s)
            s.task = None
        if self._owns_ray:
            self.ray.shutdown()
