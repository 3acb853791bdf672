"""What the HTML report shows of each pair: one compact table row (the fields the filters
use) and one detail object (the pair viewer: both episodes step by step, the fault point,
wrapper actions, harms and the final state difference).

Everything here is computed from the trial record alone, so a report can be rebuilt from
trials.jsonl at any time. The steps themselves are `steps`' job; here the commit log's
rows get their harms by the verdict's effect identities (a display aid: the verdict
itself comes from the oracles).
"""

from __future__ import annotations

from typing import Any

from undobench_gym.contract.specs import InvariantResult, Verdict
from undobench_gym.evaluation.html.steps import (
    HARM_NAME,
    Episode,
    as_dict,
    episode_cells,
    placed_harms,
    short,
    wire_text,
)
from undobench_gym.evaluation.indicators import is_infra_error
from undobench_gym.evaluation.records import (
    EpisodeLike,
    PairLike,
    as_episode,
    as_record,
    as_written,
)

#: The harms a fault episode's verdict can list, in the order the viewer shows them.
HARMS = ("duplicates", "unrequired", "missing", "partial", "forbidden")
#: Columns of a table row, in order (the page keeps rows as arrays to stay small).
ROW_COLUMNS = (
    "pair_id",
    "workflow",
    "scenario",
    "boundary",
    "method",
    "model",
    "seed",
    "control",
    "fault",
    "harms",
    "as_planned",
)


def _episode(ep: EpisodeLike | None) -> Episode | None:
    """The episode as a model; None for none (or an empty dict: no episode recorded)."""
    return as_episode(ep) if ep else None


def episode_outcome(ep: EpisodeLike | None) -> str:
    """One word for the outcome filter: infra_error, succeeded, gave_up, truncated, failed."""
    e = _episode(ep)
    if e is None or e.error:
        return "infra_error"
    if e.success:
        return "succeeded"
    if e.truncated:
        return "truncated"
    if e.finish_status == "gave_up":
        return "gave_up"
    return "failed"


def _listed(verdict: Verdict | None) -> dict[str, list[Any] | None]:
    """The verdict's lists of each harm (HARMS), None where the verdict does not list it (no
    verdict; one written before `unrequired` existed)."""
    if verdict is None:
        return dict.fromkeys(HARMS)
    lists: dict[str, list[Any]] = {
        "duplicates": verdict.duplicates,
        "unrequired": verdict.unrequired,
        "missing": verdict.missing,
        "partial": verdict.partial,
        "forbidden": verdict.forbidden,
    }
    return {k: lists[k] if k in verdict.model_fields_set else None for k in HARMS}


def harms_of(ep: EpisodeLike | None) -> list[str]:
    """The harm kinds the episode's verdict (or, for older records, its counts) lists."""
    e = _episode(ep)
    if e is None:
        return []
    counts = {  # the effect counts of each harm, where the record has them
        "duplicates": e.effects.duplicates,
        "unrequired": e.effects.unrequired,
        "missing": e.effects.missing,
        "partial": e.effects.partial,
        "forbidden": e.effects.forbidden,
    }
    out = []
    for key, listed in _listed(e.verdict).items():
        if listed or (listed is None and counts[key]):
            out.append(HARM_NAME[key])
    return out


def table_row(pair: PairLike) -> list[Any]:
    """The pair's row, in ROW_COLUMNS order."""
    p = as_record(pair)
    fault = p.fault
    planned = fault.fault_outcome.as_planned if fault.fault_outcome is not None else None
    return [
        p.pair_id,
        p.workflow,
        p.scenario,
        p.boundary,
        p.method,
        p.model,
        p.seed,
        "infra_error" if is_infra_error(p) else episode_outcome(p.control),
        "infra_error" if is_infra_error(p) else episode_outcome(fault),
        harms_of(fault),
        planned,
    ]


def _commit_rows(ep: Episode) -> list[dict[str, Any]]:
    """The commit log with each row's harm: a duplicate past the required count, an
    unrequired or forbidden effect."""
    if ep.commit_log is None:
        return []
    verdict = ep.verdict
    seen: dict[int, int] = {}
    rows = []
    # The commit log's rows and the verdict's effects are dicts in the schema.
    for r in ep.commit_log:
        identity = as_dict(r.get("identity"))
        harm = []
        for j, dup in enumerate(verdict.duplicates if verdict is not None else []):
            if dup.get("op") == r.get("op") and as_dict(dup.get("identity")) == identity:
                seen[j] = seen.get(j, 0) + 1
                if seen[j] > int(dup.get("required") or 1):
                    harm.append("duplicate")
        for key, items in placed_harms(verdict):
            for item in items:
                same_op = item.get("op") in (None, r.get("op"))
                if same_op and as_dict(item.get("identity")) == identity:
                    harm.append(HARM_NAME[key])
        rows.append(
            {
                "seq": r.get("seq"),
                "op": r.get("op"),
                "cls": r.get("effect_class"),
                "identity": short(identity, 300),
                "key": r.get("idempotency_key"),
                "comp": bool(r.get("compensation")),
                "harm": harm,
            }
        )
    return rows


def _effect_key(row: dict[str, Any]) -> str:
    return f"{row.get('op')} {short(as_dict(row.get('identity')), 300)}"


def _invariants(ep: Episode | None) -> list[InvariantResult]:
    return ep.verdict.invariants if ep is not None and ep.verdict is not None else []


def state_difference(control: EpisodeLike | None, fault: EpisodeLike | None) -> dict[str, Any]:
    """How the fault episode's final state differs from the control's: the state hash,
    the committed effects one has more of than the other, and invariants that differ."""
    c, f = _episode(control), _episode(fault)
    counts: dict[str, list[int]] = {}
    for side, ep in ((0, c), (1, f)):
        for row in (ep.commit_log if ep is not None else None) or []:
            counts.setdefault(_effect_key(row), [0, 0])[side] += 1
    inv_c = {i.description: i for i in _invariants(c)}
    invariants = []
    for inv in _invariants(f):
        other = inv_c.get(inv.description)
        other_passed = other.passed if other is not None else None
        other_actual = other.actual if other is not None else None
        if inv.passed != other_passed or inv.actual != other_actual:
            invariants.append(
                {
                    "description": inv.description,
                    "expected": short(inv.expected, 120),
                    "control": short(other_actual, 120),
                    "fault": short(inv.actual, 120),
                    "passed": inv.passed,
                }
            )
    hc = c.state_hash if c is not None else None
    hf = f.state_hash if f is not None else None
    return {
        "same_state": None if hc is None or hf is None else hc == hf,
        "effects": [
            {"effect": k, "control": n[0], "fault": n[1]}
            for k, n in sorted(counts.items())
            if n[0] != n[1]
        ],
        "invariants": invariants,
    }


def _verdict(ep: Episode) -> dict[str, Any]:
    listed = _listed(ep.verdict)
    return {
        "outcome": episode_outcome(ep),
        "success": ep.success,
        "finish_status": ep.finish_status,
        "error": ep.error,
        "effects": as_written(ep.effects),
        "harms": {HARM_NAME[k]: [short(x, 300) for x in v] for k, v in listed.items() if v},
    }


def _fault_point(fault: Episode, cells: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What the agent saw at the fault against what happened on the wire and in the
    commit log."""
    record = fault.fault or {}  # the fault's record and the wire's events: dicts
    if not record and fault.fault_outcome is None:
        return None
    hit = next((c for c in cells if c.get("fault")), None)
    index = record.get("index")
    event = next((e for e in fault.wire or [] if e.get("index") == index), None)
    outcome = fault.fault_outcome
    return {
        "step": hit["n"] if hit else None,
        "saw": hit["o"] if hit else None,
        "wire": wire_text(event),
        "committed": record.get("committed"),
        "record": short(record, 400),
        "outcome": as_written(outcome) if outcome is not None else None,
        "fired": fault.fault_fired,
    }


def pair_detail(pair: PairLike, domain_tools: dict[str, str] | None = None) -> dict[str, Any]:
    """The pair viewer's data for one pair (see the module doc). `domain_tools` maps the
    domain's tool names to `read`, `compensation` or `mutation` (from the catalogue), to
    tell a wrapper's probes and compensations apart from its other calls."""
    tools = domain_tools or {}
    p = as_record(pair)
    control, fault = p.control, p.fault
    left, right = episode_cells(control, tools), episode_cells(fault, tools)
    shared = 0
    while shared < min(len(left), len(right)) and left[shared].get("id") == right[shared].get("id"):
        shared += 1
    for cell in (*left, *right):
        cell.pop("id", None)
    head = {
        "pair_id": p.pair_id,
        "workflow": p.workflow,
        "scenario": p.scenario,
        "boundary": p.boundary,
        "domain": p.domain,
        "split": p.split,
        "seed": p.seed,
        "method": p.method,
        "model": p.model,
        "agent": p.agent,
        "framework": p.framework,
        "prefix_equivalent": p.prefix_equivalent,
        "method_applicable": p.method_applicable,
    }
    return {
        "head": head,
        "transcripts": control.transcript is not None or fault.transcript is not None,
        "control": left,
        "fault": right,
        "shared": shared,
        "fault_point": _fault_point(fault, right),
        "commits": {"control": _commit_rows(control), "fault": _commit_rows(fault)},
        "diff": state_difference(control, fault),
        "verdict": {"control": _verdict(control), "fault": _verdict(fault)},
    }
