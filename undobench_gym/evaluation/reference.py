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
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from undobench_gym.contract.errors import UndoBenchError
from undobench_gym.contract.seeding import stable_id
from undobench_gym.core.schema import PairRecord
from undobench_gym.core.trials import TrialWriter
from undobench_gym.evaluation.records import PairLike, as_record, as_records

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
    """The CSV rows under `path` as trial records (dicts, as `TrialWriter` writes them;
    `reference_records` has them as models)."""
    for f in csv_files(path):
        study = study_of(f)
        with f.open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
            if missing:
                raise UndoBenchError(f"{f}: not a paired-trial CSV; missing {', '.join(missing)}")
            for line, row in enumerate(reader, start=2):
                yield convert_row(row, study, f"{f}:{line}")


def reference_records(path: Path) -> list[PairRecord]:
    """The CSV rows under `path` as trial records, as the evaluation reads them."""
    return as_records(iter_records(path))


def import_reference(path: Path, out: Path) -> dict[str, int]:
    """Write DIR/trials.jsonl (appending, skipping pair ids already there); returns counts."""
    rows = list(iter_records(path))  # parse everything first: a bad row writes nothing
    with TrialWriter(out / "trials.jsonl") as writer:
        before = len(writer.done)
        for r in rows:
            writer.write(r)  # a pair id already written is skipped (and not counted)
        written = len(writer.done) - before
    return {"rows": len(rows), "written": written, "files": len(csv_files(path))}


# --- the published data's known defects, and the figures without them --------------------

#: The reference's README: in RB-CLOUD-004 the fault never fired (a per-tool call counter
#: bug), and RB-STOR-005's control never succeeded (a bug fixed after the data were made).
NEVER_FIRED = "RB-CLOUD-004"
FAILED_CONTROL = "RB-STOR-005"
HEADLINE = "rb3c_test_summary.json"


def no_trace_of_fault(records: Sequence[PairLike]) -> bool:
    """Whether NEVER_FIRED's rows agree with a fault that never fired: there are some, and
    every fault run ended as its control did, with no duplicate and no missing effect. (In
    the during-mutation study its fault runs duplicated: there it fired, and is kept.)"""
    rows = [r for r in as_records(records) if r.workflow == NEVER_FIRED]
    return bool(rows) and all(
        r.fault.success == r.control.success
        and not r.fault.effects.duplicates
        and not r.fault.effects.missing
        for r in rows
    )


def caveat(record: PairLike, never_fired: bool) -> str | None:
    """Which known defect a reference record falls under, or None."""
    r = as_record(record)
    if never_fired and r.workflow == NEVER_FIRED:
        return f"{NEVER_FIRED}: fault never fired"
    if r.workflow == FAILED_CONTROL and not r.control.success:
        return f"{FAILED_CONTROL}: control failed"
    return None


def adjusted(records: Sequence[PairLike]) -> tuple[list[PairRecord], dict[str, int]]:
    """One study's records without the defective rows, and how many rows each defect
    took out (the records kept are the ones given, as models)."""
    given = as_records(records)
    never_fired = no_trace_of_fault(given)
    kept: list[PairRecord] = []
    dropped: dict[str, int] = {}
    for r in given:
        why = caveat(r, never_fired)
        if why is None:
            kept.append(r)
        else:
            dropped[why] = dropped.get(why, 0) + 1
    return kept, dropped


def _pooled(tasks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    pairs = sum(int(t["pairs"]) for t in tasks)
    ctrl = sum(int(t["ctrl_success"]) for t in tasks)
    fault = sum(int(t["fault_success"]) for t in tasks)
    both = sum(int(t["crsr_success"]) for t in tasks)
    counts = {"control_rate": (ctrl, pairs), "rsr": (fault, pairs), "crsr": (both, ctrl)}
    return {
        k: {"num": n, "den": d, "value": round(n / d, 6) if d else None}
        for k, (n, d) in counts.items()
    }


def headline(root: Path) -> dict[str, Any] | None:
    """The headline study's pooled figures (TEST split, methods B0/B2/B5 together) as
    published and adjusted, from its per-task counts (its rows were never published):
    without RB-CLOUD-004 where its counts show no trace of the fault (every fault run
    succeeded exactly where the control did) and without RB-STOR-005's failed controls
    (and any fault success among them). `printed` is what the summary itself printed."""
    path = root / HEADLINE
    if not path.is_file():
        return None
    summary = json.loads(path.read_text(encoding="utf-8"))
    by_task = summary["by_task"]
    kept: list[dict[str, Any]] = []
    dropped: dict[str, int] = {}
    detail: dict[str, str] = {}
    for task, t in sorted(by_task.items()):
        n, ctrl = int(t["pairs"]), int(t["ctrl_success"])
        if task == NEVER_FIRED and int(t["fault_success"]) == int(t["crsr_success"]) == ctrl:
            dropped[f"{NEVER_FIRED}: fault never fired"] = n
            detail[NEVER_FIRED] = (
                f"{n} pairs; {t['crsr_success']} of its {ctrl} capable pairs counted as recovered"
            )
            continue
        if task == FAILED_CONTROL and ctrl < n:
            dropped[f"{FAILED_CONTROL}: control failed"] = n - ctrl
            detail[FAILED_CONTROL] = f"{n} pairs; control succeeded in {ctrl}"
            t = {**t, "pairs": ctrl, "fault_success": t["crsr_success"]}
        kept.append(t)
    primary = summary["primary_outcomes"]
    names = {
        "control_rate": "p1_ctrl_success_rate",
        "rsr": "p2_unconditional_rsr",
        "crsr": "p3_conditional_crsr",
    }
    return {
        "published": _pooled(list(by_task.values())),
        "adjusted": _pooled(kept),
        "dropped": dropped,
        "detail": detail,
        "printed": {k: float(primary[v]["rate"]) for k, v in names.items()},
        "tasks": sorted(by_task),
    }
