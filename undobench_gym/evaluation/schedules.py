"""Several faults per episode: what each fault of a schedule did, per method.

A cascade's pair records `schedule` ("cascade") and its fault episode's `fault_outcome`
lists every fault (`faults`: as planned or not, the mechanism, the reason it missed); a
concurrent writer's pair records `schedule` ("concurrent-writer"), one fault, and the
writer's calls in each episode (`writer`: at its trigger, or at the end). The
recovery metrics stay conditioned on the *first* fault, the one the pair is about; a later
fault that did not fire is a result, not an exclusion: a method that settled the first
fault without a re-send never makes the call the later fault waits for (B1 and B5 answer
a crashed worker's repeated steps themselves). Pairs written before schedules existed, and
every single-fault pair, read as `single`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from undobench_gym.evaluation.indicators import Pair, is_infra_error
from undobench_gym.evaluation.records import PairLike, as_record, as_records, writer_calls

SINGLE = "single"


class ScheduledFault(BaseModel):
    """One fault of a pair's schedule, as `fault_counts` counts it: an entry of a cascade's
    `fault_outcome.faults` (a dict in the schema, `core.boundaries.schedule_outcomes`; the
    fields not read here are left out), the one fault of `fault_outcome`, or a concurrent
    writer."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    fault: int
    boundary: str | None = None
    as_planned: bool | None = None
    reason: str | None = None


def _faults(p: Pair) -> list[ScheduledFault]:
    """The pair's faults in schedule order: a cascade's `fault_outcome.faults`, else the
    one fault of `fault_outcome`; a concurrent writer's pair adds the writer (as planned
    when it acted at its trigger)."""
    outcome = p.fault.fault_outcome
    if outcome is not None and outcome.faults:
        faults = [ScheduledFault.model_validate(f) for f in outcome.faults]
    else:
        faults = [
            ScheduledFault(
                fault=0,
                boundary=p.boundary,
                as_planned=outcome.as_planned if outcome is not None else None,
                reason=outcome.reason if outcome is not None else None,
            )
        ]
    writer = writer_calls(p.fault)
    if writer is not None:
        acted = bool(writer) and writer[0].after_call is not None
        reason = None if acted else ("at_end" if writer else "never_acted")
        faults.append(
            ScheduledFault(fault=len(faults), boundary="writer", as_planned=acted, reason=reason)
        )
    return faults


def schedule(p: PairLike) -> str:
    """The pair's schedule kind: `single`, or `cascade/<scenario>` for a cascade (its
    scenario id names the cascade's family, the same in every domain)."""
    r = as_record(p)
    kind = r.schedule or SINGLE
    return SINGLE if kind == SINGLE else f"{kind}/{r.scenario}"


def has_cascades(pairs: Sequence[PairLike]) -> bool:
    return any(schedule(p) != SINGLE for p in as_records(pairs))


def fault_counts(pairs: Sequence[PairLike]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """{schedule: {method: [per fault: boundary, fired (as planned), of (pairs), and why
    the others missed]}} over the valid cascade and concurrent-writer pairs (a writer's
    pair: its one fault, then `writer`: fault episodes whose writer acted at its trigger,
    not at the end)."""
    acc: dict[tuple[str, str, int], dict[str, Any]] = {}
    for p in as_records(pairs):
        if is_infra_error(p) or schedule(p) == SINGLE:
            continue
        for f in _faults(p):
            key = (schedule(p), str(p.method), f.fault)
            row = acc.setdefault(
                key,
                {"fault": key[2], "boundary": f.boundary, "fired": 0, "of": 0},
            )
            row["of"] += 1
            if f.as_planned:
                row["fired"] += 1
            else:
                reasons: Counter[str] = row.setdefault("missed", Counter())
                reasons[str(f.reason or "unspecified")] += 1
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for (kind, method, _k), row in sorted(acc.items()):
        if "missed" in row:
            row["missed"] = dict(sorted(row["missed"].items()))
        out.setdefault(kind, {}).setdefault(method, []).append(row)
    return out


def fault_lines(summary: dict[str, Any]) -> list[str]:
    """report.md: fired counts per fault of each schedule, per method (nothing for a run
    without cascades or writers)."""
    faults = summary.get("faults") or {}
    if not faults:
        return []
    lines = ["", "## Faults of each schedule", ""]
    lines += ["Fired as planned / pairs, per fault in schedule order (why the others did not)."]
    lines += ["", "| schedule | method | faults |", "|---|---|---|"]
    for kind, methods in faults.items():
        for method, rows in methods.items():
            cells = []
            for r in rows:
                why = ", ".join(f"{k} {v}" for k, v in (r.get("missed") or {}).items())
                cells.append(f"{r['fault']} {r['boundary']}: {r['fired']}/{r['of']}")
                cells[-1] += f" ({why})" if why else ""
            lines.append(f"| {kind} | {method} | {'<br>'.join(cells)} |")
    return lines
