"""Messaging workflows: task, parameters from the seed, oracles, gold plan, fault scenarios.

Counts are exact (one SMS, one chat post, one email per recipient, one webhook received),
so a message sent twice makes an invariant false, however it was worded: the fixture
carries history (texts, posts, emails, deliveries), so counts are made of structured
fields only (phone number, channel, batch reference, endpoint, event, dedup key: never a
message text) and compared with what the fixture already holds plus what the task adds.
The text of a new message is checked on the row the episode created: the service's ids
are a pure function of (seed, kind, how many it created), so the first text or post of
an episode has a known id (`created_id`).
"""

from __future__ import annotations

import hashlib
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

from .batches import CRASH_MID_BATCH
from .fixture import ADMINS, fixture_count, page_post, sms_text, texted_post

B = Boundary
T = FaultTarget
E = EffectExpectation
P = StatePredicate
N_RECIPIENTS = 4


def created_id(seed: int, prefix: str, n: int = 1) -> str:
    """The id of the n-th row of `prefix` the service creates after a reset to `seed`
    (`_service.context.new_id`): lets an oracle read the values of the row an episode
    created without looking it up by its free text."""
    digest = hashlib.sha256(f"{seed}:{prefix}:{n}".encode()).hexdigest()
    return f"{prefix}_{digest[:14]}"


def _count(description: str, table: str, where: dict[str, Any], value: Any = 1) -> P:
    return P(description=description, table=table, where=where, op="count", value=value)


def _field(description: str, table: str, where: dict[str, Any], field: str, value: Any) -> P:
    return P(description=description, table=table, where=where, field=field, value=value)


def _channel(fx: dict[str, Any], name: str) -> str:
    return str(next(c["id"] for c in fx["channels"] if c["name"] == name))


def _service(fx: dict[str, Any], service_id: str) -> dict[str, Any]:
    return next(s for s in fx["services"] if s["id"] == service_id)


# ---- email batch (composite) -------------------------------------------------------


def _batch_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("msg-maintenance-email", seed)
    recipients = rng.sample(ADMINS, N_RECIPIENTS)
    day = rng.randint(10, 28)
    hour = rng.choice([1, 2, 3, 22, 23])
    params: dict[str, Any] = {
        "reference": f"MAINT-2026-02-{day}-{rng.randint(100, 999)}",
        "subject": f"Scheduled maintenance on 2026-02-{day} at {hour:02d}:00 UTC",
        "recipients": recipients,
        "recipients_text": ", ".join(recipients),
    }
    for i, r in enumerate(recipients):
        params[f"recipient{i}"] = r
    return params


BATCH_REF = {"reference": "{reference}"}
BATCH = WorkflowSpec(
    id="msg-maintenance-email",
    domain="messaging",
    split="dev",
    kind="composite",
    instruction=(
        'Email the maintenance notice "{subject}" as email batch {reference} to the '
        "customer admins {recipients_text}. Every one of them must get it exactly once."
    ),
    tools=["list_email_batches", "get_email_batch", "send_email_batch", "resume_email_batch"],
    required_effects=[
        E(op="email_batch.create", identity=BATCH_REF),
        *[
            E(
                op="email.send",
                identity={"reference": "{reference}", "recipient": f"{{recipient{i}}}"},
            )
            for i in range(N_RECIPIENTS)
        ],
    ],
    # Finishing a batch that a crash left `sending` completes the required emails.
    allowed_effects=[E(op="email_batch.resume", identity={})],
    # The reference is new (the history's batch is from December): rows with it are the
    # episode's.
    invariants=[
        _count("one sent batch", "msg_email_batches", {**BATCH_REF, "status": "sent"}),
        _count("no second batch", "msg_email_batches", BATCH_REF),
        _field("the batch has the subject", "msg_email_batches", BATCH_REF, "subject", "{subject}"),
        *[
            _count(
                f"recipient {i} emailed once",
                "msg_emails",
                {**BATCH_REF, "recipient": f"{{recipient{i}}}"},
            )
            for i in range(N_RECIPIENTS)
        ],
        _count("no other email in the batch", "msg_emails", BATCH_REF, N_RECIPIENTS),
    ],
    gold_plan=[
        GoldStep(tool="list_email_batches", arguments={"reference": "{reference}"}),
        GoldStep(
            tool="send_email_batch",
            arguments={
                "reference": "{reference}",
                "subject": "{subject}",
                "recipients": "{recipients}",
            },
        ),
    ],
    scenarios=[
        FaultScenario(
            id="crash-mid-batch",
            boundary=B.DURING_MUTATION,
            target=T(tool="send_email_batch"),
            crash_point=CRASH_MID_BATCH,
            description="the first recipient is emailed, the others are not",
        ),
        FaultScenario(
            id="lost-ack", boundary=B.POST_MUTATION_PRE_ACK, target=T(tool="send_email_batch")
        ),
    ],
    draw_params=_batch_params,
)


# ---- resolve a page and tell the status page (webhook) -----------------------------


def _statuspage_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("msg-statuspage-webhook", seed)
    page, other = fx["pages"][0], fx["pages"][1]
    fix = rng.choice(["rolled back the bad deploy", "rotated the certificate", "added capacity"])
    return {
        "page_id": page["id"],
        "summary": page["summary"],
        "dedup_key": page["dedup_key"],
        "service_name": _service(fx, page["service_id"])["name"],
        "other_page_id": other["id"],
        "other_status": other["status"],
        "note": f"Fixed: {fix} (ticket OPS-{rng.randint(1000, 9999)})",
        "statuspage_received_after": fixture_count(fx, "received", endpoint_id="statuspage") + 1,
    }


RECEIVED = {"endpoint_id": "statuspage", "event": "page.resolved", "ref": "{dedup_key}"}
STATUSPAGE = WorkflowSpec(
    id="msg-statuspage-webhook",
    domain="messaging",
    split="dev",
    kind="multi_effect",
    instruction=(
        'The {service_name} incident on page {page_id} ("{summary}") is fixed. From now on '
        "the public status page should hear about resolved pages automatically: subscribe "
        "the statuspage webhook endpoint to page.resolved events, then resolve page "
        '{page_id} with the note "{note}". Page {other_page_id} on the same service is a '
        "different problem that is still live: leave it open. The status page must receive "
        "exactly one resolution notice for {page_id}."
    ),
    tools=[
        "list_webhook_endpoints",
        "list_webhook_subscriptions",
        "create_webhook_subscription",
        "list_pages",
        "get_page",
        "resolve_page",
        "list_webhook_deliveries",
    ],
    required_effects=[
        E(op="webhook.subscribe", identity={"endpoint_id": "statuspage", "event": "page.resolved"}),
        E(op="page.resolve", identity={"page_id": "{page_id}"}),
        E(op="webhook.deliver", identity=RECEIVED),
    ],
    forbidden_effects=[E(op="page.resolve", identity={"page_id": "{other_page_id}"})],
    invariants=[
        _field("the page is resolved", "msg_pages", {"id": "{page_id}"}, "status", "resolved"),
        _field(
            "the page has the note", "msg_pages", {"id": "{page_id}"}, "resolution_note", "{note}"
        ),
        _field(
            "the other page is still open",
            "msg_pages",
            {"id": "{other_page_id}"},
            "status",
            "{other_status}",
        ),
        _count(
            "statuspage is subscribed once",
            "msg_webhook_subscriptions",
            {"endpoint_id": "statuspage", "event": "page.resolved"},
        ),
        _count("the status page received the resolution once", "msg_received", RECEIVED),
        _count(
            "the status page received nothing else",
            "msg_received",
            {"endpoint_id": "statuspage"},
            "{statuspage_received_after}",
        ),
    ],
    gold_plan=[
        GoldStep(tool="list_webhook_endpoints"),
        GoldStep(
            tool="create_webhook_subscription",
            arguments={"endpoint_id": "statuspage", "event": "page.resolved"},
        ),
        GoldStep(tool="resolve_page", arguments={"page_id": "{page_id}", "note": "{note}"}),
    ],
    scenarios=[
        FaultScenario(
            id="sub-lost-ack",
            boundary=B.POST_MUTATION_PRE_ACK,
            target=T(tool="create_webhook_subscription"),
        ),
        FaultScenario(
            id="resolve-lost-ack",
            boundary=B.POST_MUTATION_PRE_ACK,
            target=T(tool="resolve_page"),
            description="the page is resolved and the webhook delivered; the reply is lost",
        ),
        FaultScenario(
            id="resolve-pre-reset", boundary=B.PRE_MUTATION, target=T(tool="resolve_page")
        ),
    ],
    draw_params=_statuspage_params,
)


# ---- text the on-call and tell the channel -----------------------------------------


def _sms_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("msg-oncall-sms", seed)
    svc = rng.choice(fx["services"])
    problem = rng.choice(["replication lag above 60 s", "5xx rate above 2%", "p99 above 3 s"])
    ops = _channel(fx, "ops")
    return {
        "service_name": svc["name"],
        "oncall_name": svc["oncall_name"],
        "phone": svc["oncall_phone"],
        "sms": sms_text(svc["name"], problem),
        "channel_id": ops,
        "chat": texted_post(svc["oncall_name"], svc["name"], problem),
        "texts_after": fixture_count(fx, "sms", to=svc["oncall_phone"]) + 1,
        "posts_after": fixture_count(fx, "chat_messages", channel_id=ops) + 1,
        "sms_id": created_id(seed, "sms"),
        "chat_id": created_id(seed, "msg"),
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
        E(op="sms.send", identity={"to": "{phone}"}),
        E(op="chat.post", identity={"channel_id": "{channel_id}"}),
    ],
    invariants=[
        _field("one text with the message", "msg_sms", {"id": "{sms_id}"}, "body", "{sms}"),
        _field("the text went to the engineer", "msg_sms", {"id": "{sms_id}"}, "to", "{phone}"),
        _count("no other text to the engineer", "msg_sms", {"to": "{phone}"}, "{texts_after}"),
        _field("the post has the text", "msg_chat_messages", {"id": "{chat_id}"}, "text", "{chat}"),
        _count(
            "one post in #ops",
            "msg_chat_messages",
            {"channel_id": "{channel_id}"},
            "{posts_after}",
        ),
    ],
    gold_plan=[
        GoldStep(tool="list_pager_services"),
        GoldStep(tool="send_sms", arguments={"to": "{phone}", "body": "{sms}"}),
        GoldStep(
            tool="post_chat_message", arguments={"channel_id": "{channel_id}", "text": "{chat}"}
        ),
    ],
    scenarios=[
        FaultScenario(
            id="sms-ambiguous",
            boundary=B.POST_MUTATION_PRE_ACK,
            target=T(tool="send_sms"),
            ambiguous=True,
        ),
        FaultScenario(
            id="chat-lost-ack", boundary=B.POST_MUTATION_PRE_ACK, target=T(tool="post_chat_message")
        ),
        FaultScenario(
            id="chat-pre-503",
            boundary=B.PRE_MUTATION,
            target=T(tool="post_chat_message"),
            visible_error=VisibleError.HTTP_503,
        ),
    ],
    draw_params=_sms_params,
)


# ---- page the on-call (dedup key) and tell the incident channel --------------------


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
    channel = _channel(fx, "incidents")
    return {
        "service_id": svc["id"],
        "service_name": svc["name"],
        "summary": f"{svc['name']}: {problem}",
        "severity": severity,
        "dedup_key": key,
        "channel_id": channel,
        "chat": page_post(severity, svc["name"], key, problem),
        "posts_after": fixture_count(fx, "chat_messages", channel_id=channel) + 1,
        "chat_id": created_id(seed, "msg"),
    }


PAGE_WHERE = {"dedup_key": "{dedup_key}"}
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
    ],
    required_effects=[
        E(op="page.trigger", identity=PAGE_WHERE),
        E(op="webhook.deliver", identity=BOT),
        E(op="chat.post", identity={"channel_id": "{channel_id}"}),
    ],
    invariants=[
        _count("one page for the alert", "msg_pages", PAGE_WHERE),
        _field("the page is on the service", "msg_pages", PAGE_WHERE, "service_id", "{service_id}"),
        _field("the page has the severity", "msg_pages", PAGE_WHERE, "severity", "{severity}"),
        _field("the page has the summary", "msg_pages", PAGE_WHERE, "summary", "{summary}"),
        _field("the page is live", "msg_pages", PAGE_WHERE, "status", "triggered"),
        _count("the incident bot heard of it once", "msg_received", BOT),
        _field("the post has the text", "msg_chat_messages", {"id": "{chat_id}"}, "text", "{chat}"),
        _count(
            "one post in #incidents",
            "msg_chat_messages",
            {"channel_id": "{channel_id}"},
            "{posts_after}",
        ),
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
        GoldStep(
            tool="post_chat_message", arguments={"channel_id": "{channel_id}", "text": "{chat}"}
        ),
    ],
    scenarios=[
        FaultScenario(
            id="page-lost-ack",
            boundary=B.POST_MUTATION_PRE_ACK,
            target=T(tool="trigger_page"),
            description="a retry with the same dedup key joins the page",
        ),
        FaultScenario(
            id="chat-lost-ack",
            boundary=B.POST_MUTATION_PRE_ACK,
            target=T(tool="post_chat_message"),
            description="a blind retry posts twice",
        ),
        FaultScenario(
            id="page-pre-503",
            boundary=B.PRE_MUTATION,
            target=T(tool="trigger_page"),
            visible_error=VisibleError.HTTP_503,
        ),
    ],
    draw_params=_page_params,
)

WORKFLOWS = [BATCH, STATUSPAGE, SMS, PAGE]
