"""trials.jsonl: one pair per line, appended, flushed and fsynced per line; resumable."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def read_trials(path: Path) -> list[dict[str, Any]]:
    return list(iter_trials(path))


def iter_trials(path: Path) -> Iterator[dict[str, Any]]:
    if not path.exists():
        return
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if not line.endswith("\n"):
                return  # a line cut short by a crash is not a trial
            line = line.strip()
            if line:
                yield json.loads(line)


def repair_tail(path: Path) -> None:
    """Drop a last line that a crash cut short, so appending starts on a clean line."""
    if not path.exists() or path.stat().st_size == 0:
        return
    data = path.read_bytes()
    if data.endswith(b"\n"):
        return
    cut = data.rfind(b"\n") + 1
    with path.open("r+b") as fh:
        fh.truncate(cut)


class TrialWriter:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        repair_tail(path)
        self.path = path
        self.done = {t["pair_id"] for t in iter_trials(path)}
        self._fh = path.open("a", encoding="utf-8")

    def write(self, trial: dict[str, Any]) -> None:
        if trial["pair_id"] in self.done:
            return
        self._fh.write(json.dumps(trial, sort_keys=True, default=str) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self.done.add(trial["pair_id"])

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> TrialWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
