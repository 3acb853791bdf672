"""Database workflows on accounts: a transfer as two adjustments, an order under a unique
number, and a tier upgrade with its bonus (a `set` beside an additive effect)."""

from __future__ import annotations

from typing import Any

from undobench_gym.contract.seeding import rng_for
from undobench_gym.contract.specs import FaultScenario, GoldStep, VisibleError, WorkflowSpec
from undobench_gym.services.domains.database.workflows_common import (
    B,
    E,
    P,
    adjust,
    adjusted,
    adjustments,
    audited,
    audited_all,
    balance_is,
    unused_delta,
)


def _transfer_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("db-transfer-funds", seed)
    source, target = rng.sample(fx["accounts"], 2)
    ids = [source["id"], target["id"]]
    while True:
        # At most the source balance less a dollar, so the debit never overdraws.
        top = min(500, source["balance"] // 100 - 1)
        amount = rng.randint(1, top) * 100 + rng.choice([0, 25, 75])
        if unused_delta(fx, ids, amount):
            break
    ref = f"TRF-{rng.randint(10000, 99999)}"
    return {
        "from_id": source["id"],
        "from_name": source["name"],
        "to_id": target["id"],
        "to_name": target["name"],
        "amount": amount,
        "neg_amount": -amount,
        "ref": ref,
        "memo": f"transfer {ref}",
        "from_after": source["balance"] - amount,
        "to_after": target["balance"] + amount,
        "from_debits": adjustments(fx, source["id"], amount=-amount) + 1,
        "to_credits": adjustments(fx, target["id"], amount=amount) + 1,
        "from_adjustments": adjustments(fx, source["id"]) + 1,
        "to_adjustments": adjustments(fx, target["id"]) + 1,
    }


TRANSFER = WorkflowSpec(
    id="db-transfer-funds",
    domain="database",
    split="dev",
    kind="composite",
    instruction=(
        "Move {amount} cents from account {from_name} ({from_id}) to account {to_name} "
        "({to_id}) as transfer {ref}: adjust {from_id} by -{amount} and {to_id} by +{amount}, "
        'both with the memo "{memo}". Each side must be applied exactly once.'
    ),
    tools=["list_accounts", "get_account", "adjust_balance", "list_audit"],
    required_effects=[adjusted("{from_id}", "{neg_amount}"), adjusted("{to_id}", "{amount}")],
    # Crediting the source or debiting the target is the transfer done backwards.
    forbidden_effects=[adjusted("{from_id}", "{amount}"), adjusted("{to_id}", "{neg_amount}")],
    invariants=[
        balance_is("the source lost exactly the amount", "{from_id}", "{from_after}"),
        balance_is("the target gained exactly the amount", "{to_id}", "{to_after}"),
        audited("one debit in the audit trail", "{from_id}", "{neg_amount}", "{from_debits}"),
        audited("one credit in the audit trail", "{to_id}", "{amount}", "{to_credits}"),
        audited_all("no other source adjustment", "{from_id}", "{from_adjustments}"),
        audited_all("no other target adjustment", "{to_id}", "{to_adjustments}"),
    ],
    gold_plan=[
        GoldStep(tool="get_account", arguments={"account_id": "{from_id}"}),
        adjust("{from_id}", "{neg_amount}"),
        adjust("{to_id}", "{amount}"),
    ],
    scenarios=[
        FaultScenario.on(
            "during-mid-transfer",
            B.POST_MUTATION_PRE_ACK,
            "adjust_balance",
            nth=1,
            description="the debit commits but its response is lost before the credit",
        ),
        FaultScenario.on("credit-lost-ack", B.POST_MUTATION_PRE_ACK, "adjust_balance", nth=2),
        FaultScenario.on(
            "debit-pre-503",
            B.PRE_MUTATION,
            "adjust_balance",
            nth=1,
            visible_error=VisibleError.HTTP_503,
        ),
    ],
    draw_params=_transfer_params,
)


def _order_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("db-create-order", seed)
    acct = rng.choice(fx["accounts"])
    taken = {o["order_number"] for o in fx["orders"]}
    number = next(
        n for n in (f"ORD-{rng.randint(100000, 999999)}" for _ in range(100)) if n not in taken
    )
    return {
        "account_id": acct["id"],
        "account_name": acct["name"],
        "order_number": number,
        "total": rng.randint(10, 3000) * 100 + rng.choice([0, 49, 99]),
        "orders_after": len(fx["orders"]) + 1,
    }


ORDER_WHERE = {"order_number": "{order_number}"}
ORDER = WorkflowSpec(
    id="db-create-order",
    domain="database",
    split="dev",
    kind="single_effect",
    instruction=(
        "Record order {order_number} for account {account_name} ({account_id}) with a total "
        "of {total} cents. Exactly one order {order_number} must exist when you finish."
    ),
    # cancel_order: the inverse, so that an order that should not exist can be cancelled
    tools=["get_account", "list_orders", "get_order", "create_order", "cancel_order"],
    required_effects=[
        E(
            op="order.create",
            identity={
                "order_number": "{order_number}",
                "account_id": "{account_id}",
                "total": "{total}",
            },
        )
    ],
    invariants=[
        P.count("exactly one order with the number", "db_orders", ORDER_WHERE),
        P.field_is("the order has the right total", "db_orders", ORDER_WHERE, "total", "{total}"),
        P.field_is(
            "the order belongs to the account",
            "db_orders",
            ORDER_WHERE,
            "account_id",
            "{account_id}",
        ),
        P.count("no other order was created", "db_orders", {}, "{orders_after}"),
    ],
    gold_plan=[
        GoldStep(tool="get_account", arguments={"account_id": "{account_id}"}),
        GoldStep(
            tool="create_order",
            arguments={"order_number": "{order_number}", "account_id": "@0.id", "total": "{total}"},
        ),
    ],
    scenarios=[
        FaultScenario.on("lost-ack", B.POST_MUTATION_PRE_ACK, "create_order"),
        FaultScenario.on("ambiguous", B.POST_MUTATION_PRE_ACK, "create_order", ambiguous=True),
    ],
    draw_params=_order_params,
)


def _upgrade_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("db-upgrade-tier", seed)
    candidates = [a for a in fx["accounts"] if a["tier"] in ("bronze", "silver")]
    acct = rng.choice(candidates or fx["accounts"])
    bonuses = [b for b in (1000, 1500, 2500, 5000) if unused_delta(fx, [acct["id"]], b)]
    bonus = rng.choice(bonuses or [1250])
    code = f"GOLD-{rng.randint(1000, 9999)}"
    return {
        "account_id": acct["id"],
        "account_name": acct["name"],
        "old_tier": acct["tier"],
        "bonus": bonus,
        "memo": f"loyalty bonus {code}",
        "balance_after": acct["balance"] + bonus,
        "bonuses": adjustments(fx, acct["id"], amount=bonus) + 1,
        "adjustments": adjustments(fx, acct["id"]) + 1,
    }


UPGRADE = WorkflowSpec(
    id="db-upgrade-tier",
    domain="database",
    split="test",
    kind="multi_effect",
    instruction=(
        "Upgrade account {account_name} ({account_id}) from {old_tier} to gold tier, and credit "
        'its gold loyalty bonus of {bonus} cents with the memo "{memo}". The bonus must be '
        "credited exactly once."
    ),
    tools=["get_account", "set_account_tier", "adjust_balance", "list_audit"],
    required_effects=[
        E(op="account.tier", identity={"account_id": "{account_id}", "tier": "gold"}),
        adjusted("{account_id}", "{bonus}"),
    ],
    invariants=[
        P.field_is("the account is gold", "db_accounts", {"id": "{account_id}"}, "tier", "gold"),
        balance_is("the balance went up by one bonus", "{account_id}", "{balance_after}"),
        audited("one bonus in the audit trail", "{account_id}", "{bonus}", "{bonuses}"),
        audited_all("no other adjustment", "{account_id}", "{adjustments}"),
    ],
    gold_plan=[
        GoldStep(tool="get_account", arguments={"account_id": "{account_id}"}),
        GoldStep(tool="set_account_tier", arguments={"account_id": "{account_id}", "tier": "gold"}),
        adjust("{account_id}", "{bonus}"),
    ],
    scenarios=[
        FaultScenario.on(
            "tier-lost-ack",
            B.POST_MUTATION_PRE_ACK,
            "set_account_tier",
            description="a repeat of a set is harmless",
        ),
        FaultScenario.on(
            "bonus-lost-ack",
            B.POST_MUTATION_PRE_ACK,
            "adjust_balance",
            description="a repeat of the bonus is a duplicate",
        ),
    ],
    draw_params=_upgrade_params,
)
