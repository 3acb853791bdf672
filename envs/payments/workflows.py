"""Payments workflows: task, parameters from the seed, oracles, gold plan, fault scenarios.

Effects are identified by who, what and how much (customer, amount, currency; account;
beneficiary), never by a description or reference the agent writes. Counts start from the
fixture's history (earlier charges, invoices, transfers, wires) and match those semantic
fields, so that neither old rows nor a reworded re-send can pass for the task's effect.
"""

from __future__ import annotations

import random
from typing import Any

from undobench_gym.seeding import rng_for
from undobench_gym.specs import (
    Boundary,
    EffectExpectation,
    FaultScenario,
    FaultTarget,
    GoldStep,
    StatePredicate,
    VisibleError,
    WorkflowSpec,
)

from .fixture import ACCOUNT_POOL, WIRE_FEE, iban

B = Boundary
T = FaultTarget
E = EffectExpectation
P = StatePredicate


def _usd(seed: int, fixture: dict[str, Any]) -> int:
    return int(next(b["available"] for b in fixture["balance"] if b["currency"] == "usd"))


def _count(description: str, table: str, where: dict[str, Any], value: Any) -> P:
    return P(description=description, table=table, where=where, op="count", value=value)


def _balance(description: str, value: str) -> P:
    return P(
        description=description,
        table="pay_balance",
        where={"currency": "usd"},
        field="available",
        value=value,
    )


def _matching(rows: list[dict[str, Any]], **where: Any) -> int:
    """How many fixture rows match: the history an invariant's count starts from."""
    return sum(1 for r in rows if all(r.get(k) == v for k, v in where.items()))


def _fresh_amount(rng: random.Random, taken: set[int]) -> int:
    """An amount in cents that no earlier row of the customer has, so that a read-back by
    customer and amount finds the new charge only."""
    while True:
        amount = int(rng.randint(5, 900) * 100 + rng.choice([0, 50, 99]))
        if amount not in taken:
            return amount


def _charge_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("pay-charge-customer", seed)
    cust = rng.choice(fx["customers"])
    history = [c for c in fx["charges"] if c["customer_id"] == cust["id"]]
    amount = _fresh_amount(rng, {c["amount"] for c in history})
    return {
        "customer_id": cust["id"],
        "customer_name": cust["name"],
        "amount": amount,
        "description": f"Invoice INV-{rng.randint(10000, 99999)}",
        "charges_of_amount": _matching(history, amount=amount, currency="usd") + 1,
        "charges_of_customer": len(history) + 1,
        "usd_after": _usd(seed, fx) + amount,
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
    tools=["get_customer", "list_charges", "create_charge"],
    required_effects=[E(op="charge.create", identity=CHARGE_ID)],
    invariants=[
        _count(
            "exactly one new charge of the amount", "pay_charges", CHARGE_ID, "{charges_of_amount}"
        ),
        _count(
            "no other new charge for the customer",
            "pay_charges",
            {"customer_id": "{customer_id}"},
            "{charges_of_customer}",
        ),
        _balance("usd balance went up by the amount", "{usd_after}"),
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
        FaultScenario(
            id="pre-503",
            boundary=B.PRE_MUTATION,
            target=T(tool="create_charge"),
            visible_error=VisibleError.HTTP_503,
        ),
        FaultScenario(
            id="lost-ack", boundary=B.POST_MUTATION_PRE_ACK, target=T(tool="create_charge")
        ),
        FaultScenario(
            id="ambiguous",
            boundary=B.POST_MUTATION_PRE_ACK,
            target=T(tool="create_charge"),
            ambiguous=True,
        ),
        FaultScenario(
            id="worker-crash",
            boundary=B.POST_ACK_PRE_CHECKPOINT,
            target=T(tool="create_charge"),
        ),
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
        "invoices_after": _matching(fx["invoices"], subscription_id=sub["id"]) + 1,
        "usd_after": _usd(seed, fx) + sub["amount"],
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
        P(
            description="the subscription is in its next period",
            table="pay_subscriptions",
            where={"id": "{subscription_id}"},
            field="period",
            value="{next_period}",
        ),
        _count("the next period is invoiced once", "pay_invoices", NEXT_INVOICE, 1),
        P(
            description="the next period is invoiced at the plan's price",
            table="pay_invoices",
            where=NEXT_INVOICE,
            field="amount",
            value="{amount}",
        ),
        _count(
            "no other period was invoiced",
            "pay_invoices",
            {"subscription_id": "{subscription_id}"},
            "{invoices_after}",
        ),
        _balance("usd balance went up by one period", "{usd_after}"),
    ],
    gold_plan=[
        GoldStep(tool="get_subscription", arguments={"subscription_id": "{subscription_id}"}),
        GoldStep(tool="renew_subscription", arguments={"subscription_id": "{subscription_id}"}),
    ],
    scenarios=[
        FaultScenario(id="pre-reset", boundary=B.PRE_MUTATION, target=T(tool="renew_subscription")),
        FaultScenario(
            id="lost-ack", boundary=B.POST_MUTATION_PRE_ACK, target=T(tool="renew_subscription")
        ),
        FaultScenario(
            id="lost-ack-timeout",
            boundary=B.POST_MUTATION_PRE_ACK,
            target=T(tool="renew_subscription"),
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
    addon = _fresh_amount(rng, {c["amount"] for c in history})
    return {
        "customer_id": cust["id"],
        "customer_name": cust["name"],
        "order": first["description"],
        "keep_charge": first["id"],
        "dup_charge": dup["id"],
        "amount": dup["amount"],
        "addon": addon,
        "addon_description": f"{first['description']} add-on",
        "addon_charges": _matching(history, amount=addon, currency="usd") + 1,
        "usd_after": _usd(seed, fx) + addon - dup["amount"],
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
        _count("the add-on is charged once", "pay_charges", ADDON_ID, "{addon_charges}"),
        P(
            description="the duplicate is fully refunded",
            table="pay_charges",
            where={"id": "{dup_charge}"},
            field="amount_refunded",
            value="{amount}",
        ),
        _count("the duplicate is refunded once", "pay_refunds", {"charge_id": "{dup_charge}"}, 1),
        P(
            description="the original charge is untouched",
            table="pay_charges",
            where={"id": "{keep_charge}"},
            field="amount_refunded",
            value=0,
        ),
        _balance("usd balance is up by the add-on and down by one refund", "{usd_after}"),
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
        FaultScenario(
            id="comp-lost-ack",
            boundary=B.DURING_COMPENSATION,
            target=T(tool="create_refund"),
            compensation_commits=True,
            description="the refund commits after the add-on charge; its answer is lost",
        ),
        FaultScenario(
            id="comp-pre-503",
            boundary=B.DURING_COMPENSATION,
            target=T(tool="create_refund"),
            visible_error=VisibleError.HTTP_503,
            description="the refund is refused before it commits, after the add-on charge",
        ),
    ],
    draw_params=_refund_params,
)


def _payout_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("pay-split-payout", seed)
    # Recipients come from the pool earlier payouts paid: one may have been paid before.
    accounts = sorted(rng.sample(ACCOUNT_POOL, 3))
    amounts = [rng.randint(10, 300) * 100 for _ in accounts]
    recipients = [{"account": a, "amount": m} for a, m in zip(accounts, amounts, strict=True)]
    paid = fx["transfers"]
    params: dict[str, Any] = {
        "reference": f"payout-{rng.randint(1000, 9999)}",
        "recipients": recipients,
        "recipients_text": ", ".join(f"{a}: {m}" for a, m in zip(accounts, amounts, strict=True)),
        "payouts_after": len(fx["payouts"]) + 1,
        "paid_after": _matching(fx["payouts"], status="paid") + 1,
        "usd_after": _usd(seed, fx) - sum(amounts),
    }
    for i, r in enumerate(recipients):
        params[f"account{i}"] = r["account"]
        params[f"amount{i}"] = r["amount"]
        params[f"transfers{i}"] = _matching(paid, account=r["account"]) + 1
        params[f"exact{i}"] = _matching(paid, account=r["account"], amount=r["amount"]) + 1
    return params


PAYOUT = WorkflowSpec(
    id="pay-split-payout",
    domain="payments",
    split="test",
    kind="composite",
    instruction=(
        "Pay out usd with reference {reference}, split across these recipient accounts "
        "(amounts in cents): {recipients_text}. Every recipient must be paid exactly once."
    ),
    tools=["list_payouts", "get_payout", "create_payout", "resume_payout", "get_balance"],
    required_effects=[
        E(op="payout.create", identity={"currency": "usd", "recipients": "{recipients}"}),
        *[
            E(
                op="payout.transfer",
                identity={
                    "account": f"{{account{i}}}",
                    "amount": f"{{amount{i}}}",
                    "currency": "usd",
                },
            )
            for i in range(3)
        ],
    ],
    # Finishing the payout a crash left `processing` completes the required effect.
    allowed_effects=[E(op="payout.resume", identity={})],
    invariants=[
        _count("one new payout", "pay_payouts", {}, "{payouts_after}"),
        _count("the new payout is paid", "pay_payouts", {"status": "paid"}, "{paid_after}"),
        P(
            description="the payout carries the reference",
            table="pay_payouts",
            where={"reference": "{reference}"},
            field="currency",
            value="usd",
        ),
        *[
            _count(
                f"recipient {i} paid once more",
                "pay_transfers",
                {"account": f"{{account{i}}}"},
                f"{{transfers{i}}}",
            )
            for i in range(3)
        ],
        *[
            _count(
                f"recipient {i} paid the right amount",
                "pay_transfers",
                {"account": f"{{account{i}}}", "amount": f"{{amount{i}}}"},
                f"{{exact{i}}}",
            )
            for i in range(3)
        ],
        _balance("usd balance went down by the payout total", "{usd_after}"),
    ],
    gold_plan=[
        GoldStep(
            tool="create_payout",
            arguments={"reference": "{reference}", "currency": "usd", "recipients": "{recipients}"},
        ),
    ],
    scenarios=[
        FaultScenario(
            id="crash-mid-batch",
            boundary=B.DURING_MUTATION,
            target=T(tool="create_payout"),
            crash_point="payout.after_first_transfer",
        ),
        FaultScenario(
            id="lost-ack", boundary=B.POST_MUTATION_PRE_ACK, target=T(tool="create_payout")
        ),
    ],
    draw_params=_payout_params,
)


def _wire_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("pay-cross-border-wire", seed)
    cust = rng.choice(fx["customers"])
    # Half the time the beneficiary is a supplier wired before: a read-back by IBAN alone
    # then finds the old wire too.
    known = sorted({w["beneficiary_iban"] for w in fx["wires"]})
    to = rng.choice(known) if known and rng.random() < 0.5 else iban(rng)
    earlier = [w for w in fx["wires"] if w["beneficiary_iban"] == to]
    amount = rng.randint(100, 2000) * 100
    while any(w["amount"] == amount for w in earlier):
        amount = rng.randint(100, 2000) * 100
    charges = [c for c in fx["charges"] if c["customer_id"] == cust["id"]]
    return {
        "customer_id": cust["id"],
        "customer_name": cust["name"],
        "amount": amount,
        "iban": to,
        "fee": WIRE_FEE,
        "fee_description": f"Wire fee {to[-6:]}",
        "wires_to_iban": len(earlier) + 1,
        "fees_of_customer": _matching(charges, amount=WIRE_FEE, currency="usd") + 1,
        "charges_of_customer": len(charges) + 1,
        "usd_after": _usd(seed, fx) - amount + WIRE_FEE,
    }


WIRE_ID = {
    "beneficiary_iban": "{iban}",
    "amount": "{amount}",
    "source_currency": "usd",
    "target_currency": "eur",
}
FEE_ID = {"customer_id": "{customer_id}", "amount": "{fee}", "currency": "usd"}
WIRE = WorkflowSpec(
    id="pay-cross-border-wire",
    domain="payments",
    split="test",
    kind="multi_effect",
    instruction=(
        "On behalf of {customer_name} ({customer_id}), send {amount} usd cents as a wire in "
        "eur to IBAN {iban} (get an fx quote first), then charge the customer the wire fee of "
        '{fee} usd cents with the description "{fee_description}". One wire, one fee.'
    ),
    tools=["get_fx_quote", "list_wires", "create_wire", "list_charges", "create_charge"],
    required_effects=[E(op="wire.send", identity=WIRE_ID), E(op="charge.create", identity=FEE_ID)],
    invariants=[
        _count("one new wire of the amount, usd to eur", "pay_wires", WIRE_ID, 1),
        _count(
            "no other new wire to the beneficiary",
            "pay_wires",
            {"beneficiary_iban": "{iban}"},
            "{wires_to_iban}",
        ),
        _count("one new fee charge", "pay_charges", FEE_ID, "{fees_of_customer}"),
        _count(
            "no other new charge for the customer",
            "pay_charges",
            {"customer_id": "{customer_id}"},
            "{charges_of_customer}",
        ),
        _balance("usd balance is net of wire and fee", "{usd_after}"),
    ],
    gold_plan=[
        GoldStep(
            tool="get_fx_quote", arguments={"source": "usd", "target": "eur", "amount": "{amount}"}
        ),
        GoldStep(
            tool="create_wire",
            arguments={
                "quote_id": "@0.quote_id",
                "beneficiary_iban": "{iban}",
                "amount": "{amount}",
                "source_currency": "usd",
                "target_currency": "eur",
            },
        ),
        GoldStep(
            tool="create_charge",
            arguments={
                "customer_id": "{customer_id}",
                "amount": "{fee}",
                "currency": "usd",
                "description": "{fee_description}",
            },
        ),
    ],
    scenarios=[
        FaultScenario(
            id="wire-lost-ack", boundary=B.POST_MUTATION_PRE_ACK, target=T(tool="create_wire")
        ),
        FaultScenario(
            id="fee-pre-502",
            boundary=B.PRE_MUTATION,
            target=T(tool="create_charge"),
            visible_error=VisibleError.HTTP_502,
        ),
        FaultScenario(
            id="wire-ambiguous",
            boundary=B.PRE_MUTATION,
            target=T(tool="create_wire"),
            ambiguous=True,
        ),
    ],
    draw_params=_wire_params,
)

WORKFLOWS = [CHARGE, RENEW, REFUND, PAYOUT, WIRE]
