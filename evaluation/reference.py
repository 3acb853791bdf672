"""Import the reference implementation's paired-trial CSVs (`PairedTrialVerdict` rows).

One CSV row is one pair; it becomes one trial record with the reference's own codes for
methods (`recovery_code`), models (`model_code`) and frameworks (`framework_code`). What
the rows support, per the contract: D from `ctrl_success`, F from `fault_success`,
duplicates from `duplicate_effects > 0`, missing from `missing_effects > 0`. Everything
else (forbidden, unrequired and partial effects, re-issues, whether the fault fired,
transcripts, wire and commit logs) is null, so the metrics that need it are reported as
null, never guessed. The rows have no `fault_outcome` and no `finish_status` (the fields
are left out, not null: a null finish status would mean "truncated"), so conditioning on
faults that happened as planned does not apply and the aware rates are unsupported
wherever the fault run succeeded: the summary says so.
`committed_mutations` is always 0 in the reference (a known defect): also null here.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from undobench_gym.errors import UndoBenchError
from undobench_gym.seeding import stable_id
from undobench_gym.trials import TrialWriter

REQUIRED = (
    "task_id",
    "model_code",
    "framework_code",
    "recovery_code",
    "trial_index",
    "ctrl_success",
    "fault_success",
    "duplicate_effects",
    "missing_effects",
)
#: Fault boundaries of the published studies, as their README states them; a study not
#: listed here gets boundary null (the keys-everywhere study does not say).
STUDY_BOUNDARIES = {
    "contemporary_models": "POST_MUTATION_PRE_ACK",
    "rb7n10_pre_mutation": "PRE_MUTATION",
    "rb7n10_during_mutation": "DURING_MUTATION",
}
KEPT = (
    "model_id",
    "framework_id",
    "recovery_method",
    "agent_outcome",
    "recovery_outcome",
    "ctrl_failure_class",
    "fault_failure_class",
    "conditional_recovery_success",
)


def _bool(value: str, where: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "1"):
        return True
    if v in ("false", "0"):
        return False
    raise UndoBenchError(f"{where}: expected True/False, got {value!r}")


def _int(value: str, where: str) -> int:
    try:
        return int(float(value))
    except ValueError:
        raise UndoBenchError(f"{where}: expected a number, got {value!r}") from None


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value not in (None, "") else None
    except ValueError:
        return None


def study_of(path: Path) -> str:
    """`<study>/raw/matrix.csv` → study; a loose file → its stem."""
    if path.parent.name == "raw" and path.parent.parent.name:
        return path.parent.parent.name
    return path.stem


def _episode(success: bool, wall_ms: float | None, **effects: int | None) -> dict[str, Any]:
    fx: dict[str, int | None] = dict.fromkeys(
        (
            "physical",
            "committed",
            "semantic",
            "duplicates",
            "missing",
            "forbidden",
            "unrequired",
            "partial",
        ),
        None,
    )
    fx["reissued_after_commit"] = None
    fx.update(effects)
    return {
        "success": success,
        "verdict": None,
        "steps": None,
        "transcript": None,
        "state_hash": None,
        "effects": fx,
        "fault_fired": None,
        "fault": None,
        "wire": None,
        "commit_log": None,
        "wall_ms": wall_ms,
        "error": None,
    }


def convert_row(row: dict[str, str], study: str, where: str) -> dict[str, Any]:
    missing = [c for c in REQUIRED if c not in row]
    if missing:
        raise UndoBenchError(f"{where}: missing columns {', '.join(missing)}")
    task, model, framework = row["task_id"], row["model_code"], row["framework_code"]
    method, seed = row["recovery_code"], _int(row["trial_index"], f"{where} trial_index")
    pid = row.get("pair_id") or stable_id("ref", study, task, model, framework, method, seed)
    fault = _episode(
        _bool(row["fault_success"], f"{where} fault_success"),
        _float(row.get("fault_duration_ms")),
        duplicates=_int(row["duplicate_effects"], f"{where} duplicate_effects"),
        missing=_int(row["missing_effects"], f"{where} missing_effects"),
    )
    return {
        "pair_id": pid,
        "workflow": task,
        "domain": row.get("domain") or None,
        "split": None,
        "kind": None,
        "seed": seed,
        "method": method,
        "agent": "reference",
        "model": model,
        "framework": framework,
        "runtime": "reference",
        "scenario": study,
        "boundary": STUDY_BOUNDARIES.get(study),
        "ambiguous": None,
        "prefix_equivalent": None,
        "control": _episode(
            _bool(row["ctrl_success"], f"{where} ctrl_success"),
            _float(row.get("ctrl_duration_ms")),
        ),
        "fault": fault,
        "reference": {"study": study, **{k: row.get(k) for k in KEPT}},
    }


def csv_files(path: Path) -> list[Path]:
    """PATH itself, or every CSV under it whose header has the paired-trial columns."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise UndoBenchError(f"{path} is neither a CSV file nor a directory")
    out = []
    for f in sorted(path.rglob("*.csv")):
        with f.open(newline="", encoding="utf-8") as fh:
            header = next(csv.reader(fh), [])
        if set(REQUIRED) <= set(header):
            out.append(f)
    if not out:
        raise UndoBenchError(f"no paired-trial CSV (columns {', '.join(REQUIRED)}) under {path}")
    return out


def iter_records(path: Path) -> Iterator[dict[str, Any]]:
    for f in csv_files(path):
        study = study_of(f)
        with f.open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
            if missing:
                raise UndoBenchError(f"{f}: not a paired-trial CSV; missing {', '.join(missing)}")
            for line, row in enumerate(reader, start=2):
                yield convert_row(row, study, f"{f}:{line}")


def import_reference(path: Path, out: Path) -> dict[str, int]:
    """Write DIR/trials.jsonl (appending, skipping pair ids already there); returns counts."""
    records = list(iter_records(path))  # parse everything first: a bad row writes nothing
    written = 0
    with TrialWriter(out / "trials.jsonl") as writer:
        for r in records:
            if r["pair_id"] not in writer.done:
                written += 1
            writer.write(r)
    return {"rows": len(records), "written": written, "files": len(csv_files(path))}
