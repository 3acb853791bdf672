"""run_meta.json as both sides read it: its file name, and what the retry policy did.

The harness writes the file (executors/meta.py) and the report reads it back; both count
retries the same way, here, so the evaluation needs nothing from the harness above it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from undobench_gym.evaluation.records import InfraError, PairLike, as_records

META_FILE = "run_meta.json"


def retry_counts(trials: Sequence[PairLike]) -> dict[str, Any]:
    """What the retry policy did, over every recorded pair."""
    records = as_records(trials)
    kinds: Counter[str] = Counter()
    for t in records:
        kinds.update(InfraError.model_validate(f).kind for f in t.infra_errors)
    attempts = [int(t.attempts or 1) for t in records]
    errored = [bool(t.control.error or t.fault.error) for t in records]
    return {
        "pairs": len(records),
        "attempts": sum(attempts),
        "retried_pairs": sum(a > 1 for a in attempts),
        "recovered_by_retry": sum(a > 1 and not e for a, e in zip(attempts, errored, strict=True)),
        "infra_error_pairs": sum(errored),
        "failed_attempts_by_kind": dict(sorted(kinds.items())),
        "pairs_with_agent_exceptions": sum(bool(t.agent_exceptions) for t in records),
    }
