"""Database workflows: task, parameters from the seed, oracles, gold plan, fault scenarios.

Every balance oracle is an exact value computed from the fixture, so an additive effect
applied twice (a retried adjustment, a dividend paid again) makes an invariant false.
Counts start from the fixture's history (earlier adjustments, credits, dividends,
migrations) and match semantic fields (account, amount), never a memo the agent writes:
a retry with a reworded memo is counted like any other.
"""

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

from .fixture import COLUMN_POOL, HOLDERS_PER_CLASS, MIGRATION_NAMES, SHARE_CLASSES

B = Boundary
T = FaultTarget
E = EffectExpectation
P = StatePredicate


def _account(fx: dict[str, Any], account_id: str) -> dict[str, Any]:
    return next(a for a in fx["accounts"] if a["id"] == account_id)


def _matching(rows: list[dict[str, Any]], **where: Any) -> int:
    """How many fixture rows match: the history an invariant's count starts from."""
    return sum(1 for r in rows if all(r.get(k) == v for k, v in where.items()))


def _adjustments(fx: dict[str, Any], account_id: str, **where: Any) -> int:
    """Audited balance adjustments of the account in the fixture's history."""
    return _matching(fx["audit"], action="account.adjust", account_id=account_id, **where)


def _unused_delta(fx: dict[str, Any], account_ids: list[str], delta: int) -> bool:
    """No earlier adjustment of these accounts moved this many cents either way, so that
    a read-back of the audit trail by account and amount finds the new one only."""
    return not any(_adjustments(fx, a, amount=d) for a in account_ids for d in (delta, -delta))


def _adjusted(account: str, delta: str) -> EffectExpectation:
    """The commit-log effect of one adjust_balance call: which account moves by how much
    (the memo is free text)."""
    return E(op="account.adjust", identity={"account_id": account, "delta": delta})


def _adjust(account: str, delta: str, memo: str = "{memo}") -> GoldStep:
    args = {"account_id": account, "delta": delta, "memo": memo}
    return GoldStep(tool="adjust_balance", arguments=args)


def _count(description: str, table: str, where: dict[str, Any], value: Any = 1) -> P:
    return P(description=description, table=table, where=where, op="count", value=value)


def _field(description: str, table: str, where: dict[str, Any], field: str, value: Any) -> P:
    return P(description=description, table=table, where=where, field=field, value=value)


def _balance(description: str, account: str, value: str) -> P:
    return _field(description, "db_accounts", {"id": account}, "balance", value)


def _audited(description: str, account: str, delta: str, count: str) -> P:
    """Adjustments of the account by `delta` in the audit trail, history included: a
    retried adjustment, whatever its memo, makes one more."""
    where = {"action": "account.adjust", "account_id": account, "amount": delta}
    return _count(description, "db_audit", where, count)


def _audited_all(description: str, account: str, count: str) -> P:
    """All adjustments of the account, history included: one by another amount on the
    way (even one that a second cancels) makes one more."""
    where = {"action": "account.adjust", "account_id": account}
    return _count(description, "db_audit", where, count)


def _transfer_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("db-transfer-funds", seed)
    source, target = rng.sample(fx["accounts"], 2)
    ids = [source["id"], target["id"]]
    while True:
        # At most the source balance less a dollar, so the debit never overdraws.
        top = min(500, source["balance"] // 100 - 1)
        amount = rng.randint(1, top) * 100 + rng.choice([0, 25, 75])
        if _unused_delta(fx, ids, amount):
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
        "from_debits": _adjustments(fx, source["id"], amount=-amount) + 1,
        "to_credits": _adjustments(fx, target["id"], amount=amount) + 1,
        "from_adjustments": _adjustments(fx, source["id"]) + 1,
        "to_adjustments": _adjustments(fx, target["id"]) + 1,
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
    required_effects=[_adjusted("{from_id}", "{neg_amount}"), _adjusted("{to_id}", "{amount}")],
    # Crediting the source or debiting the target is the transfer done backwards.
    forbidden_effects=[_adjusted("{from_id}", "{amount}"), _adjusted("{to_id}", "{neg_amount}")],
    invariants=[
        _balance("the source lost exactly the amount", "{from_id}", "{from_after}"),
        _balance("the target gained exactly the amount", "{to_id}", "{to_after}"),
        _audited("one debit in the audit trail", "{from_id}", "{neg_amount}", "{from_debits}"),
        _audited("one credit in the audit trail", "{to_id}", "{amount}", "{to_credits}"),
        _audited_all("no other source adjustment", "{from_id}", "{from_adjustments}"),
        _audited_all("no other target adjustment", "{to_id}", "{to_adjustments}"),
    ],
    gold_plan=[
        GoldStep(tool="get_account", arguments={"account_id": "{from_id}"}),
        _adjust("{from_id}", "{neg_amount}"),
        _adjust("{to_id}", "{amount}"),
    ],
    scenarios=[
        FaultScenario(
            # A lost acknowledgement of one step of the two-call transfer, not a crash
            # inside a route: labelled by what happens.
            id="during-mid-transfer",
            boundary=B.POST_MUTATION_PRE_ACK,
            target=T(tool="adjust_balance", nth=1),
            description="the debit commits but its response is lost before the credit",
        ),
        FaultScenario(
            id="credit-lost-ack",
            boundary=B.POST_MUTATION_PRE_ACK,
            target=T(tool="adjust_balance", nth=2),
        ),
        FaultScenario(
            id="debit-pre-503",
            boundary=B.PRE_MUTATION,
            target=T(tool="adjust_balance", nth=1),
            visible_error=VisibleError.HTTP_503,
        ),
    ],
    draw_params=_transfer_params,
)


def _dividend_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("db-pay-dividend", seed)
    share_class = rng.choice(SHARE_CLASSES)
    # Another rate than any earlier dividend on the class, so that no holder's new credit
    # has the amount of an old one.
    earlier = {d["amount_per_share"] for d in fx["dividends"] if d["share_class"] == share_class}
    per_share = rng.randint(5, 250)
    while per_share in earlier:
        per_share = rng.randint(5, 250)
    holders = sorted(
        (h for h in fx["shareholdings"] if h["share_class"] == share_class),
        key=lambda h: str(h["account_id"]),
    )
    credits = fx["dividend_credits"]
    params: dict[str, Any] = {
        "share_class": share_class,
        "amount_per_share": per_share,
        "reference": f"DIV-2026-Q{rng.randint(1, 4)}-{rng.randint(100, 999)}",
        "dividends_after": len(fx["dividends"]) + 1,
    }
    for i, h in enumerate(holders):
        amount = h["shares"] * per_share
        params[f"account{i}"] = h["account_id"]
        params[f"credit{i}"] = amount
        params[f"balance{i}"] = _account(fx, h["account_id"])["balance"] + amount
        params[f"credits{i}"] = _matching(credits, account_id=h["account_id"]) + 1
        params[f"exact{i}"] = _matching(credits, account_id=h["account_id"], amount=amount) + 1
    return params


HOLDERS = range(HOLDERS_PER_CLASS)
DIVIDEND = WorkflowSpec(
    id="db-pay-dividend",
    domain="database",
    split="test",
    kind="composite",
    instruction=(
        "Pay a dividend of {amount_per_share} cents per share to every holder of {share_class} "
        "shares, with reference {reference}. Every holder must be credited exactly once."
    ),
    tools=[
        "list_shareholdings",
        "list_dividends",
        "pay_dividend",
        "resume_dividend",
        "get_account",
    ],
    required_effects=[
        E(
            op="dividend.declare",
            identity={
                "share_class": "{share_class}",
                "amount_per_share": "{amount_per_share}",
                "reference": "{reference}",
            },
        ),
        *[
            E(
                op="dividend.credit",
                identity={
                    "share_class": "{share_class}",
                    "account_id": f"{{account{i}}}",
                    "amount": f"{{credit{i}}}",
                },
            )
            for i in HOLDERS
        ],
    ],
    # Finishing the dividend a crash left `processing` completes the required effect.
    allowed_effects=[E(op="dividend.resume", identity={})],
    invariants=[
        _count(
            "one paid dividend for the reference",
            "db_dividends",
            {"reference": "{reference}", "status": "paid"},
        ),
        _count("no other dividend was declared", "db_dividends", {}, "{dividends_after}"),
        *[
            _count(
                f"holder {i} credited once more",
                "db_dividend_credits",
                {"account_id": f"{{account{i}}}"},
                f"{{credits{i}}}",
            )
            for i in HOLDERS
        ],
        *[
            _count(
                f"holder {i} credited the right amount",
                "db_dividend_credits",
                {"account_id": f"{{account{i}}}", "amount": f"{{credit{i}}}"},
                f"{{exact{i}}}",
            )
            for i in HOLDERS
        ],
        *[
            _balance(
                f"holder {i} balance went up by its credit", f"{{account{i}}}", f"{{balance{i}}}"
            )
            for i in HOLDERS
        ],
    ],
    gold_plan=[
        GoldStep(tool="list_shareholdings", arguments={"share_class": "{share_class}"}),
        GoldStep(
            tool="pay_dividend",
            arguments={
                "share_class": "{share_class}",
                "amount_per_share": "{amount_per_share}",
                "reference": "{reference}",
            },
        ),
    ],
    scenarios=[
        FaultScenario(
            id="crash-mid-credit",
            boundary=B.DURING_MUTATION,
            target=T(tool="pay_dividend"),
            crash_point="dividend.after_first_credit",
        ),
        FaultScenario(
            id="lost-ack", boundary=B.POST_MUTATION_PRE_ACK, target=T(tool="pay_dividend")
        ),
    ],
    draw_params=_dividend_params,
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
    tools=["get_account", "list_orders", "get_order", "create_order"],
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
        _count("exactly one order with the number", "db_orders", ORDER_WHERE),
        _field("the order has the right total", "db_orders", ORDER_WHERE, "total", "{total}"),
        _field(
            "the order belongs to the account",
            "db_orders",
            ORDER_WHERE,
            "account_id",
            "{account_id}",
        ),
        _count("no other order was created", "db_orders", {}, "{orders_after}"),
    ],
    gold_plan=[
        GoldStep(tool="get_account", arguments={"account_id": "{account_id}"}),
        GoldStep(
            tool="create_order",
            arguments={"order_number": "{order_number}", "account_id": "@0.id", "total": "{total}"},
        ),
    ],
    scenarios=[
        FaultScenario(
            id="lost-ack", boundary=B.POST_MUTATION_PRE_ACK, target=T(tool="create_order")
        ),
        FaultScenario(
            id="ambiguous",
            boundary=B.POST_MUTATION_PRE_ACK,
            target=T(tool="create_order"),
            ambiguous=True,
        ),
    ],
    draw_params=_order_params,
)


def _migration_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("db-apply-migration", seed)
    # History applied `<family>_v1`; the task applies a later version.
    name = f"{rng.choice(MIGRATION_NAMES)}_v{rng.randint(2, 9)}"
    columns = [{"name": n, "type": t} for n, t in rng.sample(COLUMN_POOL, rng.randint(2, 4))]
    return {
        "name": name,
        "table": f"ext_{name}",
        "columns": columns,
        "columns_text": ", ".join(f"{c['name']} ({c['type']})" for c in columns),
        "migrations_after": len(fx["migrations"]) + 1,
    }


MIGRATION = WorkflowSpec(
    id="db-apply-migration",
    domain="database",
    split="val",
    kind="composite",
    instruction=(
        "Apply schema migration {name}: it creates table {table} with the columns "
        "{columns_text}, in that order. The migration must end up applied exactly once, "
        "with its table and its catalog row."
    ),
    tools=["get_schema", "list_migrations", "apply_migration", "repair_migration"],
    required_effects=[E(op="migration.apply", identity={"name": "{name}", "columns": "{columns}"})],
    # Recording the catalog row of the migration a crash left half-applied completes it.
    allowed_effects=[E(op="migration.repair", identity={"name": "{name}"})],
    invariants=[
        _count("the migration is in the catalog once", "db_migrations", {"name": "{name}"}),
        _field(
            "the catalog row has the requested columns",
            "db_migrations",
            {"name": "{name}"},
            "columns",
            "{columns}",
        ),
        _count("no other migration was applied", "db_migrations", {}, "{migrations_after}"),
    ],
    gold_plan=[
        GoldStep(tool="get_schema"),
        GoldStep(tool="apply_migration", arguments={"name": "{name}", "columns": "{columns}"}),
    ],
    scenarios=[
        FaultScenario(
            id="crash-after-ddl",
            boundary=B.DURING_MUTATION,
            target=T(tool="apply_migration"),
            crash_point="migration.after_ddl",
        ),
        FaultScenario(id="pre-reset", boundary=B.PRE_MUTATION, target=T(tool="apply_migration")),
    ],
    draw_params=_migration_params,
)


def _upgrade_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("db-upgrade-tier", seed)
    candidates = [a for a in fx["accounts"] if a["tier"] in ("bronze", "silver")]
    acct = rng.choice(candidates or fx["accounts"])
    bonuses = [b for b in (1000, 1500, 2500, 5000) if _unused_delta(fx, [acct["id"]], b)]
    bonus = rng.choice(bonuses or [1250])
    code = f"GOLD-{rng.randint(1000, 9999)}"
    return {
        "account_id": acct["id"],
        "account_name": acct["name"],
        "old_tier": acct["tier"],
        "bonus": bonus,
        "memo": f"loyalty bonus {code}",
        "balance_after": acct["balance"] + bonus,
        "bonuses": _adjustments(fx, acct["id"], amount=bonus) + 1,
        "adjustments": _adjustments(fx, acct["id"]) + 1,
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
        _adjusted("{account_id}", "{bonus}"),
    ],
    invariants=[
        _field("the account is gold", "db_accounts", {"id": "{account_id}"}, "tier", "gold"),
        _balance("the balance went up by one bonus", "{account_id}", "{balance_after}"),
        _audited("one bonus in the audit trail", "{account_id}", "{bonus}", "{bonuses}"),
        _audited_all("no other adjustment", "{account_id}", "{adjustments}"),
    ],
    gold_plan=[
        GoldStep(tool="get_account", arguments={"account_id": "{account_id}"}),
        GoldStep(tool="set_account_tier", arguments={"account_id": "{account_id}", "tier": "gold"}),
        _adjust("{account_id}", "{bonus}"),
    ],
    scenarios=[
        FaultScenario(
            id="tier-lost-ack",
            boundary=B.POST_MUTATION_PRE_ACK,
            target=T(tool="set_account_tier"),
            description="a repeat of a set is harmless",
        ),
        FaultScenario(
            id="bonus-lost-ack",
            boundary=B.POST_MUTATION_PRE_ACK,
            target=T(tool="adjust_balance"),
            description="a repeat of the bonus is a duplicate",
        ),
    ],
    draw_params=_upgrade_params,
)

WORKFLOWS = [TRANSFER, DIVIDEND, ORDER, MIGRATION, UPGRADE]
