"""What a verdict rests on, pair by pair: the projection two runs of the same pairs must
agree on (same seeds on another runtime, or the code before and after a change), and its
digest, which a re-run reproduces although timings and paths differ."""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from undobench_gym.core.schema import EpisodeRecord, PairRecord
from undobench_gym.evaluation.records import (
    EpisodeLike,
    PairLike,
    as_episode,
    as_records,
    as_written,
    recorded,
)

FIELDS = ("success", "finish_status", "truncated", "effects", "fault_fired", "state_hash")
OUTCOME = ("as_planned", "mechanism", "coin")


def verdict(episode: EpisodeLike) -> dict[str, Any]:
    """Success, finish status, truncation, effect counts, whether and how the fault fired,
    the final state's hash and every action and observation of the episode. A field the
    record lacks is null (as the record has it: never the model's default), so that the
    digest of a run does not depend on the build that reads it."""
    ep = as_episode(episode)
    out: dict[str, Any] = {
        "success": ep.success,
        "finish_status": recorded(ep, "finish_status"),
        "truncated": recorded(ep, "truncated"),
        "effects": as_written(ep.effects),
        "fault_fired": recorded(ep, "fault_fired"),
        "state_hash": recorded(ep, "state_hash"),
    }
    outcome = ep.fault_outcome
    out["fault_outcome"] = {
        "as_planned": outcome.as_planned if outcome is not None else None,
        "mechanism": outcome.mechanism if outcome is not None else None,
        "coin": outcome.coin if outcome is not None else None,
    }
    transcript = ep.transcript or []  # its steps are dicts in the schema
    out["actions"] = [t["action"] for t in transcript]
    out["observations"] = [t["observation"] for t in transcript]
    return out


def _episodes(record: PairRecord) -> tuple[tuple[str, EpisodeRecord], ...]:
    return (("control", record.control), ("fault", record.fault))


def _errored(record: PairRecord) -> bool:
    return any(ep.error for _, ep in _episodes(record))


def compare(a: Iterable[PairLike], b: Iterable[PairLike]) -> dict[str, Any]:
    """The pairs both runs recorded, matched by pair id; every field that differs, with up
    to five pair ids each. Pairs with an infrastructure error on either side are skipped
    (and counted): they carry no verdict."""
    ra = {r.pair_id: r for r in as_records(a)}
    rb = {r.pair_id: r for r in as_records(b)}
    common = sorted(ra.keys() & rb.keys())
    errors = [p for p in common if _errored(ra[p]) or _errored(rb[p])]
    diffs: dict[str, list[str]] = defaultdict(list)
    for pid in common:
        if pid in errors:
            continue
        for (arm, ea), (_, eb) in zip(_episodes(ra[pid]), _episodes(rb[pid]), strict=True):
            va, vb = verdict(ea), verdict(eb)
            for key in va:
                if va[key] != vb[key]:
                    diffs[f"{arm}.{key}"].append(pid)
    differing = {p for ps in diffs.values() for p in ps}
    return {
        "old_pairs": len(ra),
        "new_pairs": len(rb),
        "compared": len(common) - len(errors),
        "skipped_infra_errors": len(errors),
        "identical": len(common) - len(errors) - len(differing),
        "differences": {k: {"pairs": len(v), "examples": v[:5]} for k, v in sorted(diffs.items())},
    }


def digest(records: Iterable[PairLike]) -> str:
    """sha256 over every pair's id and verdicts, in pair-id order: equal for two runs of the
    same pairs that reached the same verdicts (wall times, paths and dates left out)."""
    rows = sorted(
        (r.pair_id, {arm: verdict(ep) for arm, ep in _episodes(r)}) for r in as_records(records)
    )
    h = hashlib.sha256()
    for pid, v in rows:
        h.update(json.dumps([pid, v], sort_keys=True, separators=(",", ":")).encode())
        h.update(b"\n")
    return h.hexdigest()
