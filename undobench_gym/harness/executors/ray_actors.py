"""The Ray executor: a pool of actors, one per slot while the cluster has room for them,
each owning its stacks for its lifetime.

Ray never retries anything here: actors are created with `max_restarts=0` and
`max_task_retries=0`, because a re-executed method would re-send mutating calls to the
services behind our back. A dead actor or a trial past its deadline comes back as an
infrastructure error, the actor is killed and replaced, and the driver's retry policy
decides (the same policy as the local executor). Results stream back to the driver, which
alone writes trials.jsonl.

Nodes can die. An actor whose node is gone (its raylet died, the machine went away)
first becomes unreachable; Ray's control store declares the node dead some seconds later
(about 14 s on one machine, its health checks). Its pair comes back `INTERRUPTED`, not as
a failed attempt: the driver runs it again first, elsewhere, without using an attempt
(after `MAX_NODE_LOSSES` node losses on one pair it does count as `WORKER_DIED`). An actor
that died on a live node is the pair's `WORKER_DIED`, as before.

Slots are the driver's; actors are the cluster's. A slot's pair runs on the first free
actor that has started (the one that ran the slot's last pair, holding its stacks, if it is
free), so when a node's CPUs are gone the pairs of every slot share the actors left, one
pair per actor at a time: nothing is lost and nothing waits on an actor that cannot be
placed. While pairs wait, missing actors are created again (Ray places them when CPUs come
back, and an autoscaler sees them as demand); one that has not started within
`start_timeout` is killed and created afresh, and if no actor at all has started for that
long while pairs wait, the sweep stops with an `UndoBenchError` (recorded pairs are kept;
`--resume` runs the rest).

`address=None` starts a local Ray bound to 127.0.0.1 (no dashboard, no usage reporting);
otherwise it connects to an existing cluster, where every node needs this package
installed (the actors import it). A cluster on this machine must have been started on
loopback too (`RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 ray start --head
--node-ip-address=127.0.0.1`), or Ray advertises the machine's external address; see
docs/sweeps.md for worker nodes on loopback (`scripts/ray_local_cluster.sh`).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import socket
import sys
import time
import types
from dataclasses import dataclass, field
from typing import Any

from undobench_gym.contract.errors import UndoBenchError
from undobench_gym.core.runtime.warm import WARM
from undobench_gym.harness.executors.base import (
    INTERRUPTED,
    TIMEOUT,
    WORKER_DIED,
    Outcome,
    StackKey,
    TrialTask,
)
from undobench_gym.harness.executors.local import HARD_TIMEOUT_GRACE_S
from undobench_gym.harness.executors.worker import TrialWorker

#: How long a created actor may take to be placed and started before it is killed (and,
#: while pairs wait, created again); and how long pairs may wait with no actor started at
#: all before the sweep stops.
ACTOR_START_TIMEOUT_S = 300.0
#: How long an unreachable actor's node has to be declared dead (Ray's health checks: 5
#: failures 3 s apart by default, each up to 10 s for a host that does not answer) before
#: the pair counts as `WORKER_DIED` instead of `INTERRUPTED`.
NODE_VERDICT_S = 90.0
#: Node losses one pair may go through, re-run each time without using an attempt; past
#: that they count as `WORKER_DIED` (the retry policy then bounds it).
MAX_NODE_LOSSES = 3
#: Fresh actors that may fail in their constructor in a row before the sweep stops: one that
#: cannot even start (the package missing on a node) would fail every pair the same way.
MAX_INIT_FAILURES = 3
#: How often the node table is read while an actor is unreachable or pairs wait.
POLL_S = 0.5


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
        WARM.enable()  # its later stacks are forked from zygotes, as a local worker's

    def where(self) -> tuple[str, int]:
        """The node this actor was placed on, and its process id (answered once started)."""
        node: str = import_ray().get_runtime_context().get_node_id()
        return node, os.getpid()

    def run(self, task: dict[str, Any], attempt: int) -> dict[str, Any]:
        return self.worker.run(TrialTask(**task), attempt).to_dict()

    def pids(self) -> list[int]:
        return [os.getpid()]

    def close(self) -> None:
        self.worker.close()
        WARM.close()


@dataclass(eq=False)
class _Actor:
    handle: Any
    name: str
    ready_ref: Any  # `where()`: resolves once Ray placed and started the actor
    created: float
    node: str | None = None  # set once started
    pid: int = 0
    slot: _Slot | None = None  # whose pair it runs now
    held: tuple[StackKey, ...] = ()


@dataclass(eq=False)
class _Lost:
    """An actor that stopped answering mid-pair: is its node gone?"""

    node: str | None
    since: float
    error: str
    actor: str


@dataclass(eq=False)
class _Slot:
    index: int
    task: TrialTask | None = None
    attempt: int = 0
    queued: float = 0.0  # handed to us by the driver
    started: float = 0.0  # sent to an actor: the trial's clock
    actor: _Actor | None = None  # running its pair
    ref: Any = None
    home: _Actor | None = None  # ran its last pair, so holds the stacks it reports
    generation: int = 0
    lost: _Lost | None = None

    @property
    def waiting(self) -> bool:
        return self.task is not None and self.actor is None and self.lost is None


@dataclass
class NodeLoss:
    """A node that died under this executor: when that was learned, and what it took."""

    node: str
    first_error: float  # monotonic: its first actor stopped answering
    declared: float  # monotonic: Ray declared it dead
    pairs: list[str] = field(default_factory=list)  # re-run (INTERRUPTED)
    actors: int = 0  # actors lost with it


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


def loopback_ray_cli(argv: list[str] | None = None) -> None:
    """Ray's own CLI (`ray start ...`, `ray status ...`) with every address kept on
    127.0.0.1, for a cluster of several nodes on one machine.

    Ray 2.60 keeps a loopback address only with `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`,
    and with that setting its `ray start` refuses to start a worker node ("Multi-node Ray
    clusters are not supported on Windows and OSX"); without it, `--address=127.0.0.1:P`
    and `--node-ip-address=127.0.0.1` both become the machine's external address. This sets
    the variable (for every process the command starts) and lifts that one check of the
    CLI's: `python -c 'from undobench_gym.harness.executors.ray_actors import
    loopback_ray_cli; loopback_ray_cli()' start --address=127.0.0.1:P
    --node-ip-address=127.0.0.1 ...` (scripts/ray_local_cluster.sh)."""
    _loopback_only()
    constants = importlib.import_module("ray._private.ray_constants")
    scripts: Any = importlib.import_module("ray.scripts.scripts")
    # The CLI reads the guard from its own module global; everything else (addresses) reads
    # the real constant, which stays off.
    scripts.ray_constants = types.SimpleNamespace(**{**vars(constants), "ENABLE_RAY_CLUSTER": True})
    sys.argv = ["ray", *(sys.argv[1:] if argv is None else argv)]
    scripts.main()


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
        start_timeout: float = ACTOR_START_TIMEOUT_S,
        node_verdict: float = NODE_VERDICT_S,
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
        self.start_timeout, self.node_verdict = start_timeout, node_verdict
        self._actor_cls = ray.remote(max_restarts=0, max_task_retries=0, num_cpus=1)(StackActor)
        self._slots = [_Slot(i) for i in range(workers)]
        self._actors: list[_Actor] = []
        self.replaced = 0  # actors that died, were killed or went with their node
        self.interrupted = 0  # pairs handed back to run again after a node loss
        self.node_losses: list[NodeLoss] = []
        self._dead_nodes: set[str] = set()
        self._losses: dict[str, int] = {}  # node losses per pair
        self._init_failures = 0
        self._stalled_since: float | None = None
        self._alive: dict[str, bool] = {}
        self._alive_at = -1.0

    # ---- the driver's side ---------------------------------------------------------------

    def idle(self) -> list[int]:
        return [s.index for s in self._slots if s.task is None]

    def held(self, slot: int) -> list[StackKey]:
        home = self._slots[slot].home
        return list(home.held) if home is not None and home in self._actors else []

    def submit(self, slot: int, task: TrialTask, attempt: int) -> None:
        s = self._slots[slot]
        s.task, s.attempt, s.queued = task, attempt, time.monotonic()
        s.actor = s.ref = s.lost = None
        self._dispatch()

    def wait(self, timeout: float) -> list[Outcome]:
        if not any(s.task is not None for s in self._slots):
            return []
        self._dispatch()
        now = time.monotonic()
        running = {s.ref: s for s in self._slots if s.ref is not None}
        starting = {a.ready_ref: a for a in self._actors if a.node is None}
        deadlines = [a.created + self.start_timeout for a in starting.values()]
        if self.trial_timeout:
            deadlines += [s.started + self.trial_timeout + self.grace for s in running.values()]
        if any(s.lost is not None or s.waiting for s in self._slots):
            deadlines.append(now + POLL_S)
        if deadlines:
            timeout = max(0.0, min(timeout, min(deadlines) - now))
        refs = [*running, *starting]
        ready: list[Any] = []
        if refs:
            ready, rest = self.ray.wait(refs, num_returns=1, timeout=timeout)
            if ready and rest:  # pick up whatever else has finished too, without waiting
                ready += self.ray.wait(rest, num_returns=len(rest), timeout=0)[0]
        else:
            time.sleep(timeout)
        outcomes: list[Outcome] = []
        for ref in ready:
            if ref in starting:
                self._started(starting[ref])
            else:
                self._finished(running[ref], outcomes)
        self._judge_lost(outcomes)
        self._enforce_deadlines(outcomes)
        self._dispatch()  # freed actors take waiting pairs before the driver refills
        if not outcomes:  # the driver gets what finished before the sweep stops
            self._check_stall()
        return outcomes

    def pids(self) -> list[int]:
        live = [a.handle for a in self._actors if a.node is not None]
        return [p for pids in self.ray.get([a.pids.remote() for a in live]) for p in pids]

    def close(self) -> None:
        idle = [a for a in self._actors if a.node is not None and a.slot is None]
        if idle:
            with contextlib.suppress(Exception):
                refs = [a.handle.close.remote() for a in idle]
                self.ray.wait(refs, num_returns=len(refs), timeout=30)
        for a in list(self._actors):
            self._drop(a)
        for s in self._slots:
            s.task = s.actor = s.ref = s.lost = s.home = None
        if self._owns_ray:
            self.ray.shutdown()

    # ---- actors --------------------------------------------------------------------------

    def _create(self, s: _Slot) -> None:
        s.generation += 1
        name = f"actor-{s.index}.{s.generation}"
        handle = self._actor_cls.options(max_concurrency=1).remote(
            name, self.max_stacks, self.trial_timeout
        )
        self._actors.append(_Actor(handle, name, handle.where.remote(), time.monotonic()))

    def _drop(self, a: _Actor) -> None:
        with contextlib.suppress(Exception):
            self.ray.kill(a.handle, no_restart=True)
        if a in self._actors:
            self._actors.remove(a)
        if a.slot is not None and a.slot.actor is a:
            a.slot.actor = a.slot.ref = None
        a.slot = None

    def _started(self, a: _Actor) -> None:
        try:
            a.node, a.pid = self.ray.get(a.ready_ref)
        except self.ray.exceptions.RayError as exc:
            self._drop(a)
            if getattr(exc, "actor_init_failed", False):
                self._init_failures += 1
                if self._init_failures >= MAX_INIT_FAILURES:
                    raise UndoBenchError(
                        f"{self._init_failures} Ray actors in a row failed to start: {exc}. "
                        "Every node needs this package (the same version), its "
                        "dependencies and a writable temporary directory."
                    ) from None
            return  # its node died before it started: created again while pairs wait
        self._init_failures = 0
        if a.node in self._dead_nodes:
            self._drop(a)

    def _free_actor(self, s: _Slot) -> _Actor | None:
        """The slot's own actor if it is free, else one holding the pair's stack, else any
        free one that has started."""
        free = [a for a in self._actors if a.node is not None and a.slot is None]
        if not free or s.task is None:
            return None
        if s.home in free:
            return s.home
        key = s.task.stack_key
        return next((a for a in free if key in a.held), free[0])

    def _dispatch(self) -> None:
        """Send waiting pairs (oldest first) to free actors; create the actors that are
        missing for the pairs still waiting."""
        waiting = sorted((s for s in self._slots if s.waiting), key=lambda s: s.queued)
        for s in list(waiting):
            a = self._free_actor(s)
            if a is None:
                continue
            assert s.task is not None
            a.slot, s.actor, s.home, s.started = s, a, a, time.monotonic()
            s.ref = a.handle.run.remote(s.task.__dict__, s.attempt)
            waiting.remove(s)
        starting = sum(1 for a in self._actors if a.node is None)
        for s in waiting[starting:]:
            if len(self._actors) >= self.slots:
                break
            self._create(s)

    # ---- what went wrong -----------------------------------------------------------------

    def _outcome(self, s: _Slot, kind: str, message: str, worker: str) -> Outcome:
        assert s.task is not None
        out = Outcome(s.task.pair_id, s.attempt, error_kind=kind, error=message)
        out.worker = worker
        out.wall_s = round(time.monotonic() - (s.started or s.queued), 3)
        s.task = s.actor = s.ref = s.lost = None
        return out

    def _fail(self, s: _Slot, kind: str, message: str) -> Outcome:
        a = s.actor
        assert a is not None
        self._drop(a)
        self.replaced += 1
        return self._outcome(s, kind, message, a.name)

    def _finished(self, s: _Slot, outcomes: list[Outcome]) -> None:
        a = s.actor
        assert a is not None
        try:
            out = Outcome.from_dict(self.ray.get(s.ref))
        except self.ray.exceptions.RayError as exc:
            message = f"Ray actor {a.name} failed: {exc}"[:2000]
            errors = self.ray.exceptions
            if not isinstance(exc, errors.RayActorError) or (
                isinstance(exc, errors.ActorDiedError)
                and (a.node is None or self._node_alive(a.node, fresh=True))
            ):
                outcomes.append(self._fail(s, WORKER_DIED, message))
                return
            # Unreachable (it, or its node, is gone), or dead with its node: `_judge_lost`.
            self._drop(a)
            self.replaced += 1
            s.lost = _Lost(a.node, time.monotonic(), message, a.name)
            return
        a.held, a.slot = tuple(out.held), None
        s.task = s.actor = s.ref = None
        outcomes.append(out)

    def _node_alive(self, node: str, *, fresh: bool = False) -> bool:
        now = time.monotonic()
        if fresh or now - self._alive_at >= POLL_S:
            with contextlib.suppress(Exception):
                self._alive = {n["NodeID"]: bool(n["Alive"]) for n in self.ray.nodes()}
                self._alive_at = now
        return self._alive.get(node, False) if self._alive else True

    def _judge_lost(self, outcomes: list[Outcome]) -> None:
        """Pairs whose actor stopped answering: `INTERRUPTED` once Ray declares its node
        dead; `WORKER_DIED` if the node still lives after `node_verdict` seconds."""
        now = time.monotonic()
        for s in self._slots:
            lost = s.lost
            if lost is None or s.task is None:
                continue
            if lost.node is not None and not self._node_alive(lost.node):
                self._node_died(lost.node, lost.since)
                loss = next(x for x in self.node_losses if x.node == lost.node)
                pair = s.task.pair_id
                self._losses[pair] = self._losses.get(pair, 0) + 1
                why = (
                    f"its Ray node {lost.node[:12]} died ({now - lost.since:.1f} s after its "
                    "actor stopped answering)"
                )
                if self._losses[pair] > MAX_NODE_LOSSES:
                    message = f"{why}, the {self._losses[pair]}th time for this pair"
                    outcomes.append(self._outcome(s, WORKER_DIED, message, lost.actor))
                    continue
                loss.pairs.append(pair)
                self.interrupted += 1
                outcomes.append(self._outcome(s, INTERRUPTED, f"{why}: run again", lost.actor))
            elif now - lost.since > self.node_verdict:
                outcomes.append(
                    self._outcome(
                        s,
                        WORKER_DIED,
                        f"{lost.error} (its node still answers {self.node_verdict:g} s later)",
                        lost.actor,
                    )
                )

    def _node_died(self, node: str, first_error: float) -> None:
        if node in self._dead_nodes:
            return
        self._dead_nodes.add(node)
        loss = NodeLoss(node, first_error, time.monotonic())
        for a in [a for a in self._actors if a.node == node]:
            self._drop(a)  # idle ones: their next pair would only find them dead
            self.replaced += 1
            loss.actors += 1
        loss.actors += sum(1 for s in self._slots if s.lost and s.lost.node == node)
        self.node_losses.append(loss)

    def node_losses_record(self) -> list[dict[str, Any]]:
        """The nodes lost so far, for `run_meta.json`: which, how long Ray took to declare
        each dead after its first actor stopped answering, and the pairs and actors it took."""
        return [
            {
                "node": loss.node,
                "declared_after_s": round(loss.declared - loss.first_error, 1),
                "pairs_rerun": sorted(loss.pairs),
                "actors": loss.actors,
            }
            for loss in self.node_losses
        ]

    def _enforce_deadlines(self, outcomes: list[Outcome]) -> None:
        now = time.monotonic()
        for s in self._slots:
            if (
                s.actor is not None
                and self.trial_timeout
                and now > s.started + self.trial_timeout + self.grace
            ):
                outcomes.append(
                    self._fail(
                        s,
                        TIMEOUT,
                        f"the trial ran past its {self.trial_timeout:g}s timeout and the "
                        f"actor did not answer {self.grace:g}s later: actor killed",
                    )
                )
        for a in [a for a in self._actors if a.node is None]:
            if now > a.created + self.start_timeout:
                self._drop(a)  # never placed (no CPU left) or stuck starting

    def _check_stall(self) -> None:
        """Pairs wait and no actor has started for `start_timeout`: the cluster has no room
        for one (its nodes are gone, or others hold every CPU)."""
        if not any(s.waiting for s in self._slots) or any(a.node is not None for a in self._actors):
            self._stalled_since = None
            return
        now = time.monotonic()
        if self._stalled_since is None:
            self._stalled_since = now
        elif now - self._stalled_since > self.start_timeout:
            cpus = 0.0
            with contextlib.suppress(Exception):
                cpus = sum(
                    float(n.get("Resources", {}).get("CPU", 0))
                    for n in self.ray.nodes()
                    if n.get("Alive")
                )
            lost = f"; {len(self.node_losses)} node(s) died during this sweep" * bool(
                self.node_losses
            )
            raise UndoBenchError(
                f"no Ray actor could start for {self.start_timeout:g} s: the cluster's live "
                f"nodes have {cpus:g} CPU(s) and each actor needs 1 free{lost}. Recorded "
                "pairs are kept: add nodes (or free CPUs), then run the same command with "
                "--resume"
            )
