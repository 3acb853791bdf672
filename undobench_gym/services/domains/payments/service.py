"""The payments service: a Stripe-like API over SQLite. Amounts are integers in the
currency's minor unit. Routes live by kind in `reads`, `mutations` and `composites`."""

from __future__ import annotations

from typing import Any

from undobench_gym.services.domains._service.kit import DomainService
from undobench_gym.services.domains.payments import composites, mutations, reads
from undobench_gym.services.domains.payments.fixture import build_fixture
from undobench_gym.services.domains.payments.models import (
    TABLES,
    Balance,
    Charge,
    Customer,
    Invoice,
    Payout,
    Refund,
    Subscription,
    Transfer,
    Wire,
)

#: Fixture key -> model, parents first (foreign keys).
FIXTURE_ORDER: tuple[tuple[str, Any], ...] = (
    ("customers", Customer),
    ("charges", Charge),
    ("refunds", Refund),
    ("subscriptions", Subscription),
    ("invoices", Invoice),
    ("payouts", Payout),
    ("transfers", Transfer),
    ("wires", Wire),
    ("balance", Balance),
)


def partial_state(state: dict[str, Any]) -> list[str]:
    """A payout stuck in `processing` is a half-applied composite."""
    tables = state["tables"]
    issues = []
    for p in tables["pay_payouts"]:
        paid = [t for t in tables["pay_transfers"] if t["payout_id"] == p["id"]]
        if p["status"] != "paid":
            issues.append(
                f"payout {p['id']} is {p['status']} with {len(paid)}/{len(p['recipients'])} "
                "transfers paid"
            )
    return issues


DOMAIN = DomainService(
    name="payments",
    title="UndoBench Payments",
    routers=[reads.router, mutations.router, composites.router],
    tables=TABLES,
    fixture=build_fixture,
    fixture_order=FIXTURE_ORDER,
    partial_state=partial_state,
)

__all__ = ["DOMAIN"]
