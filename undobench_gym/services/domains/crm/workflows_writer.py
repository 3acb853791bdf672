"""CRM under a concurrent writer: right after the agent records the deal's
final amount, the account manager corrects it (a late discount). If the agent's write
lost its answer, a blind re-send, or a read-back that sees the other amount and concludes
the write never landed, overwrites the correction; the deal must keep it."""

from __future__ import annotations

from typing import Any

from undobench_gym.contract.specs import StatePredicate as P
from undobench_gym.services.domains.crm.workflows_sales import CLOSE
from undobench_gym.services.domains.workflows_writer import overwrite, replace, with_writer, writer


def _params(seed: int, fx: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
    return {"writer_amount": p["amount"] - 125000}


CLOSE_WRITER = with_writer(
    CLOSE,
    writer(
        "set_opportunity_amount",
        "the account manager corrects the deal's amount (a late discount)",
        (
            "set_opportunity_amount",
            {"opportunity_id": "{opportunity_id}", "amount": "{writer_amount}"},
        ),
    ),
    overwrite("set_opportunity_amount"),
    params=_params,
    invariants=replace(
        CLOSE.invariants,
        {
            "the deal has the final amount": P.field_is(
                "the deal keeps the account manager's correction, made after the agent's",
                "crm_opportunities",
                {"id": "{opportunity_id}"},
                "amount",
                "{writer_amount}",
            )
        },
    ),
)
