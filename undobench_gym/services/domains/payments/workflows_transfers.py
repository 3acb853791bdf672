"""Payments workflows that send money out: a payout split across recipients (a composite
that a crash can leave half-paid) and a cross-border wire with its fee."""

from __future__ import annotations

from typing import Any

from undobench_gym.contract.seeding import rng_for
from undobench_gym.contract.specs import FaultScenario, GoldStep, VisibleError, WorkflowSpec
from undobench_gym.services.domains.payments.fixture import ACCOUNT_POOL, WIRE_FEE, iban
from undobench_gym.services.domains.payments.workflows_common import (
    B,
    E,
    P,
    matching,
    usd_available,
    usd_balance_is,
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
        "paid_after": matching(fx["payouts"], status="paid") + 1,
        "usd_after": usd_available(fx) - sum(amounts),
    }
    for i, r in enumerate(recipients):
        params[f"account{i}"] = r["account"]
        params[f"amount{i}"] = r["amount"]
        params[f"transfers{i}"] = matching(paid, account=r["account"]) + 1
        params[f"exact{i}"] = matching(paid, account=r["account"], amount=r["amount"]) + 1
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
        P.count("one new payout", "pay_payouts", {}, "{payouts_after}"),
        P.count("the new payout is paid", "pay_payouts", {"status": "paid"}, "{paid_after}"),
        P.field_is(
            "the payout carries the reference",
            "pay_payouts",
            {"reference": "{reference}"},
            "currency",
            "usd",
        ),
        *[
            P.count(
                f"recipient {i} paid once more",
                "pay_transfers",
                {"account": f"{{account{i}}}"},
                f"{{transfers{i}}}",
            )
            for i in range(3)
        ],
        *[
            P.count(
                f"recipient {i} paid the right amount",
                "pay_transfers",
                {"account": f"{{account{i}}}", "amount": f"{{amount{i}}}"},
                f"{{exact{i}}}",
            )
            for i in range(3)
        ],
        usd_balance_is("usd balance went down by the payout total", "{usd_after}"),
    ],
    gold_plan=[
        GoldStep(
            tool="create_payout",
            arguments={"reference": "{reference}", "currency": "usd", "recipients": "{recipients}"},
        ),
    ],
    scenarios=[
        FaultScenario.on(
            "crash-mid-batch",
            B.DURING_MUTATION,
            "create_payout",
            crash_point="payout.after_first_transfer",
        ),
        FaultScenario.on("lost-ack", B.POST_MUTATION_PRE_ACK, "create_payout"),
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
        "fees_of_customer": matching(charges, amount=WIRE_FEE, currency="usd") + 1,
        "charges_of_customer": len(charges) + 1,
        "usd_after": usd_available(fx) - amount + WIRE_FEE,
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
    # create_refund: the fee charge's inverse (a wire, once sent, has none here)
    tools=[
        "get_fx_quote",
        "list_wires",
        "create_wire",
        "list_charges",
        "create_charge",
        "create_refund",
    ],
    required_effects=[E(op="wire.send", identity=WIRE_ID), E(op="charge.create", identity=FEE_ID)],
    invariants=[
        P.count("one new wire of the amount, usd to eur", "pay_wires", WIRE_ID, 1),
        P.count(
            "no other new wire to the beneficiary",
            "pay_wires",
            {"beneficiary_iban": "{iban}"},
            "{wires_to_iban}",
        ),
        P.count("one new fee charge", "pay_charges", FEE_ID, "{fees_of_customer}"),
        P.count(
            "no other new charge for the customer",
            "pay_charges",
            {"customer_id": "{customer_id}"},
            "{charges_of_customer}",
        ),
        usd_balance_is("usd balance is net of wire and fee", "{usd_after}"),
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
        FaultScenario.on("wire-lost-ack", B.POST_MUTATION_PRE_ACK, "create_wire"),
        FaultScenario.on(
            "wire-504-after-commit",
            B.POST_MUTATION_PRE_ACK,
            "create_wire",
            visible_error=VisibleError.HTTP_504,
            description="the wire went out; the gateway timed out and answers 504",
        ),
        FaultScenario.on(
            "fee-pre-502", B.PRE_MUTATION, "create_charge", visible_error=VisibleError.HTTP_502
        ),
        FaultScenario.on("wire-ambiguous", B.PRE_MUTATION, "create_wire", ambiguous=True),
    ],
    draw_params=_wire_params,
)
