"""Messaging workflows: reach the on-call (a text, a page under a dedup key) and tell
the team's channel."""

from __future__ import annotations

from typing import Any

from undobench_gym.contract.seeding import rng_for
from undobench_gym.contract.specs import FaultScenario, GoldStep, VisibleError, WorkflowSpec
from undobench_gym.services.domains._service.kit import seeded_id
from undobench_gym.services.domains.messaging.fixture import (
    fixture_count,
    page_post,
    sms_text,
    texted_post,
)
from undobench_gym.services.domains.messaging.workflows_common import B, E, P, channel_id

#: The post is the one that carries the task's facts, however worded: a reworded re-send is
#: a duplicate, a different follow-up in the channel another (unrequired) message.
CHAT_POSTED = E(
    op="chat.post",
    identity={"channel_id": "{channel_id}"},
    mentions={"text": ["{service_name}", "{problem}"]},
)
#: The gold step that tells the channel: the same post in both workflows.
POST = GoldStep(
    tool="post_chat_message", arguments={"channel_id": "{channel_id}", "text": "{chat}"}
)


def posted_once(channel: str) -> list[P]:
    """The episode's one post is in the channel with its text, and no other post is."""
    return [
        P.field_is(
            "the post has the text", "msg_chat_messages", {"id": "{chat_id}"}, "text", "{chat}"
        ),
        P.count(
            f"one post in {channel}",
            "msg_chat_messages",
            {"channel_id": "{channel_id}"},
            "{posts_after}",
        ),
    ]


def _sms_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("msg-oncall-sms", seed)
    svc = rng.choice(fx["services"])
    problem = rng.choice(["replication lag above 60 s", "5xx rate above 2%", "p99 above 3 s"])
    ops = channel_id(fx, "ops")
    return {
        "service_name": svc["name"],
        "problem": problem,
        "oncall_name": svc["oncall_name"],
        "phone": svc["oncall_phone"],
        "sms": sms_text(svc["name"], problem),
        "channel_id": ops,
        "chat": texted_post(svc["oncall_name"], svc["name"], problem),
        "texts_after": fixture_count(fx, "sms", to=svc["oncall_phone"]) + 1,
        "posts_after": fixture_count(fx, "chat_messages", channel_id=ops) + 1,
        "sms_id": seeded_id(seed, "sms", 1),
        "chat_id": seeded_id(seed, "msg", 1),
    }


SMS = WorkflowSpec(
    id="msg-oncall-sms",
    domain="messaging",
    split="val",
    kind="multi_effect",
    instruction=(
        "{service_name} shows a problem and {oncall_name} is on call for it. Text them at "
        '{phone} the message "{sms}", then post "{chat}" in the #ops channel '
        "({channel_id}). One text and one post, no more."
    ),
    tools=[
        "list_pager_services",
        "list_sms",
        "send_sms",
        "list_chat_messages",
        "post_chat_message",
    ],
    required_effects=[
        E(
            op="sms.send",
            identity={"to": "{phone}"},
            mentions={"body": ["{service_name}", "{problem}"]},
        ),
        CHAT_POSTED,
    ],
    invariants=[
        P.field_is("one text with the message", "msg_sms", {"id": "{sms_id}"}, "body", "{sms}"),
        P.field_is("the text went to the engineer", "msg_sms", {"id": "{sms_id}"}, "to", "{phone}"),
        P.count("no other text to the engineer", "msg_sms", {"to": "{phone}"}, "{texts_after}"),
        *posted_once("#ops"),
    ],
    gold_plan=[
        GoldStep(tool="list_pager_services"),
        GoldStep(tool="send_sms", arguments={"to": "{phone}", "body": "{sms}"}),
        POST,
    ],
    scenarios=[
        FaultScenario.on("sms-ambiguous", B.POST_MUTATION_PRE_ACK, "send_sms", ambiguous=True),
        FaultScenario.on("chat-lost-ack", B.POST_MUTATION_PRE_ACK, "post_chat_message"),
        FaultScenario.on(
            "chat-pre-503", B.PRE_MUTATION, "post_chat_message", visible_error=VisibleError.HTTP_503
        ),
    ],
    draw_params=_sms_params,
)


def _page_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("msg-page-oncall", seed)
    svc = rng.choice(fx["services"])
    taken = {p["dedup_key"] for p in fx["pages"]}
    key = next(
        k
        for k in (f"{svc['name']}-{rng.randint(10000, 99999)}" for _ in range(50))
        if k not in taken
    )
    problem = rng.choice(
        ["checkout errors above 5%", "login failures spiking", "timeouts at the edge"]
    )
    severity = rng.choice(["critical", "high"])
    channel = channel_id(fx, "incidents")
    return {
        "service_id": svc["id"],
        "service_name": svc["name"],
        "problem": problem,
        "summary": f"{svc['name']}: {problem}",
        "severity": severity,
        "dedup_key": key,
        "channel_id": channel,
        "chat": page_post(severity, svc["name"], key, problem),
        "posts_after": fixture_count(fx, "chat_messages", channel_id=channel) + 1,
        "chat_id": seeded_id(seed, "msg", 1),
    }


PAGE_WHERE = {"dedup_key": "{dedup_key}"}
#: The page is the alert it carries (the service and the problem), not its dedup key: a
#: second page with a fresh key is the same alert paged twice.
PAGED = E(
    op="page.trigger",
    identity={"service_id": "{service_id}"},
    mentions={"summary": ["{service_name}", "{problem}"]},
)
BOT = {"endpoint_id": "incident-bot", "event": "page.triggered", "ref": "{dedup_key}"}
PAGE = WorkflowSpec(
    id="msg-page-oncall",
    domain="messaging",
    split="test",
    kind="multi_effect",
    instruction=(
        "Page the on-call for {service_name} ({service_id}): a {severity} alert with the "
        'summary "{summary}" and the dedup key {dedup_key}. Then post "{chat}" in the '
        "#incidents channel ({channel_id}). The engineer must be paged once and the channel "
        "must get one post."
    ),
    tools=[
        "list_pager_services",
        "list_pages",
        "trigger_page",
        "list_chat_messages",
        "post_chat_message",
        # the inverses: an unwanted page can be resolved, an unwanted post deleted
        "resolve_page",
        "delete_chat_message",
    ],
    required_effects=[
        PAGED,
        E(op="webhook.deliver", identity=BOT),
        CHAT_POSTED,
    ],
    invariants=[
        P.count("one page for the alert", "msg_pages", PAGE_WHERE),
        P.field_is(
            "the page is on the service", "msg_pages", PAGE_WHERE, "service_id", "{service_id}"
        ),
        P.field_is("the page has the severity", "msg_pages", PAGE_WHERE, "severity", "{severity}"),
        P.field_is("the page has the summary", "msg_pages", PAGE_WHERE, "summary", "{summary}"),
        P.field_is("the page is live", "msg_pages", PAGE_WHERE, "status", "triggered"),
        P.count("the incident bot heard of it once", "msg_received", BOT),
        *posted_once("#incidents"),
    ],
    gold_plan=[
        GoldStep(tool="list_pager_services"),
        GoldStep(
            tool="trigger_page",
            arguments={
                "service_id": "{service_id}",
                "summary": "{summary}",
                "severity": "{severity}",
                "dedup_key": "{dedup_key}",
            },
        ),
        POST,
    ],
    scenarios=[
        FaultScenario.on(
            "page-lost-ack",
            B.POST_MUTATION_PRE_ACK,
            "trigger_page",
            description="a retry with the same dedup key joins the page",
        ),
        FaultScenario.on(
            "chat-lost-ack",
            B.POST_MUTATION_PRE_ACK,
            "post_chat_message",
            description="a blind retry posts twice",
        ),
        FaultScenario.on(
            "chat-502-after-commit",
            B.POST_MUTATION_PRE_ACK,
            "post_chat_message",
            visible_error=VisibleError.HTTP_502,
            description="the post is in the channel; the gateway answers 502",
        ),
        FaultScenario.on(
            "page-pre-503", B.PRE_MUTATION, "trigger_page", visible_error=VisibleError.HTTP_503
        ),
    ],
    draw_params=_page_params,
)
