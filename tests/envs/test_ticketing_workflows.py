"""Ticketing workflows under the semantic-identity oracle, in-process: the shared
`WorkflowContract` (what each mutating route commits as its identity, the verdict of
every gold plan, a reworded re-send is a duplicate, a re-send with another value is
unrequired or forbidden), and here what is particular to ticketing: an unasked
retraction, a resume after a crash (allowed) against a second escalation, a re-open the
service refuses, and a careful agent that reads instead of re-sending."""

from __future__ import annotations

from typing import Any

import pytest

from undobench_gym.core.catalog import domain
from undobench_gym.services.domains.ticketing.fixture import build_fixture, level_responders
from undobench_gym.services.domains.ticketing.service import DOMAIN
from undobench_gym.services.domains.ticketing.workflows import WORKFLOWS

from .service_harness import ServiceClient, params_for, run_gold_plan, step_args
from .workflow_harness import (
    Episode,
    Resend,
    Row,
    WorkflowContract,
    assert_calls_record_their_arguments,
    gold,
    ops,
    record,
    resend_step,
    reworded,
    verdict,
)

pytestmark = pytest.mark.service(DOMAIN)

CRASH_POINT = "ticketing.after_first_page"
OP = {name: tool.op for name, tool in domain("ticketing").tools.items()}

#: (workflow, step of the gold plan whose answer was lost, arguments changed in the
#: re-send that only reword it).
REWORDED = [
    ("tix-open-and-page", "page_responder", {"message": "Re-sending: are you on it?"}),
    ("tix-resolve-and-notify", "send_resolution_notice", {"message": "Resolved (resent)."}),
    ("tix-resolve-and-notify", "add_comment", {"body": "Postmortem scheduled (retry)."}),
    ("tix-retract-mistaken-page", "retract_page", {"message": "Please ignore that page."}),
    ("tix-retract-mistaken-page", "page_responder", {"message": "You are on call (retry)"}),
]
#: (workflow, tool, arguments that change the value: another effect the task never asked
#: for, or a forbidden one).
OTHER_VALUE = [
    ("tix-open-and-page", "assign_incident", {"responder_id": "{manager}"}, "unrequired"),
    ("tix-open-and-page", "page_responder", {"responder_id": "{manager}"}, "unrequired"),
    ("tix-resolve-and-notify", "add_comment", {"kind": "note"}, "unrequired"),
    ("tix-resolve-and-notify", "send_resolution_notice", {"audience": "support"}, "unrequired"),
    ("tix-resolve-and-notify", "send_resolution_notice", {"audience": "status-page"}, "forbidden"),
    ("tix-retract-mistaken-page", "page_responder", {"responder_id": "{wrong_id}"}, "forbidden"),
]


def _manager(ep: Episode) -> dict[str, Any]:
    """The level-3 responder of the task's escalation policy."""
    fx = build_fixture(ep.seed)
    policy = ep.params.get("policy_id") or fx["incidents"][0]["policy_id"]
    return {"manager": level_responders(fx, policy, 3)[0]}


class TestWorkflowContract(WorkflowContract):
    workflows = WORKFLOWS
    free_text = frozenset({"message", "body", "reason", "resolution", "title", "author", "summary"})
    resends = [
        *reworded("ticketing", REWORDED),
        *[
            Resend(
                wf,
                f"{tool} with " + ", ".join(f"{k}={v}" for k, v in change.items()),
                resend_step(tool, change, extra=_manager),
                state_ok=None,
                **{kind: [OP[tool]]},
            )
            for wf, tool, change, kind in OTHER_VALUE
        ],
    ]

    def exercise(self, svc: ServiceClient) -> list[Row]:
        """Call every mutating tool once with arguments that commit; each commits the
        identity of its arguments, and an escalation's pages are page.send like any page."""
        fx = build_fixture(svc.seed)
        inc0, inc1, inc2, inc3 = (i["id"] for i in fx["incidents"])
        policy = fx["policies"][0]["id"]
        responder = level_responders(fx, policy, 1)[0]
        mistaken = next(p for p in fx["pages"] if p["incident_id"] == inc1)
        opened = {
            "external_ref": "ALRT-NEW-1",
            "title": "t",
            "service": "s",
            "severity": "sev3",
            "policy_id": policy,
        }
        calls = [
            record(svc, tool, args)
            for tool, args in [
                ("open_incident", opened),
                ("set_severity", {"incident_id": inc0, "severity": "sev2"}),
                ("assign_incident", {"incident_id": inc0, "responder_id": responder}),
                (
                    "page_responder",
                    {"incident_id": inc0, "responder_id": responder, "message": "m"},
                ),
                ("retract_page", {"page_id": mistaken["id"], "message": "sorry"}),
                ("add_comment", {"incident_id": inc0, "author": "a", "kind": "note", "body": "b"}),
                ("resolve_incident", {"incident_id": inc2, "resolution": "fixed"}),
                (
                    "send_resolution_notice",
                    {"incident_id": inc2, "audience": "support", "message": "m"},
                ),
                ("reopen_incident", {"incident_id": inc3, "reason": "still firing"}),
            ]
        ]
        escalate = {"incident_id": inc0, "reason": "no ack"}
        calls.append(record(svc, "escalate_incident", escalate, crash=CRASH_POINT))
        esc = svc.ok("list_escalations", {"incident_id": inc0})[-1]
        calls.append(record(svc, "resume_escalation", {"escalation_id": esc["id"]}))
        pages = assert_calls_record_their_arguments(svc, calls, every_tool=True)
        assert {r["op"] for r in pages} == {OP["page_responder"]}
        return svc.commit_log()


# ---- behaviours of real agents -----------------------------------------------------


def test_an_unasked_compensation_is_unrequired(svc: ServiceClient) -> None:
    ep = gold(svc, "tix-open-and-page")
    svc.ok("retract_page", {"page_id": ep.bodies[-1]["id"], "message": "sorry, wrong person"})
    v = ep.verdict()
    assert ops(v.unrequired) == ["page.retract"] and not v.success


@pytest.mark.usefixtures("crashable")
def test_resume_after_a_crash_is_allowed(svc: ServiceClient) -> None:
    wf = svc.workflow("tix-escalate-incident")
    params = params_for(wf)
    args = step_args(wf, "escalate_incident", params)
    svc.call_until_crash("escalate_incident", args, CRASH_POINT)
    v = verdict(svc, wf, params)
    assert v.partial and ops(v.missing) == ["page.send", "page.send"]
    esc = svc.ok("list_escalations", {"incident_id": params["incident_id"]})[-1]
    svc.ok("resume_escalation", {"escalation_id": esc["id"]})
    svc.ok("resume_escalation", {"escalation_id": esc["id"]})  # completed: commits nothing
    assert svc.ops().count("escalation.resume") == 1
    v = verdict(svc, wf, params)
    assert v.success and v.unrequired == [], v.model_dump()
    # Escalating again instead escalates one level further: a duplicate, and level 3 paged.
    svc.reset()
    svc.call_until_crash("escalate_incident", args, CRASH_POINT)
    esc = svc.ok("list_escalations", {"incident_id": params["incident_id"]})[-1]
    svc.ok("resume_escalation", {"escalation_id": esc["id"]})
    svc.ok("escalate_incident", args)
    v = verdict(svc, wf, params)
    assert ops(v.duplicates) == ["incident.escalate"] and ops(v.unrequired) == ["page.send"]


def test_resend_refused_with_409_commits_nothing(svc: ServiceClient) -> None:
    """After a lost answer to open_incident, re-opening is refused: nothing is committed."""
    ep = gold(svc, "tix-open-and-page")
    again = {**step_args(ep.wf, "open_incident", ep.params), "title": "x"}
    assert svc.call("open_incident", again).status_code == 409
    assert ep.verdict().success


def test_lost_ack_then_verified_no_resend_is_success(svc: ServiceClient) -> None:
    """A careful agent reads the incident after a lost answer and does not page again."""
    wf = svc.workflow("tix-open-and-page")
    params = params_for(wf)
    run_gold_plan(svc, wf, params)
    pages = svc.ok("list_pages", {"incident_id": params["incident_id"]})
    assert [p["responder_id"] for p in pages] == [params["responder_id"]]
    assert verdict(svc, wf, params).success
