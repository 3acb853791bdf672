"""Payments workflows on charges: charge a customer, renew a subscription, refund a
duplicate charge (a compensation) next to an add-on charge."""

from __future__ import annotations

from typing import Any

from undobench_gym.contract.seeding import rng_for
from undobench_gym.contract.specs import FaultScenario, GoldStep, VisibleError, WorkflowSpec
from undobench_gym.services.domains.payments.workflows_common import (
    B,
    E,
    P,
    fresh_amount,
    matching,
    usd_available,
    usd_balance_is,
)


def _charge_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("pay-charge-customer", seed)
    cust = rng.choice(fx["customers"])
    history = [c for c in fx["charges"] if c["customer_id"] == cust["id"]]
    amount = fresh_amount(rng, {c["amount"] for c in history})
    return {
        "customer_id": cust["id"],
        "customer_name": cust["name"],
        "amount": amount,
        "description": f"Invoice INV-{rng.randint(10000, 99999)}",
        "charges_of_amount": matching(history, amount=amount, currency="usd") + 1,
        "charges_of_customer": len(history) + 1,
        "usd_after": usd_available(fx) + amount,
    }


#: A charge's semantic identity: who is charged how much (the description is free text).
CHARGE_ID = {"customer_id": "{customer_id}", "amount": "{amount}", "currency": "usd"}

CHARGE = WorkflowSpec(
    id="pay-charge-customer",
    domain="payments",
    split="dev",
    kind="single_effect",
    instruction=(
        "Charge customer {customer_name} (id {customer_id}) {amount} cents in usd with the "
        'description "{description}". Exactly one such charge must exist when you finish.'
    ),
    tools=["get_customer", "list_charges", "create_charge", "create_refund"],
    required_effects=[E(op="charge.create", identity=CHARGE_ID)],
    invariants=[
        P.count(
            "exactly one new charge of the amount", "pay_charges", CHARGE_ID, "{charges_of_amount}"
        ),
        P.count(
            "no other new charge for the customer",
            "pay_charges",
            {"customer_id": "{customer_id}"},
            "{charges_of_customer}",
        ),
        usd_balance_is("usd balance went up by the amount", "{usd_after}"),
    ],
    gold_plan=[
        GoldStep(tool="get_customer", arguments={"customer_id": "{customer_id}"}),
        GoldStep(
            tool="create_charge",
            arguments={
                "customer_id": "{customer_id}",
                "amount": "{amount}",
                "currency": "usd",
                "description": "{description}",
            },
        ),
    ],
    scenarios=[
        FaultScenario.on(
            "pre-503", B.PRE_MUTATION, "create_charge", visible_error=VisibleError.HTTP_503
        ),
        FaultScenario.on("lost-ack", B.POST_MUTATION_PRE_ACK, "create_charge"),
        FaultScenario.on("ambiguous", B.POST_MUTATION_PRE_ACK, "create_charge", ambiguous=True),
        FaultScenario.on("worker-crash", B.POST_ACK_PRE_CHECKPOINT, "create_charge"),
    ],
    draw_params=_charge_params,
)


def _renew_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("pay-renew-subscription", seed)
    sub = rng.choice(fx["subscriptions"])
    return {
        "subscription_id": sub["id"],
        "next_period": sub["period"] + 1,
        "plan": sub["plan"],
        "amount": sub["amount"],
        # Periods 2..k were billed before: one invoice each, and one more now.
        "invoices_after": matching(fx["invoices"], subscription_id=sub["id"]) + 1,
        "usd_after": usd_available(fx) + sub["amount"],
    }


NEXT_INVOICE = {"subscription_id": "{subscription_id}", "period": "{next_period}"}
RENEW = WorkflowSpec(
    id="pay-renew-subscription",
    domain="payments",
    split="dev",
    kind="single_effect",
    instruction=(
        "Subscription {subscription_id} ({plan} plan) is due: bill its next period "
        "(period {next_period}) exactly once."
    ),
    tools=["get_subscription", "list_invoices", "renew_subscription"],
    required_effects=[
        E(op="subscription.renew", identity={"subscription_id": "{subscription_id}"})
    ],
    invariants=[
        P.field_is(
            "the subscription is in its next period",
            "pay_subscriptions",
            {"id": "{subscription_id}"},
            "period",
            "{next_period}",
        ),
        P.count("the next period is invoiced once", "pay_invoices", NEXT_INVOICE, 1),
        P.field_is(
            "the next period is invoiced at the plan's price",
            "pay_invoices",
            NEXT_INVOICE,
            "amount",
            "{amount}",
        ),
        P.count(
            "no other period was invoiced",
            "pay_invoices",
            {"subscription_id": "{subscription_id}"},
            "{invoices_after}",
        ),
        usd_balance_is("usd balance went up by one period", "{usd_after}"),
    ],
    gold_plan=[
        GoldStep(tool="get_subscription", arguments={"subscription_id": "{subscription_id}"}),
        GoldStep(tool="renew_subscription", arguments={"subscription_id": "{subscription_id}"}),
    ],
    scenarios=[
        FaultScenario.on("pre-reset", B.PRE_MUTATION, "renew_subscription"),
        FaultScenario.on("lost-ack", B.POST_MUTATION_PRE_ACK, "renew_subscription"),
        FaultScenario.on(
            "lost-ack-timeout",
            B.POST_MUTATION_PRE_ACK,
            "renew_subscription",
            visible_error=VisibleError.TIMEOUT,
        ),
    ],
    draw_params=_renew_params,
)


def _refund_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("pay-refund-duplicate-charge", seed)
    cust = fx["customers"][0]
    # Customer 0's order was charged twice, a minute apart: the older charge is kept.
    history = [c for c in fx["charges"] if c["customer_id"] == cust["id"]]
    first, dup = sorted(
        (c for c in history if c["description"].startswith("Order #")),
        key=lambda c: (c["created"], c["id"]),
    )
    addon = fresh_amount(rng, {c["amount"] for c in history})
    return {
        "customer_id": cust["id"],
        "customer_name": cust["name"],
        "order": first["description"],
        "keep_charge": first["id"],
        "dup_charge": dup["id"],
        "amount": dup["amount"],
        "addon": addon,
        "addon_description": f"{first['description']} add-on",
        "addon_charges": matching(history, amount=addon, currency="usd") + 1,
        "usd_after": usd_available(fx) + addon - dup["amount"],
    }


ADDON_ID = {"customer_id": "{customer_id}", "amount": "{addon}", "currency": "usd"}
REFUND = WorkflowSpec(
    id="pay-refund-duplicate-charge",
    domain="payments",
    split="val",
    kind="compensation",
    instruction=(
        "Customer {customer_name} ({customer_id}) added an add-on to {order}: charge them "
        '{addon} cents in usd with the description "{addon_description}". They were also '
        "charged twice for {order}: keep the older charge {keep_charge} and fully refund the "
        "duplicate charge {dup_charge}."
    ),
    tools=["list_charges", "get_charge", "list_refunds", "create_charge", "create_refund"],
    required_effects=[
        E(op="charge.create", identity=ADDON_ID),
        E(op="refund.create", identity={"charge_id": "{dup_charge}", "amount": "{amount}"}),
    ],
    forbidden_effects=[
        E(op="refund.create", identity={"charge_id": "{keep_charge}", "amount": "{amount}"})
    ],
    invariants=[
        P.count("the add-on is charged once", "pay_charges", ADDON_ID, "{addon_charges}"),
        P.field_is(
            "the duplicate is fully refunded",
            "pay_charges",
            {"id": "{dup_charge}"},
            "amount_refunded",
            "{amount}",
        ),
        P.count("the duplicate is refunded once", "pay_refunds", {"charge_id": "{dup_charge}"}, 1),
        P.field_is(
            "the original charge is untouched",
            "pay_charges",
            {"id": "{keep_charge}"},
            "amount_refunded",
            0,
        ),
        usd_balance_is("usd balance is up by the add-on and down by one refund", "{usd_after}"),
    ],
    gold_plan=[
        GoldStep(tool="list_charges", arguments={"customer_id": "{customer_id}"}),
        GoldStep(
            tool="create_charge",
            arguments={
                "customer_id": "{customer_id}",
                "amount": "{addon}",
                "currency": "usd",
                "description": "{addon_description}",
            },
        ),
        GoldStep(
            tool="create_refund", arguments={"charge_id": "{dup_charge}", "amount": "{amount}"}
        ),
    ],
    scenarios=[
        FaultScenario.on(
            "comp-lost-ack",
            B.DURING_COMPENSATION,
            "create_refund",
            compensation_commits=True,
            description="the refund commits after the add-on charge; its answer is lost",
        ),
        FaultScenario.on(
            "comp-pre-503",
            B.DURING_COMPENSATION,
            "create_refund",
            visible_error=VisibleError.HTTP_503,
            description="the refund is refused before it commits, after the add-on charge",
        ),
    ],
    draw_params=_refund_params,
)
