"""Messaging workflow: resolve a page and tell the status page through a webhook."""

from __future__ import annotations

from typing import Any

from undobench_gym.contract.seeding import rng_for
from undobench_gym.contract.specs import FaultScenario, GoldStep, WorkflowSpec
from undobench_gym.services.domains.messaging.fixture import fixture_count
from undobench_gym.services.domains.messaging.workflows_common import B, E, P, pager_service


def _statuspage_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("msg-statuspage-webhook", seed)
    page, other = fx["pages"][0], fx["pages"][1]
    fix = rng.choice(["rolled back the bad deploy", "rotated the certificate", "added capacity"])
    return {
        "page_id": page["id"],
        "summary": page["summary"],
        "dedup_key": page["dedup_key"],
        "service_name": pager_service(fx, page["service_id"])["name"],
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
        P.field_is("the page is resolved", "msg_pages", {"id": "{page_id}"}, "status", "resolved"),
        P.field_is(
            "the page has the note", "msg_pages", {"id": "{page_id}"}, "resolution_note", "{note}"
        ),
        P.field_is(
            "the other page is still open",
            "msg_pages",
            {"id": "{other_page_id}"},
            "status",
            "{other_status}",
        ),
        P.count(
            "statuspage is subscribed once",
            "msg_webhook_subscriptions",
            {"endpoint_id": "statuspage", "event": "page.resolved"},
        ),
        P.count("the status page received the resolution once", "msg_received", RECEIVED),
        P.count(
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
        FaultScenario.on("sub-lost-ack", B.POST_MUTATION_PRE_ACK, "create_webhook_subscription"),
        FaultScenario.on(
            "resolve-lost-ack",
            B.POST_MUTATION_PRE_ACK,
            "resolve_page",
            description="the page is resolved and the webhook delivered; the reply is lost",
        ),
        FaultScenario.on("resolve-pre-reset", B.PRE_MUTATION, "resolve_page"),
    ],
    draw_params=_statuspage_params,
)
