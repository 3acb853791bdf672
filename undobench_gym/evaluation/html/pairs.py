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

from undobench_gym.evaluation.html.steps import (
    HARM_NAME,
    Episode,
    as_dict,
    episode_cells,
    short,
    wire_text,
)
from undobench_gym.evaluation.indicators import Pair, is_infra_error

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


def episode_outcome(ep: Episode | None) -> str:
    """One word for the outcome filter: infra_error, succeeded, gave_up, truncated, failed."""
    if not ep or ep.get("error"):
        return "infra_error"
    if ep.get("success"):
        return "succeeded"
    if ep.get("truncated"):
        return "truncated"
    if ep.get("finish_status") == "gave_up":
        return "gave_up"
    return "failed"


def harms_of(ep: Episode | None) -> list[str]:
    """The harm kinds the episode's verdict (or, for older records, its counts) lists."""
    if not ep:
        return []
    verdict = ep.get("verdict") or {}
    effects = ep.get("effects") or {}
    out = []
    for key in HARMS:
        listed = verdict.get(key)
        if listed or (listed is None and effects.get(key)):
            out.append(HARM_NAME[key])
    return out


def table_row(pair: Pair) -> list[Any]:
    """The pair's row, in ROW_COLUMNS order."""
    fault = pair.get("fault") or {}
    planned = (fault.get("fault_outcome") or {}).get("as_planned")
    return [
        pair.get("pair_id"),
        pair.get("workflow"),
        pair.get("scenario"),
        pair.get("boundary"),
        pair.get("method"),
        pair.get("model"),
        pair.get("seed"),
        "infra_error" if is_infra_error(pair) else episode_outcome(pair.get("control")),
        "infra_error" if is_infra_error(pair) else episode_outcome(fault),
        harms_of(fault),
        planned,
    ]


def _commit_rows(ep: Episode | None) -> list[dict[str, Any]]:
    """The commit log with each row's harm: a duplicate past the required count, an
    unrequired or forbidden effect."""
    if not ep or ep.get("commit_log") is None:
        return []
    verdict = ep.get("verdict") or {}
    seen: dict[int, int] = {}
    rows = []
    for r in ep["commit_log"]:
        identity = as_dict(r.get("identity"))
        harm = []
        for j, dup in enumerate(verdict.get("duplicates") or []):
            if dup.get("op") == r.get("op") and as_dict(dup.get("identity")) == identity:
                seen[j] = seen.get(j, 0) + 1
                if seen[j] > int(dup.get("required") or 1):
                    harm.append("duplicate")
        for key in ("unrequired", "forbidden"):
            for item in verdict.get(key) or []:
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


def state_difference(control: Episode | None, fault: Episode | None) -> dict[str, Any]:
    """How the fault episode's final state differs from the control's: the state hash,
    the committed effects one has more of than the other, and invariants that differ."""
    c, f = control or {}, fault or {}
    counts: dict[str, list[int]] = {}
    for side, ep in ((0, c), (1, f)):
        for row in ep.get("commit_log") or []:
            counts.setdefault(_effect_key(row), [0, 0])[side] += 1
    inv_c = {i.get("description"): i for i in (c.get("verdict") or {}).get("invariants") or []}
    invariants = []
    for inv in (f.get("verdict") or {}).get("invariants") or []:
        other = inv_c.get(inv.get("description")) or {}
        if inv.get("passed") != other.get("passed") or inv.get("actual") != other.get("actual"):
            invariants.append(
                {
                    "description": inv.get("description"),
                    "expected": short(inv.get("expected"), 120),
                    "control": short(other.get("actual"), 120),
                    "fault": short(inv.get("actual"), 120),
                    "passed": inv.get("passed"),
                }
            )
    hc, hf = c.get("state_hash"), f.get("state_hash")
    return {
        "same_state": None if hc is None or hf is None else hc == hf,
        "effects": [
            {"effect": k, "control": n[0], "fault": n[1]}
            for k, n in sorted(counts.items())
            if n[0] != n[1]
        ],
        "invariants": invariants,
    }


def _verdict(ep: Episode | None) -> dict[str, Any]:
    if not ep:
        return {}
    v = ep.get("verdict") or {}
    return {
        "outcome": episode_outcome(ep),
        "success": ep.get("success"),
        "finish_status": ep.get("finish_status"),
        "error": ep.get("error"),
        "effects": ep.get("effects"),
        "harms": {HARM_NAME[k]: [short(x, 300) for x in v.get(k) or []] for k in HARMS if v.get(k)},
    }


def _fault_point(fault: Episode, cells: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What the agent saw at the fault against what happened on the wire and in the
    commit log."""
    record = fault.get("fault") or {}
    if not record and not fault.get("fault_outcome"):
        return None
    hit = next((c for c in cells if c.get("fault")), None)
    index = record.get("index")
    event = next((e for e in fault.get("wire") or [] if e.get("index") == index), None)
    return {
        "step": hit["n"] if hit else None,
        "saw": hit["o"] if hit else None,
        "wire": wire_text(event),
        "committed": record.get("committed"),
        "record": short(record, 400),
        "outcome": fault.get("fault_outcome"),
        "fired": fault.get("fault_fired"),
    }


def pair_detail(pair: Pair, domain_tools: dict[str, str] | None = None) -> dict[str, Any]:
    """The pair viewer's data for one pair (see the module doc). `domain_tools` maps the
    domain's tool names to `read`, `compensation` or `mutation` (from the catalogue), to
    tell a wrapper's probes and compensations apart from its other calls."""
    tools = domain_tools or {}
    control, fault = pair.get("control") or {}, pair.get("fault") or {}
    left, right = episode_cells(control, tools), episode_cells(fault, tools)
    shared = 0
    while shared < min(len(left), len(right)) and left[shared].get("id") == right[shared].get("id"):
        shared += 1
    for cell in (*left, *right):
        cell.pop("id", None)
    head = {
        k: pair.get(k)
        for k in (
            "pair_id",
            "workflow",
            "scenario",
            "boundary",
            "domain",
            "split",
            "seed",
            "method",
            "model",
            "agent",
            "framework",
            "prefix_equivalent",
            "method_applicable",
        )
    }
    return {
        "head": head,
        "transcripts": control.get("transcript") is not None or fault.get("transcript") is not None,
        "control": left,
        "fault": right,
        "shared": shared,
        "fault_point": _fault_point(fault, right),
        "commits": {"control": _commit_rows(control), "fault": _commit_rows(fault)},
        "diff": state_difference(control, fault),
        "verdict": {"control": _verdict(control), "fault": _verdict(fault)},
    }
