"""Ticketing under a concurrent writer: right after the agent assigns the new
incident, another operator reassigns it to a colleague of the same team. If the agent's
assignment lost its answer, a blind re-send, or a read-back that sees the other assignee
and concludes the assignment never landed, overwrites the other operator's update; the
incident must keep it (the page still goes to the primary on-call, as asked)."""

from __future__ import annotations

from typing import Any

from undobench_gym.contract.specs import StatePredicate as P
from undobench_gym.services.domains.ticketing.workflows_response import OPEN_AND_PAGE
from undobench_gym.services.domains.workflows_writer import overwrite, replace, with_writer, writer


def _params(seed: int, fx: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
    """The colleague: the first other responder of the primary's team."""
    team = [r for r in fx["responders"] if r["team"] == p["responder_team"]]
    other = next(r for r in team if r["id"] != p["responder_id"])
    return {"writer_responder_id": other["id"]}


OPEN_AND_PAGE_WRITER = with_writer(
    OPEN_AND_PAGE,
    writer(
        "assign_incident",
        "another operator reassigns the same incident to a colleague of the same team",
        (
            "assign_incident",
            {"incident_id": "{incident_id}", "responder_id": "{writer_responder_id}"},
        ),
    ),
    overwrite("assign_incident"),
    params=_params,
    invariants=replace(
        OPEN_AND_PAGE.invariants,
        {
            "the incident is assigned": P.field_is(
                "the incident keeps the other operator's assignee, set after the agent's",
                "tk_incidents",
                {"id": "{incident_id}"},
                "assignee_id",
                "{writer_responder_id}",
            )
        },
    ),
)
