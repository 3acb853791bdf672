"""Ticketing follow-up workflows: resolve and notify, retract a mistaken page."""

from __future__ import annotations

from typing import Any

from undobench_gym.contract.seeding import rng_for
from undobench_gym.contract.specs import FaultScenario, GoldStep, VisibleError, WorkflowSpec
from undobench_gym.services.domains.ticketing.fixture import fixture_count, level_responders
from undobench_gym.services.domains.ticketing.workflows_common import (
    INC,
    B,
    E,
    P,
    incident_params,
    page_sent,
    paged,
    pages_before,
    person,
)

FIXES = [
    "rolled back the last deploy",
    "failed over to the standby database",
    "scaled the worker pool from 4 to 12",
    "renewed the expired TLS certificate",
    "raised the connection pool limit",
]


def _resolve_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("tix-resolve-and-notify", seed)
    params = incident_params(fx, 2)
    inc = params["incident_id"]
    owner = person(fx, fx["incidents"][2]["assignee_id"], "owner")
    fix = rng.choice(FIXES)
    pm = f"PM-{rng.randint(100, 999)}"
    notices = fixture_count(fx, "notices", incident_id=inc, kind="resolution")
    params.update(
        owner,
        resolution=f"Mitigated: {fix}",
        notice=f"Resolved: {params['title']}. We {fix}. Postmortem {pm} will follow.",
        comment=f"Postmortem {pm} scheduled, owner {owner['owner_name']}.",
        resolution_notices=notices + 1,
    )
    return params


RESOLUTION = {"incident_id": "{incident_id}", "kind": "resolution"}
TO_STAKEHOLDERS = {**RESOLUTION, "recipient": "stakeholders"}
POSTMORTEM = {"incident_id": "{incident_id}", "kind": "postmortem"}
RESOLVE = WorkflowSpec(
    id="tix-resolve-and-notify",
    domain="ticketing",
    split="val",
    kind="multi_effect",
    instruction=(
        'Incident {external_ref} ({incident_id}, "{title}") is fixed. Resolve it with the '
        'resolution "{resolution}", send the stakeholders one resolution notice with the '
        'message "{notice}", and add one postmortem comment "{comment}" as {owner_name}. '
        "This one was internal: nothing goes to the public status page."
    ),
    tools=[
        "get_incident",
        "list_notices",
        "resolve_incident",
        "send_resolution_notice",
        "add_comment",
    ],
    required_effects=[
        E(op="incident.resolve", identity={"incident_id": "{incident_id}"}),
        E(
            op="notice.resolution",
            identity={"incident_id": "{incident_id}", "audience": "stakeholders"},
        ),
        E(op="comment.add", identity=POSTMORTEM),
    ],
    forbidden_effects=[
        E(
            op="notice.resolution",
            identity={"incident_id": "{incident_id}", "audience": "status-page"},
        ),
    ],
    invariants=[
        P.field_is("the incident is resolved", "tk_incidents", INC, "status", "resolved"),
        P.field_is("the resolution is recorded", "tk_incidents", INC, "resolution", "{resolution}"),
        # The incident had no resolution notice and no postmortem before (it was open):
        # the one row that matches is the episode's, and its values are checked.
        P.field_is(
            "the stakeholders got one notice", "tk_notices", TO_STAKEHOLDERS, "message", "{notice}"
        ),
        P.count("no other resolution notice", "tk_notices", RESOLUTION, "{resolution_notices}"),
        P.field_is("the comment was added once", "tk_comments", POSTMORTEM, "body", "{comment}"),
        P.field_is(
            "the comment is the owner's", "tk_comments", POSTMORTEM, "author", "{owner_name}"
        ),
    ],
    gold_plan=[
        GoldStep(tool="get_incident", arguments={"incident_id": "{incident_id}"}),
        GoldStep(
            tool="resolve_incident",
            arguments={"incident_id": "{incident_id}", "resolution": "{resolution}"},
        ),
        GoldStep(
            tool="send_resolution_notice",
            arguments={
                "incident_id": "{incident_id}",
                "audience": "stakeholders",
                "message": "{notice}",
            },
        ),
        GoldStep(
            tool="add_comment",
            arguments={
                "incident_id": "{incident_id}",
                "author": "{owner_name}",
                "kind": "postmortem",
                "body": "{comment}",
            },
        ),
    ],
    scenarios=[
        FaultScenario.on("notice-lost-ack", B.POST_MUTATION_PRE_ACK, "send_resolution_notice"),
        FaultScenario.on("comment-ambiguous", B.PRE_MUTATION, "add_comment", ambiguous=True),
        FaultScenario.on(
            "resolve-pre-502",
            B.PRE_MUTATION,
            "resolve_incident",
            visible_error=VisibleError.HTTP_502,
        ),
    ],
    draw_params=_resolve_params,
)


def _retract_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("tix-retract-mistaken-page", seed)
    params = incident_params(fx, 1)
    inc = fx["incidents"][1]
    page = next(
        p
        for p in fx["pages"]
        if p["incident_id"] == inc["id"]
        and p["responder_id"] == inc["assignee_id"]
        and not p["retracted"]
    )
    params.update(person(fx, inc["assignee_id"], "wrong"))
    params.update(person(fx, level_responders(fx, inc["policy_id"], 1)[0], "right"))
    params.update(
        page_id=page["id"],
        notice=(
            f"Please disregard the page for {inc['external_ref']}: it reached you by mistake. "
            f"{params['right_name']} is taking it."
        ),
        message=(
            f"[{inc['severity']}] {inc['title']} ({inc['external_ref']}): you are on call "
            f"for this one{rng.choice(['', ', sorry for the delay'])}"
        ),
        right_pages=pages_before(fx, inc["id"], params["right_id"]) + 1,
        wrong_pages=pages_before(fx, inc["id"], params["wrong_id"]),
    )
    return params


DISREGARD = {"incident_id": "{incident_id}", "kind": "disregard", "recipient": "{wrong_id}"}
RETRACT = WorkflowSpec(
    id="tix-retract-mistaken-page",
    domain="ticketing",
    split="val",
    kind="compensation",
    instruction=(
        "Incident {external_ref} ({incident_id}) was assigned and paged to {wrong_name} "
        "({wrong_id}) by mistake: they are on {wrong_team}, not on the {team} rota. First "
        "reassign the incident to {right_name} ({right_id}) and page {right_name} with the "
        'message "{message}"; then retract the mistaken page {page_id} with the message '
        '"{notice}". {wrong_name} must get exactly one disregard notice and no further page.'
    ),
    tools=[
        "get_incident",
        "list_pages",
        "list_notices",
        "retract_page",
        "assign_incident",
        "page_responder",
    ],
    required_effects=[
        E(op="page.retract", identity={"page_id": "{page_id}"}),
        E(
            op="incident.assign",
            identity={"incident_id": "{incident_id}", "responder_id": "{right_id}"},
        ),
        page_sent("{right_id}"),
    ],
    forbidden_effects=[page_sent("{wrong_id}")],
    invariants=[
        P.field_is(
            "the mistaken page is retracted", "tk_pages", {"id": "{page_id}"}, "retracted", True
        ),
        # Nobody was told to disregard anything about this incident before: the one notice
        # that matches is the episode's.
        P.field_is("one disregard notice", "tk_notices", DISREGARD, "message", "{notice}"),
        P.field_is("the notice names the page", "tk_notices", DISREGARD, "page_id", "{page_id}"),
        P.field_is("the incident is reassigned", "tk_incidents", INC, "assignee_id", "{right_id}"),
        paged("the right responder was paged once", "{right_id}", "{right_pages}"),
        paged("the wrong responder was not paged again", "{wrong_id}", "{wrong_pages}"),
    ],
    # The forward effects (reassign, page the right responder) come first; the fault hits
    # the compensation of the fixture's mistake that follows them.
    gold_plan=[
        GoldStep(tool="get_incident", arguments={"incident_id": "{incident_id}"}),
        GoldStep(
            tool="assign_incident",
            arguments={"incident_id": "{incident_id}", "responder_id": "{right_id}"},
        ),
        GoldStep(
            tool="page_responder",
            arguments={
                "incident_id": "{incident_id}",
                "responder_id": "{right_id}",
                "message": "{message}",
            },
        ),
        GoldStep(tool="retract_page", arguments={"page_id": "{page_id}", "message": "{notice}"}),
    ],
    scenarios=[
        FaultScenario.on(
            "comp-lost-ack",
            B.DURING_COMPENSATION,
            "retract_page",
            compensation_commits=True,
            description="the right responder is paged, then the disregard notice goes out "
            "and its response is lost",
        ),
        FaultScenario.on(
            "comp-pre-reset",
            B.DURING_COMPENSATION,
            "retract_page",
            description="the right responder is paged, then the retraction is lost on the way",
        ),
    ],
    draw_params=_retract_params,
)
