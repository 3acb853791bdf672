"""Messaging workflows under the semantic-identity oracle, in-process: the shared
`WorkflowContract` (what each mutating route commits as its identity, the verdict of
every gold plan, a reworded re-send is a duplicate, a re-send with another value is
unrequired, a re-trigger under the same dedup key is absorbed), and here what is
particular to messaging: created ids, no compensation faults, and a resume after a crash
(allowed)."""

from __future__ import annotations

from typing import Any

import pytest

from undobench_gym.contract.specs import Boundary
from undobench_gym.services.domains._service.kit import seeded_id
from undobench_gym.services.domains.messaging.batches import CRASH_MID_BATCH
from undobench_gym.services.domains.messaging.fixture import build_fixture
from undobench_gym.services.domains.messaging.service import DOMAIN
from undobench_gym.services.domains.messaging.workflows import WORKFLOWS

from .service_harness import SEED, ServiceClient, params_for, step_args
from .workflow_harness import (
    Episode,
    Resend,
    Row,
    WorkflowContract,
    assert_calls_record_their_arguments,
    deliver_webhooks_in_process,
    ops,
    record,
    resend_step,
    reworded,
    verdict,
)

pytestmark = pytest.mark.service(DOMAIN)


@pytest.fixture
def svc(svc: ServiceClient, monkeypatch: pytest.MonkeyPatch) -> ServiceClient:
    """The service, with webhook deliveries handed to its own admin app's receiver."""
    deliver_webhooks_in_process(svc, monkeypatch)
    return svc


def _values(ep: Episode) -> dict[str, Any]:
    """The #support channel, and an on-call phone other than the task's."""
    fx = build_fixture(ep.seed)
    values = {"support": next(c["id"] for c in fx["channels"] if c["name"] == "support")}
    if "phone" in ep.params:
        phones = [s["oncall_phone"] for s in fx["services"]]
        values["other_phone"] = next(p for p in phones if p != ep.params["phone"])
    return values


#: Reworded re-sends still carry the facts the task gave the message (its `mentions`): the
#: same message, so a duplicate however worded.
REWORDED = [
    (
        "msg-oncall-sms",
        "send_sms",
        {"body": "{service_name} has {problem}: please join #incidents (resent)"},
    ),
    (
        "msg-oncall-sms",
        "post_chat_message",
        {"text": "Texted the on-call again about {service_name}: {problem}, fyi"},
    ),
    (
        "msg-page-oncall",
        "post_chat_message",
        {"text": "Paged for {service_name} ({problem}); updates here (retry)"},
    ),
]
#: Follow-ups that carry none of the task's facts are other messages: unrequired effects,
#: never duplicates of the task's message.
FOLLOW_UPS = [
    ("msg-oncall-sms", "send_sms", "body", "Please join #incidents (resent)", "sms.send"),
    ("msg-oncall-sms", "post_chat_message", "text", "Texted the on-call again, fyi", "chat.post"),
    ("msg-page-oncall", "post_chat_message", "text", "Still looking; updates here", "chat.post"),
]


class TestWorkflowContract(WorkflowContract):
    workflows = WORKFLOWS
    free_text = frozenset({"text", "body", "note", "summary", "subject", "message"})
    #: Effects a route commits besides its own, and their identity fields.
    sub_effects = {
        "email.send": frozenset({"reference", "recipient"}),
        "webhook.deliver": frozenset({"endpoint_id", "event", "ref"}),
    }
    resends = [
        *reworded("messaging", REWORDED),
        Resend(
            "msg-oncall-sms",
            "sms to another phone",
            resend_step("send_sms", {"to": "{other_phone}"}, _values),
            unrequired=["sms.send"],
            state_ok=None,
        ),
        Resend(
            "msg-oncall-sms",
            "post to another channel",
            resend_step("post_chat_message", {"channel_id": "{support}"}, _values),
            unrequired=["chat.post"],
            state_ok=None,
        ),
        # The same alert under a fresh dedup key pages the engineer twice: a duplicate page
        # (the key is the client's, not the page's identity), and the incident bot hears of
        # the second page as another event.
        Resend(
            "msg-page-oncall",
            "page under another dedup key",
            resend_step("trigger_page", {"dedup_key": "{dedup_key}-2"}),
            duplicates=["page.trigger"],
            unrequired=["webhook.deliver"],
            state_ok=None,
        ),
        *[
            Resend(
                wf,
                f"{tool}: a different follow-up",
                resend_step(tool, {arg: text}),
                unrequired=[op],
                state_ok=None,
            )
            for wf, tool, arg, text, op in FOLLOW_UPS
        ],
        Resend(
            "msg-statuspage-webhook",
            "resolve another page",
            resend_step("resolve_page", {"page_id": "{other_page_id}"}),
            forbidden=["page.resolve"],
            unrequired=["webhook.deliver"],
            state_ok=None,
        ),
        Resend(
            "msg-maintenance-email",
            "batch under another reference",
            resend_step("send_email_batch", {"reference": "{reference}-B"}),
            unrequired=["email.send"] * 4 + ["email_batch.create"],
            state_ok=None,
        ),
        # A re-trigger with the same dedup key joins the page: nothing more is committed.
        Resend(
            "msg-page-oncall",
            "re-trigger under the same dedup key",
            resend_step("trigger_page", {"summary": "reworded summary"}),
            state_ok=True,
        ),
    ]

    def exercise(self, svc: ServiceClient) -> list[Row]:
        """Call every mutating tool once with arguments that commit; each commits the
        identity of its arguments, the sub-effects besides."""
        fx = build_fixture(svc.seed)
        channel, service = fx["channels"][0]["id"], fx["services"][0]
        live, acked = fx["pages"][0]["id"], fx["pages"][1]["id"]
        trigger = {
            "service_id": service["id"],
            "summary": "s",
            "severity": "low",
            "dedup_key": "k-1",
        }
        batch = {
            "reference": "R-1",
            "subject": "s",
            "recipients": ["a@x.example.com", "b@x.example.com"],
        }
        calls = [
            record(svc, tool, args)
            for tool, args in [
                ("post_chat_message", {"channel_id": channel, "text": "hello"}),
                ("send_sms", {"to": service["oncall_phone"], "body": "hi"}),
                (
                    "create_webhook_subscription",
                    {"endpoint_id": "statuspage", "event": "page.resolved"},
                ),
                ("trigger_page", trigger),
                ("acknowledge_page", {"page_id": live}),
                ("resolve_page", {"page_id": acked, "note": "done"}),
            ]
        ]
        posted = seeded_id(svc.seed, "msg", 1)  # the post above
        calls.append(
            record(svc, "delete_chat_message", {"channel_id": channel, "message_id": posted})
        )
        calls.append(record(svc, "send_email_batch", batch, crash=CRASH_MID_BATCH))
        (found,) = svc.ok("list_email_batches", {"reference": "R-1"})
        calls.append(record(svc, "resume_email_batch", {"batch_id": found["id"]}))
        subs = assert_calls_record_their_arguments(svc, calls, every_tool=True)
        assert {r["op"] for r in subs} == set(self.sub_effects)
        return svc.commit_log()


def test_seeded_id_is_the_services_next_id(svc: ServiceClient) -> None:
    fx = build_fixture(SEED)
    first = svc.ok("post_chat_message", {"channel_id": fx["channels"][1]["id"], "text": "a"})
    second = svc.ok("post_chat_message", {"channel_id": fx["channels"][1]["id"], "text": "b"})
    assert [first["id"], second["id"]] == [seeded_id(SEED, "msg", n) for n in (1, 2)]
    assert seeded_id(SEED, "msg", 1) not in {m["id"] for m in fx["chat_messages"]}


def test_no_fault_hits_a_compensation() -> None:
    """Messaging has no compensating route, so no DURING_COMPENSATION scenario."""
    for wf in WORKFLOWS:
        for sc in wf.scenarios:
            assert sc.boundary is not Boundary.DURING_COMPENSATION, (wf.id, sc.id)


@pytest.mark.usefixtures("crashable")
def test_resume_after_a_crash_is_allowed(svc: ServiceClient) -> None:
    wf = svc.workflow("msg-maintenance-email")
    params = params_for(wf)
    args = step_args(wf, "send_email_batch", params)
    svc.call_until_crash("send_email_batch", args, CRASH_MID_BATCH)
    v = verdict(svc, wf, params)  # giving up here leaves a half-sent batch
    assert v.partial and ops(v.missing) == ["email.send"] * 3 and not v.harmless
    (batch,) = svc.ok("list_email_batches", {"reference": params["reference"]})
    svc.ok("resume_email_batch", {"batch_id": batch["id"]})
    svc.ok("resume_email_batch", {"batch_id": batch["id"]})  # sent: commits nothing
    assert svc.ops().count("email_batch.resume") == 1
    v = verdict(svc, wf, params)
    assert v.success and v.unrequired == [], v.model_dump()
