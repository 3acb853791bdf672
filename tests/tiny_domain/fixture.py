"""Checklist step 2: the seeded fixture, a pure function of the seed."""

from __future__ import annotations

from typing import Any

from undobench_gym.contract.seeding import rng_for

AUTHORS = ("ada", "grace", "edsger", "barbara")


def build_fixture(seed: int) -> dict[str, list[dict[str, Any]]]:
    rng = rng_for("notes-fixture", seed)
    notes = [
        {
            "id": f"nt_seed{i}",
            "author": rng.choice(AUTHORS),
            "title": f"standup {i}",
            "body": "done: nothing; next: everything",
            "created": "2025-12-31T00:00:00Z",
        }
        for i in range(3)
    ]
    return {"notes": notes}
