"""Messaging domain: seeded state, gold plans against the real routes, webhook delivery
(in-process through an injected delivery function, and over real HTTP to a real service
process on 127.0.0.1), duplicates, the half-sent batch and input validation."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from undobench_gym.contract.specs import WorkflowSpec
from undobench_gym.services.domains.messaging import webhooks
from undobench_gym.services.domains.messaging.batches import CRASH_MID_BATCH
from undobench_gym.services.domains.messaging.fixture import build_fixture
from undobench_gym.services.domains.messaging.service import DOMAIN
from undobench_gym.services.domains.messaging.workflows import WORKFLOWS

from .service_harness import (
    KEY_HEADER,
    MALFORMED_JSON,
    SEED,
    ServiceClient,
    assert_done,
    assert_effects,
    assert_gold_plan_completes,
    assert_gold_plan_is_reproducible,
    assert_key_replays,
    assert_malformed_json_rejected,
    assert_rejected,
    assert_reset_is_deterministic,
    assert_routes_declare_effects,
    assert_workflow_is_consistent,
    failed_invariants,
    gold_plan_cases,
    params_for,
    retry_after_gold_plan,
    run_gold_plan,
    step_args,
    workflow,
)

pytestmark = pytest.mark.service(DOMAIN)

Delivered = list[tuple[str, dict[str, Any]]]
#: table -> (fixture key, primary key): where the seeded history of a table is.
HISTORY = {
    "msg_received": ("received", "seq"),
    "msg_webhook_deliveries": ("webhook_deliveries", "id"),
    "msg_emails": ("emails", "id"),
    "msg_sms": ("sms", "id"),
    "msg_chat_messages": ("chat_messages", "id"),
}


def added(tables: dict[str, list[dict[str, Any]]], table: str) -> list[dict[str, Any]]:
    """The rows of `table` that the seeded history (at SEED) does not hold."""
    key, pk = HISTORY[table]
    seeded = {r[pk] for r in build_fixture(SEED)[key]}
    return [r for r in tables[table] if r[pk] not in seeded]


@pytest.fixture
def delivered() -> Delivered:
    """The (url, payload) of every webhook the service under test delivered."""
    return []


@pytest.fixture
def svc(svc: ServiceClient, delivered: Delivered, monkeypatch: pytest.MonkeyPatch) -> ServiceClient:
    """The service, with webhook deliveries handed to its own admin app's receiver instead
    of going over HTTP."""
    svc.ctx.ports = {"public": 1, "admin": 2}  # what the server sets once it listens

    def deliver(url: str, payload: dict[str, Any], headers: dict[str, str]) -> int:
        parts = urlsplit(url)
        assert parts.scheme == "http" and parts.hostname == "127.0.0.1"
        assert parts.port == svc.ctx.ports["admin"]
        delivered.append((url, payload))
        return int(svc.admin.post(parts.path, json=payload, headers=headers).status_code)

    monkeypatch.setattr(webhooks, "deliver", deliver)
    return svc


# ---- seeded state ------------------------------------------------------------------


def test_seeded_state_is_deterministic(svc: ServiceClient) -> None:
    assert_reset_is_deterministic(svc)


def test_reset_clears_sends_and_received_log(svc: ServiceClient) -> None:
    fresh = svc.reset(SEED)
    wf = svc.workflow("msg-page-oncall")
    run_gold_plan(svc, wf, params_for(wf))
    assert svc.tables()["msg_received"]
    assert svc.reset(SEED) == fresh
    tables = svc.tables()
    assert added(tables, "msg_received") == added(tables, "msg_webhook_deliveries") == []
    fx = build_fixture(SEED)
    assert len(tables["msg_received"]) == len(fx["received"])
    assert len(tables["msg_webhook_deliveries"]) == len(fx["webhook_deliveries"])
    assert svc.commit_log() == []


def test_same_gold_plan_same_final_state(svc: ServiceClient) -> None:
    assert_gold_plan_is_reproducible(svc, svc.workflow("msg-statuspage-webhook"))


def test_fixture_shape_supports_workflows() -> None:
    for seed in range(30):
        fx = build_fixture(seed)
        assert len({p["dedup_key"] for p in fx["pages"]}) == len(fx["pages"])
        assert fx["pages"][0]["service_id"] == fx["pages"][1]["service_id"]
        for wf in WORKFLOWS:
            wf.instruction.format(**wf.draw_params(seed, fx))


# ---- tool catalogue ----------------------------------------------------------------


def test_every_route_declares_its_effect(svc: ServiceClient) -> None:
    paths = svc.app.openapi()["paths"]
    assert not any(p.startswith("/receiver") for p in paths), "the receiver is never public"
    classes = assert_routes_declare_effects(svc)
    assert ("irreversible_send", "none") in classes
    assert ("irreversible_send", "native") in classes
    assert ("create_unique", "constraint") in classes


def test_workflows_are_consistent(svc: ServiceClient) -> None:
    assert len(WORKFLOWS) == 7  # three of them the stress split's (cascades, a writer)
    assert sorted(w.split for w in WORKFLOWS) == [
        "dev",
        "dev",
        "stress",
        "stress",
        "stress",
        "test",
        "val",
    ]
    assert len({w.id for w in WORKFLOWS}) == 7
    for wf in WORKFLOWS:
        assert_workflow_is_consistent(svc, wf, prefix="msg-")
        for sc in wf.scenarios:
            assert sc.target.tool is not None, f"{wf.id}/{sc.id}"
        text = wf.instruction.lower()
        assert not any(w in text for w in ("fault", "inject", "retry", "benchmark", "test"))
    scenarios = [s for w in WORKFLOWS for s in w.scenarios]
    assert any(s.crash_point == CRASH_MID_BATCH for s in scenarios)
    assert any(s.ambiguous for s in scenarios)


# ---- gold plans --------------------------------------------------------------------


@gold_plan_cases(WORKFLOWS)
def test_gold_plan_leaves_invariants_true(svc: ServiceClient, wf: WorkflowSpec, seed: int) -> None:
    assert_gold_plan_completes(svc, wf, seed)


@pytest.mark.parametrize(
    ("wf_id", "tool"),
    [
        ("msg-oncall-sms", "send_sms"),
        ("msg-oncall-sms", "post_chat_message"),
        ("msg-page-oncall", "post_chat_message"),
    ],
)
def test_repeated_send_breaks_invariants(svc: ServiceClient, wf_id: str, tool: str) -> None:
    wf = svc.workflow(wf_id)
    params, again = retry_after_gold_plan(svc, wf, tool)
    assert again.status_code == 201
    assert failed_invariants(svc, wf, params)
    sends = [r for r in svc.commit_log() if r["effect_class"] == "irreversible_send"]
    assert len({r["identity"] for r in sends}) < len(sends)  # a duplicate semantic effect


# ---- webhooks ----------------------------------------------------------------------


def test_resolve_delivers_to_the_subscribed_receiver(
    svc: ServiceClient, delivered: Delivered
) -> None:
    wf = svc.workflow("msg-statuspage-webhook")
    params = params_for(wf)
    run_gold_plan(svc, wf, params)
    (url, payload), *others = delivered
    assert others == []
    assert url == "http://127.0.0.1:2/receiver/statuspage"
    assert payload["event"] == "page.resolved" and payload["data"]["id"] == params["page_id"]
    tables = svc.tables()
    (received,) = added(tables, "msg_received")
    (delivery,) = added(tables, "msg_webhook_deliveries")
    assert received["delivery_id"] == delivery["id"] and delivery["status"] == "delivered"
    assert received["ref"] == params["dedup_key"] and received["body"] == payload
    # Resolving again changes nothing and delivers nothing.
    again = svc.call("resolve_page", step_args(wf, "resolve_page", params))
    assert again.status_code == 200 and len(delivered) == 1
    assert failed_invariants(svc, wf, params) == []


def test_no_subscription_no_delivery(svc: ServiceClient, delivered: Delivered) -> None:
    wf = svc.workflow("msg-statuspage-webhook")
    params = params_for(wf)
    assert svc.call("resolve_page", step_args(wf, "resolve_page", params)).status_code == 200
    assert delivered == [] and added(svc.tables(), "msg_received") == []
    failed = failed_invariants(svc, wf, params)
    assert "the status page received the resolution once" in failed


def test_subscription_is_unique_and_takes_no_url(svc: ServiceClient) -> None:
    body = {"endpoint_id": "statuspage", "event": "page.resolved"}
    assert svc.call("create_webhook_subscription", body).status_code == 201
    again = svc.call("create_webhook_subscription", body)
    assert again.status_code == 409 and "already subscribed" in again.json()["detail"]["message"]
    for bad in (
        {"endpoint_id": "http://10.0.0.1/hook", "event": "page.resolved"},
        {"endpoint_id": "../admin/reset", "event": "page.resolved"},
        {"endpoint_id": "statuspage", "event": "page.resolved", "url": "http://example.com"},
        {"endpoint_id": "statuspage", "event": "anything"},
    ):
        assert svc.call("create_webhook_subscription", bad).status_code == 422, bad
    unknown = svc.call(
        "create_webhook_subscription", {"endpoint_id": "nope", "event": "page.resolved"}
    )
    assert unknown.status_code == 404
    assert svc.ops() == ["webhook.subscribe"]


def test_failed_delivery_is_recorded_not_committed(
    svc: ServiceClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def down(url: str, payload: dict[str, Any], headers: dict[str, str]) -> int:
        raise httpx.ConnectError("connection refused")

    monkeypatch.setattr(webhooks, "deliver", down)
    wf = svc.workflow("msg-page-oncall")
    res = svc.call("trigger_page", step_args(wf, "trigger_page", params_for(wf)))
    assert res.status_code == 201
    (delivery,) = added(svc.tables(), "msg_webhook_deliveries")
    assert delivery["status"] == "failed" and delivery["response_status"] is None
    assert svc.ops() == ["page.trigger"]


def test_receiver_validates_what_it_gets(svc: ServiceClient) -> None:
    assert svc.admin.post("/receiver/nope", json={"event": "x"}).status_code == 404
    assert svc.admin.post("/receiver/statuspage", content=b"{bad").status_code == 400
    assert svc.admin.post("/receiver/statuspage", json=[1, 2]).status_code == 400
    assert svc.admin.post("/receiver/Bad..Name", json={}).status_code == 422
    big = {"pad": "x" * (webhooks.MAX_RECEIVED_BYTES + 1)}
    assert svc.admin.post("/receiver/statuspage", json=big).status_code == 413
    assert added(svc.tables(), "msg_received") == []
    assert svc.public.post("/receiver/statuspage", json={}).status_code == 404  # not public


def test_dedup_key_joins_the_existing_page(svc: ServiceClient, delivered: Delivered) -> None:
    wf = svc.workflow("msg-page-oncall")
    params, again = retry_after_gold_plan(svc, wf, "trigger_page")
    assert again.status_code == 200 and again.json()["deduplicated"] is True
    assert len(delivered) == 1  # the incident bot is not told twice
    assert failed_invariants(svc, wf, params) == []
    assert svc.ops().count("page.trigger") == 1


def test_acknowledge_fires_once_and_refuses_resolved(svc: ServiceClient) -> None:
    page = build_fixture(SEED)["pages"][0]
    assert svc.call("acknowledge_page", {"page_id": page["id"]}).status_code == 200
    assert svc.call("acknowledge_page", {"page_id": page["id"]}).status_code == 200
    received = added(svc.tables(), "msg_received")
    assert [(r["endpoint_id"], r["event"], r["ref"]) for r in received] == [
        ("audit-archive", "page.acknowledged", page["dedup_key"])
    ]
    assert svc.call("resolve_page", {"page_id": page["id"], "note": "done"}).status_code == 200
    assert svc.call("acknowledge_page", {"page_id": page["id"]}).status_code == 409


# ---- native idempotency ------------------------------------------------------------


def test_send_sms_idempotency_key(svc: ServiceClient) -> None:
    wf = svc.workflow("msg-oncall-sms")
    params = params_for(wf)
    args = step_args(wf, "send_sms", params)
    assert_key_replays(svc, "send_sms", args, "sms-1", changed={"body": "other"})
    assert len(added(svc.tables(), "msg_sms")) == 1
    # The chat route has no native key: the header is ignored there.
    chat = step_args(wf, "post_chat_message", params)
    for _ in range(2):
        res = svc.call("post_chat_message", chat, headers={KEY_HEADER: "c"})
        assert res.status_code == 201
    assert svc.ops().count("chat.post") == 2


def test_all_mode_replay_does_not_redeliver(svc: ServiceClient, delivered: Delivered) -> None:
    svc.configure(idempotency_mode="all")
    wf = svc.workflow("msg-statuspage-webhook")
    params = params_for(wf)
    sub = step_args(wf, "create_webhook_subscription", params)
    assert svc.call("create_webhook_subscription", sub).status_code == 201
    resolve = step_args(wf, "resolve_page", params)
    assert_key_replays(svc, "resolve_page", resolve, "resolve-1", status=200)
    assert len(delivered) == 1 and failed_invariants(svc, wf, params) == []


# ---- the half-sent batch -----------------------------------------------------------


@pytest.mark.usefixtures("crashable")
def test_crash_mid_batch_then_resume(svc: ServiceClient) -> None:
    wf = svc.workflow("msg-maintenance-email")
    params = params_for(wf)
    args = step_args(wf, "send_email_batch", params)
    svc.call_until_crash("send_email_batch", args, CRASH_MID_BATCH)
    state = svc.state()
    assert len(state["partial"]) == 1 and "sending with 1/4 emails sent" in state["partial"][0]
    assert [e["recipient"] for e in added(state["tables"], "msg_emails")] == [params["recipient0"]]
    again = svc.call("send_email_batch", args)
    assert again.status_code == 409 and "resume_email_batch" in again.json()["detail"]["message"]
    batch = svc.call("list_email_batches", {"reference": params["reference"]}).json()[0]
    assert batch["status"] == "sending" and batch["sent_count"] == 1
    done = svc.call("resume_email_batch", {"batch_id": batch["id"]})
    assert done.status_code == 200 and done.json()["status"] == "sent"
    assert done.json()["sent_count"] == 4
    assert svc.call("resume_email_batch", {"batch_id": batch["id"]}).json()["sent_count"] == 4
    assert_done(svc, wf, params)


def test_repeated_batch_conflicts(svc: ServiceClient) -> None:
    wf = svc.workflow("msg-maintenance-email")
    params, again = retry_after_gold_plan(svc, wf, "send_email_batch")
    assert again.status_code == 409 and "get_email_batch" in again.json()["detail"]["message"]
    assert failed_invariants(svc, wf, params) == []


# ---- validation --------------------------------------------------------------------

FX = build_fixture(SEED)
CH = FX["channels"][0]["id"]
PG = FX["pages"][0]["id"]
SVC = FX["services"][0]["id"]
BATCH = {"reference": "R-1", "subject": "s", "recipients": ["a@b.example.com"]}
BAD_BODIES: list[tuple[str, str, Any]] = [
    ("POST", "/v1/sms", {"to": "5551234", "body": "x"}),
    ("POST", "/v1/sms", {"to": "+15551234567", "body": ""}),
    ("POST", "/v1/sms", {"to": "+15551234567", "body": "x" * 481}),
    ("POST", "/v1/sms", {"to": ["+15551234567"], "body": "x"}),
    ("POST", f"/v1/channels/{CH}/messages", {"text": ""}),
    ("POST", f"/v1/channels/{CH}/messages", {"text": 5}),
    ("POST", f"/v1/channels/{CH}/messages", None),
    ("POST", "/v1/channels/ch_nope/messages", {"text": "hi"}),
    ("POST", "/v1/channels/..%2Fadmin/messages", {"text": "hi"}),
    (
        "POST",
        "/v1/pages",
        {"service_id": SVC, "summary": "s", "severity": "sev1", "dedup_key": "k"},
    ),
    (
        "POST",
        "/v1/pages",
        {"service_id": SVC, "summary": "s", "severity": "high", "dedup_key": "a b"},
    ),
    (
        "POST",
        "/v1/pages",
        {"service_id": "svc_nope", "summary": "s", "severity": "high", "dedup_key": "k"},
    ),
    ("POST", f"/v1/pages/{PG}/resolve", {"note": ""}),
    ("POST", f"/v1/pages/{PG}/resolve", {}),
    ("POST", "/v1/pages/pg_nope/resolve", {"note": "n"}),
    ("POST", "/v1/pages/pg_nope/acknowledge", {}),
    ("POST", "/v1/email-batches", {**BATCH, "recipients": []}),
    ("POST", "/v1/email-batches", {**BATCH, "recipients": ["not-an-email"]}),
    ("POST", "/v1/email-batches", {**BATCH, "recipients": ["a@b.example.com"] * 2}),
    (
        "POST",
        "/v1/email-batches",
        {**BATCH, "recipients": [f"u{i}@b.example.com" for i in range(51)]},
    ),
    ("POST", "/v1/email-batches", {**BATCH, "reference": "../etc"}),
    ("POST", "/v1/email-batches", {**BATCH, "reference": "a" * 65}),
    ("POST", "/v1/email-batches/eb_nope/resume", {}),
    ("POST", "/v1/webhook-subscriptions", {"endpoint_id": "statuspage"}),
    ("POST", "/v1/webhook-subscriptions", [1]),
]


@pytest.mark.parametrize(("method", "path", "body"), BAD_BODIES)
def test_bad_bodies_are_4xx(svc: ServiceClient, method: str, path: str, body: Any) -> None:
    assert_rejected(svc, method, path, json=body)


@pytest.mark.parametrize("raw", [*MALFORMED_JSON, b'{"text": "x"'])
def test_malformed_json_is_4xx(svc: ServiceClient, raw: bytes) -> None:
    paths = ("/v1/sms", f"/v1/channels/{CH}/messages", "/v1/pages", "/v1/email-batches")
    assert_malformed_json_rejected(svc, [("POST", p) for p in paths], raw)


def test_bad_queries_are_4xx(svc: ServiceClient) -> None:
    assert svc.public.get("/v1/pages", params={"status": "open"}).status_code == 422
    assert svc.public.get("/v1/sms", params={"to": "12"}).status_code == 422
    assert svc.public.get("/v1/webhook-deliveries", params={"event": "x"}).status_code == 422
    assert svc.public.get(f"/v1/channels/{CH}/messages", params={"limit": 0}).status_code == 422
    assert svc.public.get("/v1/pages/pg_nope").status_code == 404
    assert svc.public.get("/v1/channels/ch_nope/messages").status_code == 404


# ---- real HTTP: a real service process on 127.0.0.1 --------------------------------


@pytest.fixture
def live(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A real messaging service process; yields (public_url, admin_url)."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "undobench_gym.services.domains._service.server",
            "--domain",
            "messaging",
            "--data-dir",
            str(tmp_path / "live"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().split()
        assert line and line[0] == "READY", line
        yield f"http://127.0.0.1:{line[1]}", f"http://127.0.0.1:{line[2]}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_webhook_is_delivered_over_real_http(live: tuple[str, str]) -> None:
    public, admin = live
    assert webhooks.deliver is webhooks.http_deliver  # the default path is real HTTP
    wf = workflow(DOMAIN.name, "msg-statuspage-webhook")
    params = params_for(wf)
    with httpx.Client(timeout=10) as http:
        assert http.post(f"{admin}/admin/reset", json={"seed": SEED}).status_code == 200
        sub = step_args(wf, "create_webhook_subscription", params)
        assert http.post(f"{public}/v1/webhook-subscriptions", json=sub).status_code == 201
        res = http.post(
            f"{public}/v1/pages/{params['page_id']}/resolve", json={"note": params["note"]}
        )
        assert res.status_code == 200
        state = http.get(f"{admin}/admin/state").json()
        log = http.get(f"{admin}/admin/commit-log").json()
    (received,) = added(state["tables"], "msg_received")
    assert received["endpoint_id"] == "statuspage" and received["ref"] == params["dedup_key"]
    (delivery,) = added(state["tables"], "msg_webhook_deliveries")
    assert delivery["status"] == "delivered" and delivery["response_status"] == 202
    assert failed_invariants(state, wf, params) == []
    assert_effects(log, wf, params)
