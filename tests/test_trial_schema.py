"""The trial record's schema: published, versioned, and enforced on write and on read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from undobench_gym.core.schema import SCHEMA_VERSION, VERSION_KEY, json_schema
from undobench_gym.core.trials import TrialFileError, TrialWriter, read_trials

from .evaluation.factories import trial

ROOT = Path(__file__).resolve().parents[1]


def test_the_published_json_schema_is_the_models() -> None:
    published = json.loads((ROOT / "docs" / "trials.schema.json").read_text())
    assert published == json_schema(), (
        "regenerate: python -m undobench_gym.core.schema > docs/trials.schema.json"
    )


def _record() -> dict[str, Any]:
    record: dict[str, Any] = trial()
    return record


def test_a_written_record_carries_the_version_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "trials.jsonl"
    with TrialWriter(path) as w:
        w.write(_record())
    (back,) = read_trials(path)
    assert back[VERSION_KEY] == SCHEMA_VERSION


def test_a_record_that_does_not_fit_is_refused_on_write(tmp_path: Path) -> None:
    bad = _record()
    bad["fault"]["effects"]["duplicates"] = "two"
    with TrialWriter(tmp_path / "trials.jsonl") as w, pytest.raises(TrialFileError) as err:
        w.write(bad)
    assert "fault.effects.duplicates" in str(err.value)
    assert (tmp_path / "trials.jsonl").read_text() == ""  # nothing half-written


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ('{"pair_id": "x"', "not a JSON line"),
        ("[1, 2]", "a JSON object"),
        (None, "schema version 2"),
        ("{}", "pair_id"),
    ],
)
def test_a_line_that_does_not_fit_is_reported_with_its_number(
    tmp_path: Path, line: str | None, why: str
) -> None:
    good = json.dumps(_record())
    if line is None:
        line = json.dumps({**_record(), VERSION_KEY: 2})
    path = tmp_path / "trials.jsonl"
    path.write_text(f"{good}\n{good}\n{line}\n{good}\n")
    with pytest.raises(TrialFileError) as err:
        read_trials(path)
    assert f"{path}:3:" in str(err.value) and why in str(err.value)


def test_records_from_before_the_version_read_as_version_1(tmp_path: Path) -> None:
    old = _record()
    old.pop(VERSION_KEY, None)
    path = tmp_path / "trials.jsonl"
    path.write_text(json.dumps(old) + "\n")
    assert read_trials(path) == [old]


def test_every_committed_run_of_the_study_fits_the_schema() -> None:
    runs = sorted((ROOT / "studies").glob("*/runs/*/trials.jsonl"))
    assert runs
    for path in runs:
        assert read_trials(path), path
