"""Shared pieces of the ticketing workflows: the short names of the spec types,
predicates on values and parameter helpers.

The fixture carries history (pages, notices, comments, escalations), so counts are made
of structured fields only (incident, responder, kind, audience: never a message text) and
compared with what the fixture already holds plus what the task adds. A lookup of one row
(`StatePredicate.field_is`) is keyed on structured fields the history has no row for, so
that exactly one row, the new one, matches.
"""

from __future__ import annotations

from typing import Any

from undobench_gym.contract.specs import Boundary, EffectExpectation, StatePredicate
from undobench_gym.services.domains.ticketing.fixture import fixture_count, responder

B = Boundary
E = EffectExpectation
P = StatePredicate
INC = {"id": "{incident_id}"}


def paged(description: str, responder: str, value: Any = 1) -> P:
    where = {"incident_id": "{incident_id}", "responder_id": responder}
    return P.count(description, "tk_pages", where, value)


def page_sent(responder: str) -> E:
    return E(op="page.send", identity={"incident_id": "{incident_id}", "responder_id": responder})


def person(fx: dict[str, Any], responder_id: str, prefix: str) -> dict[str, Any]:
    """Template parameters for one responder: <prefix>_id, <prefix>_name, <prefix>_team."""
    r = responder(fx, responder_id)
    return {f"{prefix}_id": r["id"], f"{prefix}_name": r["name"], f"{prefix}_team": r["team"]}


def pages_before(fx: dict[str, Any], incident_id: str, responder_id: str) -> int:
    """Pages the history already sent this responder about this incident."""
    return fixture_count(fx, "pages", incident_id=incident_id, responder_id=responder_id)


def incident_params(fx: dict[str, Any], index: int) -> dict[str, Any]:
    inc = fx["incidents"][index]
    policy = next(p for p in fx["policies"] if p["id"] == inc["policy_id"])
    return {
        "incident_id": inc["id"],
        "external_ref": inc["external_ref"],
        "title": inc["title"],
        "severity": inc["severity"],
        "escalation_level": inc["escalation_level"],
        "policy_id": policy["id"],
        "team": policy["team"],
    }
