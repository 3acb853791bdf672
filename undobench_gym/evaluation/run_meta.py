"""run_meta.json as both sides read it: its file name, and what the retry policy did.

The harness writes the file (executors/meta.py) and the report reads it back; both count
retries the same way, here, so the evaluation needs nothing from the harness above it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

META_FILE = "run_meta.json"


def retry_counts(trials: list[dict[str, Any]]) -> dict[str, Any]:
    """What the retry policy did, over every recorded pair."""
    kinds: Counter[str] = Counter()
    for t in trials:
        kinds.update(f["kind"] for f in t.get("infra_errors") or [])
    attempts = [int(t.get("attempts") or 1) for t in trials]
    errored = [
        bool((t.get("control") or {}).get("error") or (t.get("fault") or {}).get("error"))
        for t in trials
    ]
    return {
        "pairs": len(trials),
        "attempts": sum(attempts),
        "retried_pairs": sum(a > 1 for a in attempts),
        "recovered_by_retry": sum(a > 1 and not e for a, e in zip(attempts, errored, strict=True)),
        "infra_error_pairs": sum(errored),
        "failed_attempts_by_kind": dict(sorted(kinds.items())),
        "pairs_with_agent_exceptions": sum(bool(t.get("agent_exceptions")) for t in trials),
    }
