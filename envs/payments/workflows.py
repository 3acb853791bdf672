"""Payments workflows: task, parameters from the seed, oracles, gold plan, fault scenarios."""

from __future__ import annotations

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

B = Boundary
T = FaultTarget
E = EffectExpectation
P = StatePredicate


def _usd(seed: int, fixture: dict[str, Any]) -> int:
    return int(next(b["available"] for b in fixture["balance"] if b["currency"] == "usd"))


def _charge_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("pay-charge-customer", seed)
    cust = rng.choice(fx["customers"])
    amount = rng.randint(5, 900) * 100 + rng.choice([0, 50, 99])
    return {
        "customer_id": cust["id"],
        "customer_name": cust["name"],
        "amount": amount,
        "description": f"Invoice INV-{rng.randint(10000, 99999)}",
        "usd_after": _usd(seed, fx) + amount,
    }


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
    required_effects=[
        E(
            op="charge.create",
            identity={
                "customer_id": "{customer_id}",
                "amount": "{amount}",
                "currency": "usd",
                "description": "{description}",
            },
        )
    ],
    invariants=[
        P(
            description="exactly one charge for the invoice",
            table="pay_charges",
            where={"customer_id": "{customer_id}", "description": "{description}"},
            op="count",
            value=1,
        ),
        P(
            description="the charge has the right amount",
            table="pay_charges",
            where={"customer_id": "{customer_id}", "description": "{description}"},
            field="amount",
            value="{amount}",
        ),
        P(
            description="usd balance went up by the amount",
            table="pay_balance",
            where={"currency": "usd"},
            field="available",
            value="{usd_after}",
        ),
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
        "usd_after": _usd(seed, fx) + sub["amount"],
    }


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
        P(
            description="exactly one invoice billed",
            table="pay_invoices",
            where={"subscription_id": "{subscription_id}"},
            op="count",
            value=1,
        ),
        P(
            description="usd balance went up by one period",
            table="pay_balance",
            where={"currency": "usd"},
            field="available",
            value="{usd_after}",
        ),
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
    first, dup = fx["charges"][0], fx["charges"][1]
    cust = next(c for c in fx["customers"] if c["id"] == first["customer_id"])
    return {
        "customer_id": cust["id"],
        "customer_name": cust["name"],
        "order": first["description"],
        "keep_charge": first["id"],
        "dup_charge": dup["id"],
        "amount": dup["amount"],
        "usd_after": _usd(seed, fx) - dup["amount"],
    }


REFUND = WorkflowSpec(
    id="pay-refund-duplicate-charge",
    domain="payments",
    split="val",
    kind="compensation",
    instruction=(
        "Customer {customer_name} ({customer_id}) was charged twice for {order}. Keep the "
        "older charge {keep_charge} and fully refund the duplicate charge {dup_charge}."
    ),
    tools=["list_charges", "get_charge", "list_refunds", "create_refund"],
    required_effects=[
        E(op="refund.create", identity={"charge_id": "{dup_charge}", "amount": "{amount}"})
    ],
    forbidden_effects=[
        E(op="refund.create", identity={"charge_id": "{keep_charge}", "amount": "{amount}"})
    ],
    invariants=[
        P(
            description="the duplicate is fully refunded",
            table="pay_charges",
            where={"id": "{dup_charge}"},
            field="amount_refunded",
            value="{amount}",
        ),
        P(
            description="the original charge is untouched",
            table="pay_charges",
            where={"id": "{keep_charge}"},
            field="amount_refunded",
            value=0,
        ),
        P(
            description="usd balance went down by one refund",
            table="pay_balance",
            where={"currency": "usd"},
            field="available",
            value="{usd_after}",
        ),
    ],
    gold_plan=[
        GoldStep(tool="list_charges", arguments={"customer_id": "{customer_id}"}),
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
        ),
        FaultScenario(
            id="comp-pre-503",
            boundary=B.DURING_COMPENSATION,
            target=T(tool="create_refund"),
            visible_error=VisibleError.HTTP_503,
        ),
    ],
    draw_params=_refund_params,
)


def _payout_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("pay-split-payout", seed)
    accounts = rng.sample([f"acct_{c}{n}" for c in "abcdefgh" for n in range(10)], 3)
    amounts = [rng.randint(10, 300) * 100 for _ in accounts]
    recipients = [{"account": a, "amount": m} for a, m in zip(accounts, amounts, strict=True)]
    params: dict[str, Any] = {
        "reference": f"payout-{rng.randint(1000, 9999)}",
        "recipients": recipients,
        "recipients_text": ", ".join(f"{a}: {m}" for a, m in zip(accounts, amounts, strict=True)),
        "usd_after": _usd(seed, fx) - sum(amounts),
    }
    for i, r in enumerate(recipients):
        params[f"account{i}"] = r["account"]
        params[f"amount{i}"] = r["amount"]
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
        E(
            op="payout.create",
            identity={"reference": "{reference}", "currency": "usd", "recipients": "{recipients}"},
        ),
        *[
            E(
                op="payout.transfer",
                identity={
                    "reference": "{reference}",
                    "account": f"{{account{i}}}",
                    "amount": f"{{amount{i}}}",
                },
            )
            for i in range(3)
        ],
    ],
    invariants=[
        P(
            description="one paid payout for the reference",
            table="pay_payouts",
            where={"reference": "{reference}", "status": "paid"},
            op="count",
            value=1,
        ),
        P(
            description="no other payout for the reference",
            table="pay_payouts",
            where={"reference": "{reference}"},
            op="count",
            value=1,
        ),
        *[
            P(
                description=f"recipient {i} paid the right amount",
                table="pay_transfers",
                where={"account": f"{{account{i}}}"},
                field="amount",
                value=f"{{amount{i}}}",
            )
            for i in range(3)
        ],
        P(
            description="usd balance went down by the payout total",
            table="pay_balance",
            where={"currency": "usd"},
            field="available",
            value="{usd_after}",
        ),
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
    amount = rng.randint(100, 2000) * 100
    fee = 2500
    country = rng.choice(["DE", "FR", "NL", "ES"])
    iban = f"{country}{rng.randint(10, 99)}{''.join(rng.choice('0123456789') for _ in range(18))}"
    return {
        "customer_id": cust["id"],
        "customer_name": cust["name"],
        "amount": amount,
        "iban": iban,
        "fee": fee,
        "fee_description": f"Wire fee {iban[-6:]}",
        "usd_after": _usd(seed, fx) - amount + fee,
    }


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
    required_effects=[
        E(
            op="wire.send",
            identity={"beneficiary_iban": "{iban}", "amount": "{amount}", "source_currency": "usd"},
        ),
        E(
            op="charge.create",
            identity={
                "customer_id": "{customer_id}",
                "amount": "{fee}",
                "currency": "usd",
                "description": "{fee_description}",
            },
        ),
    ],
    invariants=[
        P(
            description="exactly one wire to the beneficiary",
            table="pay_wires",
            where={"beneficiary_iban": "{iban}"},
            op="count",
            value=1,
        ),
        P(
            description="the wire is in eur",
            table="pay_wires",
            where={"beneficiary_iban": "{iban}"},
            field="target_currency",
            value="eur",
        ),
        P(
            description="exactly one fee charge",
            table="pay_charges",
            where={"description": "{fee_description}"},
            op="count",
            value=1,
        ),
        P(
            description="usd balance is net of wire and fee",
            table="pay_balance",
            where={"currency": "usd"},
            field="available",
            value="{usd_after}",
        ),
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
