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
from typing import Any

from undobench_gym.evaluation.indicators import Pair, fault_outcome, is_infra_error

SINGLE = "single"


def schedule(p: Pair) -> str:
    """The pair's schedule kind: `single`, or `cascade/<scenario>` for a cascade (its
    scenario id names the cascade's family, the same in every domain)."""
    kind = p.get("schedule") or SINGLE
    return SINGLE if kind == SINGLE else f"{kind}/{p.get('scenario')}"


def has_cascades(pairs: list[Pair]) -> bool:
    return any(schedule(p) != SINGLE for p in pairs)


def fault_counts(pairs: list[Pair]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """{schedule: {method: [per fault: boundary, fired (as planned), of (pairs), and why
    the others missed]}} over the valid cascade and concurrent-writer pairs (a writer's
    pair: its one fault, then `writer`: fault episodes whose writer acted at its trigger,
    not at the end)."""
    acc: dict[tuple[str, str, int], dict[str, Any]] = {}
    for p in pairs:
        if is_infra_error(p) or schedule(p) == SINGLE:
            continue
        outcome = fault_outcome(p) or {}
        faults = outcome.get("faults") or [{"fault": 0, "boundary": p.get("boundary"), **outcome}]
        writer = (p.get("fault") or {}).get("writer")
        if writer is not None:
            acted = bool(writer) and writer[0].get("after_call") is not None
            reason = None if acted else ("at_end" if writer else "never_acted")
            faults = [
                *faults,
                {"fault": len(faults), "boundary": "writer", "as_planned": acted, "reason": reason},
            ]
        for f in faults:
            key = (schedule(p), str(p.get("method")), int(f["fault"]))
            row = acc.setdefault(
                key,
                {"fault": key[2], "boundary": f.get("boundary"), "fired": 0, "of": 0},
            )
            row["of"] += 1
            if f.get("as_planned"):
                row["fired"] += 1
            else:
                reasons: Counter[str] = row.setdefault("missed", Counter())
                reasons[str(f.get("reason") or "unspecified")] += 1
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
