"""Payments under a concurrent writer: another billing client charges the same
customer the same amount, with the same description, right after the agent's charge was
dropped before the service. A read-back now shows a new charge carrying everything the
agent sent; the agent's own charge must still be made, exactly once."""

from __future__ import annotations

from typing import Any

from undobench_gym.services.domains.payments.workflows_charges import CHARGE
from undobench_gym.services.domains.payments.workflows_common import P, usd_balance_is
from undobench_gym.services.domains.workflows_writer import lookalike, replace, with_writer, writer


def _params(seed: int, fx: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
    """The writer's charge is one more of the amount, for the customer, in the balance."""
    return {
        "charges_with_writer": p["charges_of_amount"] + 1,
        "customer_charges_with_writer": p["charges_of_customer"] + 1,
        "usd_with_writer": p["usd_after"] + p["amount"],
    }


CHARGE_ARGS = {
    "customer_id": "{customer_id}",
    "amount": "{amount}",
    "currency": "usd",
    "description": "{description}",
}

CHARGE_WRITER = with_writer(
    CHARGE,
    writer(
        "create_charge",
        "another billing client charges the same customer the same amount and description",
        ("create_charge", CHARGE_ARGS),
    ),
    lookalike("create_charge"),
    params=_params,
    invariants=replace(
        CHARGE.invariants,
        {
            "exactly one new charge of the amount": P.count(
                "the agent's charge and the other client's",
                "pay_charges",
                {"customer_id": "{customer_id}", "amount": "{amount}", "currency": "usd"},
                "{charges_with_writer}",
            ),
            "no other new charge for the customer": P.count(
                "no other new charge for the customer",
                "pay_charges",
                {"customer_id": "{customer_id}"},
                "{customer_charges_with_writer}",
            ),
            "usd balance went up by the amount": usd_balance_is(
                "usd balance went up by both charges", "{usd_with_writer}"
            ),
        },
    ),
)
