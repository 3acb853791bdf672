"""Shared pieces of the CRM workflows: the short names specs are written with, and the
fixture baselines that task oracles count on top of."""

from __future__ import annotations

from typing import Any

from undobench_gym.contract.specs import Boundary, EffectExpectation, StatePredicate
from undobench_gym.services.domains.crm.fixture import count_rows, seq_id

#: The short names the workflow modules write their specs with.
B = Boundary
E = EffectExpectation
P = StatePredicate


def active_enrollment(fx: dict[str, Any], contact_id: str, sequence: str) -> dict[str, Any]:
    """The active enrollment of a contact in a sequence (history ones are completed)."""
    wanted = seq_id(fx, sequence)
    return next(
        e
        for e in fx["enrollments"]
        if e["contact_id"] == contact_id and e["sequence_id"] == wanted and e["status"] == "active"
    )


def sends_after(fx: dict[str, Any], contact_id: str, sequence_id: str) -> dict[str, int]:
    """Enrollments and emails of a contact in a sequence once the task enrolled it once:
    the fixture's own (completed history) plus one."""
    where = {"contact_id": contact_id, "sequence_id": sequence_id}
    return {
        "enrollments_after": count_rows(fx, "enrollments", **where) + 1,
        "emails_after": count_rows(fx, "emails", **where) + 1,
    }
