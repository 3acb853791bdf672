"""The database under a concurrent writer: another client credits the target
account the same amount with the same memo right after the agent's credit was dropped
before the service. The audit trail now shows a new credit carrying everything the agent
sent; the agent's own credit must still be applied, exactly once."""

from __future__ import annotations

from typing import Any

from undobench_gym.contract.specs import StatePredicate as P
from undobench_gym.services.domains.database.workflows_accounts import TRANSFER
from undobench_gym.services.domains.workflows_writer import lookalike, replace, with_writer, writer


def _params(seed: int, fx: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
    return {
        "to_with_writer": p["to_after"] + p["amount"],
        "to_credits_with_writer": p["to_credits"] + 1,
        "to_adjustments_with_writer": p["to_adjustments"] + 1,
    }


TRANSFER_WRITER = with_writer(
    TRANSFER,
    writer(
        "adjust_balance",
        "another client credits the target account the same amount with the same memo",
        ("adjust_balance", {"account_id": "{to_id}", "delta": "{amount}", "memo": "{memo}"}),
        nth=2,
    ),
    lookalike("adjust_balance", nth=2),
    params=_params,
    invariants=replace(
        TRANSFER.invariants,
        {
            "the target gained exactly the amount": P.field_is(
                "the target gained the amount twice (the agent's and the other client's)",
                "db_accounts",
                {"id": "{to_id}"},
                "balance",
                "{to_with_writer}",
            ),
            "one credit in the audit trail": P.count(
                "two credits in the audit trail (the agent's and the other client's)",
                "db_audit",
                {"action": "account.adjust", "account_id": "{to_id}", "amount": "{amount}"},
                "{to_credits_with_writer}",
            ),
            "no other target adjustment": P.count(
                "no other target adjustment",
                "db_audit",
                {"action": "account.adjust", "account_id": "{to_id}"},
                "{to_adjustments_with_writer}",
            ),
        },
    ),
)
