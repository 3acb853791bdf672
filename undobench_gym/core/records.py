"""The trial record of one finished episode: the one place its shape is written."""

from __future__ import annotations

from typing import Any

from undobench_gym.contract import CommitRow, WireEvent
from undobench_gym.core.boundaries import fault_record
from undobench_gym.core.episode import Episode

#: What the record keeps of each wire event and commit row (compact logs for the audits'
#: wire/commit consistency checks).
WIRE_KEYS = (
    "index",
    "tool",
    "method",
    "path",
    "read_only",
    "outcome",
    "status",
    "upstream_status",
    "forwarded",
)
COMMIT_KEYS = ("seq", "op", "effect_class", "identity", "idempotency_key", "compensation")


def _wire(events: list[WireEvent]) -> list[dict[str, Any]]:
    ordered = sorted(events, key=lambda e: e.index or 0)
    return [{k: getattr(e, k) for k in WIRE_KEYS} for e in ordered]


def _commits(rows: list[CommitRow]) -> list[dict[str, Any]]:
    """The rows, each tagged with its actor when it is not the agent's (the writer's)."""
    return [
        {
            **{k: getattr(r, k) for k in COMMIT_KEYS},
            **{k: getattr(r, k) for k in ("actor", "ref", "undoes") if getattr(r, k)},
        }
        for r in rows
    ]


def episode_record(ep: Episode) -> dict[str, Any]:
    """The trial-record view of a finished episode."""
    out = ep.outcome
    assert out is not None, "the episode has not finished"
    v = out.verdict
    # The concurrent writer's calls, only on the records of tasks that have one.
    writer = {"writer": ep.writer.log} if ep.writer is not None else {}
    return {
        "episode_id": ep.public_id,
        "success": v.success,
        "verdict": v.model_dump(),
        "steps": ep.steps,
        "transcript": ep.transcript,
        "state_hash": out.state_hash,
        "effects": {
            "physical": v.layers.physical,
            "committed": v.layers.committed,
            "semantic": v.layers.semantic,
            "duplicates": len(v.duplicates),
            "missing": len(v.missing),
            "forbidden": len(v.forbidden),
            "unrequired": len(v.unrequired),
            "partial": len(v.partial),
            "compensated": len(v.compensated),
            "reissued_after_commit": v.reissued_after_commit,
            "safe_reissues": v.safe_reissues,
        },
        "fault_fired": v.fault_fired,
        "fault": fault_record(ep.worker_crash, out.wire),
        "fault_outcome": out.fault_outcome,
        "finish_status": v.finish_status,
        "truncated": v.truncated,
        "truncated_reason": ep.truncated_reason,
        "wire": _wire(out.wire.events),
        "commit_log": _commits(out.commit_log),
        "hidden_commit_coin": ep.coin,
        "wall_ms": out.wall_ms,
        "error": None,
        **writer,
    }


def error_episode(message: str) -> dict[str, Any]:
    """The record of an episode that an infrastructure error kept from running."""
    return {
        "success": False,
        "verdict": None,
        "steps": 0,
        "transcript": [],
        "state_hash": None,
        "effects": {
            "physical": 0,
            "committed": 0,
            "semantic": 0,
            "duplicates": 0,
            "missing": 0,
            "forbidden": 0,
            "unrequired": 0,
            "partial": 0,
            "compensated": 0,
            "reissued_after_commit": 0,
            "safe_reissues": 0,
        },
        "fault_fired": None,
        "fault_outcome": None,
        "finish_status": None,
        "truncated": False,
        "truncated_reason": None,
        "wall_ms": 0,
        "error": message,
    }
