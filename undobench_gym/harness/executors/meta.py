"""run_meta.json (the retry policy and what it did) and the sweep's progress bar.

The counts are recomputed from trials.jsonl at the end of every session, so they describe
the whole run however often it was resumed; each session (executor, workers, wall time)
is listed, and one the driver did not survive keeps `"finished": null`.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from undobench_gym.evaluation.run_meta import META_FILE, retry_counts
from undobench_gym.harness.executors.base import RetryPolicy


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _write_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


class RunMeta:
    def __init__(self, out: Path, retry: RetryPolicy, *, trial_timeout: float | None) -> None:
        self.path = out / META_FILE
        self.retry, self.trial_timeout = retry, trial_timeout
        self.data: dict[str, Any] = {}
        self._t0 = time.monotonic()

    def start(
        self,
        *,
        executor: str,
        workers: int,
        planned: int,
        lanes: int = 1,
        todo: int,
        http_timeout: float | None = None,
        shared_controls: bool = False,
        model_servers: dict[str, dict[str, object]] | None = None,
    ) -> None:
        try:
            previous = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            previous = {}
        self.data = {
            "retry_policy": self.retry.describe(),
            "trial_timeout_s": self.trial_timeout,
            "counts": previous.get("counts", {}),
            "sessions": [*previous.get("sessions", [])],
        }
        self.data["sessions"].append(
            {
                "started": _now(),
                "finished": None,
                "executor": executor,
                "workers": workers,
                "lanes": lanes,
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "planned_pairs": planned,
                "to_run": todo,
                "http_timeout_s": http_timeout,
                # The pairs of one workflow, method and seed ran one
                # control episode (records name it in `control_from`).
                "shared_controls": shared_controls,
                # `local:` agents: the model server the sweep ran (kind, build, model file,
                # slots), so a result names what produced it
                **({"model_servers": model_servers} if model_servers else {}),
            }
        )
        _write_atomic(self.path, self.data)

    def finish(
        self,
        *,
        written: int,
        replaced: int,
        trials: list[dict[str, Any]],
        phases: dict[str, Any] | None = None,
        cpu_s: float | None = None,
        node_losses: list[dict[str, Any]] | None = None,
        zygotes: str | None = None,
    ) -> None:
        """`zygotes`: where the stacks were forked from (`shared`: the driver's zygotes,
        `own`: each worker's, `off`); `phases`: start-up, steady state and tail
        (`executors.timeline`); `cpu_s`: the
        CPU time of the driver and everything it started, for CPU per pair and cores busy;
        `node_losses`: the cluster nodes that died during the session and what they took
        (`ray_actors.NodeLoss`)."""
        session = self.data["sessions"][-1]
        wall = time.monotonic() - self._t0
        session.update(
            finished=_now(),
            written=written,
            workers_replaced=replaced,
            wall_s=round(wall, 2),
            pairs_per_s=round(written / wall, 3) if wall > 0 else None,
        )
        if cpu_s is not None:
            session.update(
                cpu_s=round(cpu_s, 1),
                cpu_per_pair_s=round(cpu_s / written, 4) if written else None,
                cores_busy=round(cpu_s / wall, 2) if wall > 0 else None,
            )
        if phases:
            session["phases"] = phases
        if zygotes:
            session["zygotes"] = zygotes
        if node_losses:
            session["node_losses"] = node_losses
        self.data["counts"] = retry_counts(trials)
        _write_atomic(self.path, self.data)


class _Rate(ProgressColumn):
    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("-.-- pairs/s" if speed is None else f"{speed:.2f} pairs/s", style="cyan")


class Bar:
    def __init__(self, progress: Progress | None, task: Any) -> None:
        self.progress, self.task = progress, task
        self.retries = self.infra = 0

    def _status(self) -> None:
        if self.progress is not None:
            self.progress.update(
                self.task, status=f"retries {self.retries} · infra errors {self.infra}"
            )

    def advance(self, *, infra: bool = False) -> None:
        self.infra += infra
        if self.progress is not None:
            self.progress.advance(self.task)
        self._status()

    def note(self, *, retries: int) -> None:
        self.retries = retries
        self._status()


@contextlib.contextmanager
def progress_bar(enabled: bool, *, total: int, done: int) -> Iterator[Bar]:
    """A rich bar on stderr with rate and ETA (nothing at all when disabled)."""
    if not enabled:
        yield Bar(None, None)
        return
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        _Rate(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        TextColumn("{task.fields[status]}", style="dim"),
    )
    with Progress(*columns, console=Console(stderr=True), speed_estimate_period=120) as p:
        task = p.add_task("paired trials", total=total, completed=done, status="")
        bar = Bar(p, task)
        bar._status()
        yield bar
