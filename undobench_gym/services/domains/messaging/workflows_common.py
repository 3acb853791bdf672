"""Shared pieces of the messaging workflows: the short names of the spec types, and
fixture lookups.

The fixture carries history (texts, posts, emails, deliveries), so counts are made of
structured fields only (phone number, channel, batch reference, endpoint, event, dedup
key: never a message text) and compared with what the fixture already holds plus what the
task adds. The text of a new message is checked on the row the episode created: the
service's ids are a pure function of (seed, kind, how many it created), so the first text
or post of an episode has a known id (`seeded_id(seed, prefix, 1)`).
"""

from __future__ import annotations

from typing import Any

from undobench_gym.contract.specs import Boundary, EffectExpectation, StatePredicate

B = Boundary
E = EffectExpectation
P = StatePredicate


def channel_id(fx: dict[str, Any], name: str) -> str:
    """The id of the fixture's chat channel called `name`."""
    return str(next(c["id"] for c in fx["channels"] if c["name"] == name))


def pager_service(fx: dict[str, Any], service_id: str) -> dict[str, Any]:
    """The fixture's pager service with id `service_id`."""
    return next(s for s in fx["services"] if s["id"] == service_id)
