"""Database workflows on the routes that commit in several transactions (`composites`):
a dividend credited holder by holder, and a schema migration (DDL, then catalog row)."""

from __future__ import annotations

from typing import Any

from undobench_gym.contract.seeding import rng_for
from undobench_gym.contract.specs import FaultScenario, GoldStep, VisibleError, WorkflowSpec
from undobench_gym.services.domains.database.fixture import (
    COLUMN_POOL,
    HOLDERS_PER_CLASS,
    MIGRATION_NAMES,
    SHARE_CLASSES,
)
from undobench_gym.services.domains.database.workflows_common import (
    B,
    E,
    P,
    account,
    balance_is,
    matching,
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
        params[f"balance{i}"] = account(fx, h["account_id"])["balance"] + amount
        params[f"credits{i}"] = matching(credits, account_id=h["account_id"]) + 1
        params[f"exact{i}"] = matching(credits, account_id=h["account_id"], amount=amount) + 1
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
        P.count(
            "one paid dividend for the reference",
            "db_dividends",
            {"reference": "{reference}", "status": "paid"},
        ),
        P.count("no other dividend was declared", "db_dividends", {}, "{dividends_after}"),
        *[
            P.count(
                f"holder {i} credited once more",
                "db_dividend_credits",
                {"account_id": f"{{account{i}}}"},
                f"{{credits{i}}}",
            )
            for i in HOLDERS
        ],
        *[
            P.count(
                f"holder {i} credited the right amount",
                "db_dividend_credits",
                {"account_id": f"{{account{i}}}", "amount": f"{{credit{i}}}"},
                f"{{exact{i}}}",
            )
            for i in HOLDERS
        ],
        *[
            balance_is(
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
        FaultScenario.on(
            "crash-mid-credit",
            B.DURING_MUTATION,
            "pay_dividend",
            crash_point="dividend.after_first_credit",
        ),
        FaultScenario.on("lost-ack", B.POST_MUTATION_PRE_ACK, "pay_dividend"),
        FaultScenario.on(
            "502-after-commit",
            B.POST_MUTATION_PRE_ACK,
            "pay_dividend",
            visible_error=VisibleError.HTTP_502,
            description="the dividend is paid; the gateway answers 502",
        ),
    ],
    draw_params=_dividend_params,
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
        P.count("the migration is in the catalog once", "db_migrations", {"name": "{name}"}),
        P.field_is(
            "the catalog row has the requested columns",
            "db_migrations",
            {"name": "{name}"},
            "columns",
            "{columns}",
        ),
        P.count("no other migration was applied", "db_migrations", {}, "{migrations_after}"),
    ],
    gold_plan=[
        GoldStep(tool="get_schema"),
        GoldStep(tool="apply_migration", arguments={"name": "{name}", "columns": "{columns}"}),
    ],
    scenarios=[
        FaultScenario.on(
            "crash-after-ddl",
            B.DURING_MUTATION,
            "apply_migration",
            crash_point="migration.after_ddl",
        ),
        FaultScenario.on("pre-reset", B.PRE_MUTATION, "apply_migration"),
    ],
    draw_params=_migration_params,
)
