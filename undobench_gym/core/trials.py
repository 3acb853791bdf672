"""trials.jsonl: one pair per line, appended, flushed and fsynced per line; resumable.

Every record is checked against the schema (`core.schema`) when it is written and when it
is read back; a line that does not fit is reported with its number."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from undobench_gym.contract.errors import UndoBenchError
from undobench_gym.core.schema import SCHEMA_VERSION, VERSION_KEY, PairRecord


class TrialFileError(UndoBenchError):
    """A trial record this build cannot take: broken JSON, another schema version, or a
    record that does not fit the schema."""


def check_record(record: Any, where: str) -> None:
    """Raise `TrialFileError` naming `where` (file:line, or the pair) unless `record` is a
    pair record of this schema version."""
    if not isinstance(record, dict):
        raise TrialFileError(
            f"{where}: a trial record is a JSON object, not {type(record).__name__}"
        )
    version = record.get(VERSION_KEY, SCHEMA_VERSION)  # records before versioning: 1
    if version != SCHEMA_VERSION:
        raise TrialFileError(
            f"{where}: schema version {version!r}; this build reads version {SCHEMA_VERSION}"
        )
    try:
        PairRecord.model_validate(record)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(part) for part in first["loc"]) or "(record)"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise TrialFileError(f"{where}: {loc}: {first['msg']}{more}") from None


def read_trials(path: Path) -> list[dict[str, Any]]:
    return list(iter_trials(path))


def iter_trials(path: Path) -> Iterator[dict[str, Any]]:
    """The records of `path`, each checked; a last line that a crash cut short is not a
    trial and is left out."""
    if not path.exists():
        return
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.endswith("\n"):
                return  # a line cut short by a crash is not a trial
            line = line.strip()
            if not line:
                continue
            where = f"{path}:{number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TrialFileError(f"{where}: not a JSON line ({exc.msg})") from None
            check_record(record, where)
            yield record


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
        trial.setdefault(VERSION_KEY, SCHEMA_VERSION)
        check_record(trial, f"pair {trial['pair_id']}")
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
