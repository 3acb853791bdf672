"""Messaging fixtures carry a history consistent with their current state (every page
event delivered to its subscribers and logged by the receiver, a post in #incidents per
page, texts with their #ops note, a fully sent earlier email batch), and the workflows'
oracles and read-backs can tell that history from what an episode adds (that it stands
in for no left-out gold step, `WorkflowContract` checks for every domain)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from undobench_gym.services.domains.messaging.fixture import EPOCH_TEXT, build_fixture
from undobench_gym.services.domains.messaging.service import DOMAIN
from undobench_gym.services.domains.messaging.workflows import WORKFLOWS

from .service_harness import SEED, ServiceClient, failed_invariants, params_for, run_gold_plan
from .workflow_harness import (
    assert_service_seeds_fixture,
    deliver_webhooks_in_process,
)

pytestmark = pytest.mark.service(DOMAIN)
SEEDS = range(12)
#: The events a page's status implies it went through.
EVENTS = {
    "triggered": ["page.triggered"],
    "acknowledged": ["page.triggered", "page.acknowledged"],
    "resolved": ["page.triggered", "page.acknowledged", "page.resolved"],
}


@pytest.fixture
def svc(svc: ServiceClient, monkeypatch: pytest.MonkeyPatch) -> ServiceClient:
    """The service, with webhook deliveries handed to its own admin app's receiver."""
    deliver_webhooks_in_process(svc, monkeypatch)
    return svc


def _times(fx: dict[str, Any]) -> list[str]:
    fields = {
        "chat_messages": "posted",
        "sms": "sent",
        "email_batches": "created",
        "emails": "sent",
        "webhook_deliveries": "attempted",
        "received": "received",
        "pages": "updated",
        "webhook_subscriptions": "created",
    }
    return [r[f] for key, f in fields.items() for r in fx[key]]


@pytest.mark.parametrize("seed", SEEDS)
def test_history_agrees_with_the_current_state(seed: int) -> None:
    fx = build_fixture(seed)
    for key in ("chat_messages", "sms", "email_batches", "emails", "webhook_deliveries"):
        assert fx[key], f"{key}: no history"
        ids = [r["id"] for r in fx[key]]
        assert len(set(ids)) == len(ids), key
    assert all(t < EPOCH_TEXT for t in _times(fx)), "history ends before the episode starts"
    channels = {c["id"]: c["name"] for c in fx["channels"]}
    services = {s["id"]: s for s in fx["services"]}
    subs = {s["id"]: s for s in fx["webhook_subscriptions"]}
    # every delivery was logged by its receiver, and every log row has its delivery
    received = {r["delivery_id"]: r for r in fx["received"]}
    assert len(received) == len(fx["received"]) == len(fx["webhook_deliveries"])
    for d in fx["webhook_deliveries"]:
        sub = subs[d["subscription_id"]]
        assert (sub["endpoint_id"], sub["event"]) == (d["endpoint_id"], d["event"])
        assert d["status"] == "delivered" and 200 <= d["response_status"] < 300
        assert sub["created"] <= d["attempted"]
        r = received[d["id"]]
        assert (r["endpoint_id"], r["event"], r["ref"], r["received"]) == (
            d["endpoint_id"],
            d["event"],
            d["ref"],
            d["attempted"],
        )
        assert r["body"]["id"] == d["id"] and r["body"]["data"]["dedup_key"] == d["ref"]
    # each page went through the events its status implies, each delivered once to every
    # endpoint subscribed to that event
    by_ref = Counter((d["ref"], d["event"], d["endpoint_id"]) for d in fx["webhook_deliveries"])
    expected: Counter[tuple[str, str, str]] = Counter()
    for p in fx["pages"]:
        assert p["service_id"] in services and p["created"] <= p["updated"]
        assert (p["resolution_note"] is not None) == (p["status"] == "resolved")
        for event in EVENTS[p["status"]]:
            for s in fx["webhook_subscriptions"]:
                if s["event"] == event:
                    expected[(p["dedup_key"], event, s["endpoint_id"])] += 1
        incident_posts = [
            m
            for m in fx["chat_messages"]
            if channels[m["channel_id"]] == "incidents" and f"({p['dedup_key']})" in m["text"]
        ]
        assert len(incident_posts) == 1 + (p["status"] == "resolved"), p["dedup_key"]
    assert by_ref == expected
    # every text went to an on-call, and #ops was told after it
    oncall = {s["oncall_phone"]: s for s in fx["services"]}
    ops = [m for m in fx["chat_messages"] if channels[m["channel_id"]] == "ops"]
    for sms in fx["sms"]:
        svc = oncall[sms["to"]]
        assert sms["body"].startswith(f"{svc['name']}: ")
        told = [m for m in ops if m["text"].startswith(f"Texted {svc['oncall_name']} about ")]
        assert any(m["posted"] > sms["sent"] for m in told), sms
    # a sent batch emailed each of its recipients once, with its reference and subject
    for b in fx["email_batches"]:
        emails = [e for e in fx["emails"] if e["batch_id"] == b["id"]]
        assert b["status"] == "sent"
        assert sorted(e["recipient"] for e in emails) == sorted(b["recipients"])
        assert {(e["reference"], e["subject"]) for e in emails} == {(b["reference"], b["subject"])}
        assert all(e["sent"] >= b["created"] for e in emails)


@pytest.mark.parametrize("seed", SEEDS)
def test_task_parameters_are_not_in_the_history(seed: int) -> None:
    """The task's new references (batch, dedup key) are new; the texts and posts it asks
    for look like old ones, which only the structured counts tell apart."""
    fx = build_fixture(seed)
    by_id = {w.id: w.draw_params(seed, fx) for w in WORKFLOWS}
    batch = by_id["msg-maintenance-email"]
    assert batch["reference"] not in {b["reference"] for b in fx["email_batches"]}
    page = by_id["msg-page-oncall"]
    assert page["dedup_key"] not in {p["dedup_key"] for p in fx["pages"]}
    assert page["posts_after"] > 1  # #incidents has posts in the same format already
    assert by_id["msg-oncall-sms"]["posts_after"] > 1  # #ops too


def test_some_on_call_was_texted_before() -> None:
    """For some seeds the engineer to text already got a text: a read-back by phone number
    alone would find it."""
    wf = next(w for w in WORKFLOWS if w.id == "msg-oncall-sms")
    assert any(wf.draw_params(s, build_fixture(s))["texts_after"] > 1 for s in SEEDS)


def test_reset_state_is_the_fixture(svc: ServiceClient) -> None:
    tables = [
        ("chat_messages", "msg_chat_messages"),
        ("sms", "msg_sms"),
        ("pages", "msg_pages"),
        ("email_batches", "msg_email_batches"),
        ("emails", "msg_emails"),
        ("webhook_deliveries", "msg_webhook_deliveries"),
        ("received", "msg_received"),
    ]
    assert_service_seeds_fixture(svc, SEED, build_fixture(SEED), tables)


def test_a_scoped_read_back_tells_history_from_the_new_effect(svc: ServiceClient) -> None:
    """#ops already has a "Texted ..." note and the on-call may have old texts: the new
    post is the one posted after the episode started."""
    wf = svc.workflow("msg-oncall-sms")
    params = params_for(wf)
    before = svc.ok("list_chat_messages", {"channel_id": params["channel_id"]})
    assert any(m["text"].startswith("Texted ") for m in before)
    run_gold_plan(svc, wf, params)
    after = svc.ok("list_chat_messages", {"channel_id": params["channel_id"]})
    new = [m for m in after if m["posted"] >= EPOCH_TEXT]
    assert len(after) == len(before) + 1 and [m["text"] for m in new] == [params["chat"]]


def test_old_batch_recipients_do_not_count_for_the_new_batch(svc: ServiceClient) -> None:
    fx = build_fixture(SEED)
    wf = svc.workflow("msg-maintenance-email")
    old = fx["email_batches"][0]
    params = {**params_for(wf), "recipients": old["recipients"]}  # the same admins again
    for i, r in enumerate(old["recipients"]):
        params[f"recipient{i}"] = r
    assert "recipient 0 emailed once" in failed_invariants(svc, wf, params)
