"""`undobench inspect DIR --pair ID`: one pair's two transcripts side by side, the fault
point marked, and each episode's effect history (its commit-log ops)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from undobench_gym.contract.errors import UndoBenchError
from undobench_gym.core.schema import EpisodeRecord, PairRecord
from undobench_gym.evaluation.outcomes import faulted_position
from undobench_gym.evaluation.records import (
    PairLike,
    as_record,
    as_records,
    recorded,
    writer_calls,
)

MARK = "⚡ FAULT"


def find_pair(trials: Sequence[PairLike], pair: str) -> PairRecord:
    """By exact pair id, else by a unique prefix."""
    records = as_records(trials)
    exact = [t for t in records if t.pair_id == pair]
    if exact:
        return exact[0]
    found = [t for t in records if t.pair_id.startswith(pair)]
    if len(found) == 1:
        return found[0]
    if not found:
        raise UndoBenchError(f"no pair {pair!r} in this run ({len(records)} pairs)")
    ids = ", ".join(t.pair_id for t in found[:5])
    raise UndoBenchError(f"{pair!r} matches {len(found)} pairs ({ids}, …): give more of the id")


def _short(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _action(entry: dict[str, Any] | None, limit: int) -> str:
    if entry is None:
        return ""
    action = entry.get("action")
    if isinstance(action, dict):
        return f"{action.get('tool')}({_short(action.get('arguments', {}), limit)})"
    return _short(action, limit)


def _observation(entry: dict[str, Any] | None, limit: int) -> str:
    if entry is None:
        return ""
    obs = entry.get("observation")
    if not isinstance(obs, dict):
        return _short(obs, limit)
    if isinstance(obs.get("error"), dict):
        err = obs["error"]
        return f"{err.get('type')}: {err.get('kind') or err.get('message', '')}"
    if "status" in obs:
        return f"{obs['status']} {_short(obs.get('body'), limit)}"
    return _short(obs, limit)


def _verdict_line(name: str, ep: EpisodeRecord) -> str:
    fx = ep.effects  # a count the record lacks shows as None, as the record has it
    parts = [f"{name}: success={ep.success}"]
    parts += [f"{k}={recorded(fx, k)}" for k in ("physical", "committed", "semantic")]
    parts += [f"{k}={recorded(fx, k)}" for k in ("duplicates", "missing", "forbidden")]
    if name == "fault":
        parts.append(f"fault_fired={ep.fault_fired}")
    if ep.error:
        parts.append(f"error={ep.error}")
    return "  ".join(parts)


def _history(ep: EpisodeRecord) -> list[str]:
    rows = ep.commit_log  # the commit log's rows are dicts in the schema
    if rows is None:
        return ["(no commit log recorded)"]
    if not rows:
        return ["(nothing committed)"]
    out = []
    for r in rows:
        extra = " [compensation]" if r.get("compensation") else ""
        extra += f" [{r['actor']}]" if r.get("actor") else ""  # the concurrent writer's
        key = f" key={r['idempotency_key']}" if r.get("idempotency_key") else ""
        head = f"#{r.get('seq')} {r.get('op')} ({r.get('effect_class')})"
        out.append(f"{head} {r.get('identity')}{key}{extra}")
    return out


def render(pair: PairLike, console: Console, limit: int = 60) -> None:
    p = as_record(pair)
    ctrl, fault = p.control, p.fault
    console.print(
        f"pair {p.pair_id}: {p.workflow} / {p.scenario} "
        f"({p.boundary}), seed {p.seed}, method {p.method}, "
        f"agent {p.agent}, prefix_equivalent={p.prefix_equivalent}",
        markup=False,
        highlight=False,
    )
    a, b = ctrl.transcript, fault.transcript
    if a is None and b is None:
        console.print("(no transcripts recorded: an imported reference row)")
    else:
        a, b = a or [], b or []
        hit = faulted_position(fault)
        table = Table(show_lines=True, expand=True)
        for col in (
            "step",
            "control action",
            "control observation",
            "",
            "fault action",
            "fault observation",
        ):
            table.add_column(col, overflow="fold")
        for i in range(max(len(a), len(b))):
            x = a[i] if i < len(a) else None
            y = b[i] if i < len(b) else None
            marked = i == hit
            table.add_row(
                str(i + 1),
                _action(x, limit),
                _observation(x, limit),
                MARK if marked else ("≠" if x and y and x != y else ""),
                _action(y, limit),
                _observation(y, limit),
                style="bold red" if marked else None,
            )
        console.print(table)
        if hit is None:
            console.print(
                "the fault did not fire in the fault episode"
                if not fault.fault_fired
                else "fault position unknown"
            )
    if fault.fault:
        console.print(
            f"fault record: {json.dumps(fault.fault, sort_keys=True)}",
            markup=False,
            highlight=False,
        )
    for name, ep in (("control", ctrl), ("fault", fault)):
        console.print(_verdict_line(name, ep), markup=False, highlight=False)
        console.print(f"  effect history ({name}):", markup=False)
        for line in _history(ep):
            console.print(f"    {line}", markup=False, highlight=False)
        for w in writer_calls(ep) or []:  # the concurrent writer's calls
            when = f"after call {w.after_call}" if w.after_call else "at the end"
            line = f"writer {when}: {w.tool} {json.dumps(w.arguments)} -> {w.status}"
            console.print(f"  {line}", markup=False, highlight=False)
