"""What a verdict rests on, pair by pair: the projection two runs of the same pairs must
agree on (same seeds on another runtime, or the code before and after a change), and its
digest, which a re-run reproduces although timings and paths differ."""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

FIELDS = ("success", "finish_status", "truncated", "effects", "fault_fired", "state_hash")
OUTCOME = ("as_planned", "mechanism", "coin")


def verdict(episode: dict[str, Any]) -> dict[str, Any]:
    """Success, finish status, truncation, effect counts, whether and how the fault fired,
    the final state's hash and every action and observation of the episode."""
    out = {f: episode.get(f) for f in FIELDS}
    outcome = episode.get("fault_outcome") or {}
    out["fault_outcome"] = {k: outcome.get(k) for k in OUTCOME}
    transcript = episode.get("transcript") or []
    out["actions"] = [t["action"] for t in transcript]
    out["observations"] = [t["observation"] for t in transcript]
    return out


def _errored(record: dict[str, Any]) -> bool:
    return any(record[arm].get("error") for arm in ("control", "fault"))


def compare(a: Iterable[dict[str, Any]], b: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The pairs both runs recorded, matched by pair id; every field that differs, with up
    to five pair ids each. Pairs with an infrastructure error on either side are skipped
    (and counted): they carry no verdict."""
    ra = {r["pair_id"]: r for r in a}
    rb = {r["pair_id"]: r for r in b}
    common = sorted(ra.keys() & rb.keys())
    errors = [p for p in common if _errored(ra[p]) or _errored(rb[p])]
    diffs: dict[str, list[str]] = defaultdict(list)
    for pid in common:
        if pid in errors:
            continue
        for arm in ("control", "fault"):
            va, vb = verdict(ra[pid][arm]), verdict(rb[pid][arm])
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


def digest(records: Iterable[dict[str, Any]]) -> str:
    """sha256 over every pair's id and verdicts, in pair-id order: equal for two runs of the
    same pairs that reached the same verdicts (wall times, paths and dates left out)."""
    rows = sorted(
        (r["pair_id"], {arm: verdict(r[arm]) for arm in ("control", "fault")}) for r in records
    )
    h = hashlib.sha256()
    for pid, v in rows:
        h.update(json.dumps([pid, v], sort_keys=True, separators=(",", ":")).encode())
        h.update(b"\n")
    return h.hexdigest()
