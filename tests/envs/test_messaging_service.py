"""Messaging domain: seeded state, gold plans against the real routes, webhook delivery
(in-process through an injected delivery function, and over real HTTP to a real service
process on 127.0.0.1), duplicates, the half-sent batch and input validation."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from httpx import Response
from jsonschema import Draft202012Validator
from undobench_gym.envs._service.app import create_apps
from undobench_gym.envs._service.context import CRASH_HEADER, ServiceContext
from undobench_gym.envs.messaging import webhooks
from undobench_gym.envs.messaging.batches import CRASH_MID_BATCH
from undobench_gym.envs.messaging.fixture import build_fixture
from undobench_gym.envs.messaging.service import DOMAIN
from undobench_gym.envs.messaging.workflows import WORKFLOWS

from undobench_gym.catalog import tools_from_openapi
from undobench_gym.specs import Boundary, EffectExpectation, StatePredicate, WorkflowSpec, fill

SEED = 3


class Service:
    """The public and admin apps of one messaging service, plus a tool-name router."""

    def __init__(self, ctx: ServiceContext, public: FastAPI, admin: FastAPI) -> None:
        self.ctx = ctx
        self.app = public
        self.public = TestClient(public)
        self.admin = TestClient(admin)
        self.routes = routes_by_tool(public)
        self.delivered: list[tuple[str, dict[str, Any]]] = []

    def reset(self, seed: int = SEED) -> str:
        res = self.admin.post("/admin/reset", json={"seed": seed})
        assert res.status_code == 200, res.text
        return str(res.json()["hash"])

    def state(self) -> dict[str, Any]:
        res = self.admin.get("/admin/state")
        assert res.status_code == 200, res.text
        return dict(res.json())

    def tables(self) -> dict[str, list[dict[str, Any]]]:
        return dict(self.state()["tables"])

    def commit_log(self) -> list[dict[str, Any]]:
        return list(self.admin.get("/admin/commit-log").json())

    def call(self, tool: str, args: dict[str, Any] | None = None, **kw: Any) -> Response:
        method, path = self.routes[tool]
        rest = dict(args or {})
        for name in re.findall(r"\{(\w+)\}", path):
            path = path.replace(f"{{{name}}}", str(rest.pop(name)))
        if method == "get":
            return self.public.get(path, params=rest, **kw)
        return self.public.request(method.upper(), path, json=rest, **kw)

    def deliver(self, url: str, payload: dict[str, Any], headers: dict[str, str]) -> int:
        """Stands in for the HTTP client: hands the delivery to the admin app's receiver."""
        parts = urlsplit(url)
        assert parts.scheme == "http" and parts.hostname == "127.0.0.1"
        assert parts.port == self.ctx.ports["admin"]
        self.delivered.append((url, payload))
        return self.admin.post(parts.path, json=payload, headers=headers).status_code


def routes_by_tool(app: FastAPI) -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    for path, ops in app.openapi()["paths"].items():
        for method, op in ops.items():
            out[op["operationId"]] = (method, path)
    return out


@pytest.fixture
def svc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Service]:
    ctx = ServiceContext.open(DOMAIN, tmp_path)
    public, admin = create_apps(DOMAIN, ctx)
    service = Service(ctx, public, admin)
    ctx.ports = {"public": 1, "admin": 2}  # what the server sets once it listens
    monkeypatch.setattr(webhooks, "deliver", service.deliver)
    service.reset()
    yield service
    ctx.engine.dispose()


def run_gold(svc: Service, wf: WorkflowSpec, params: dict[str, Any]) -> list[Any]:
    responses: list[Any] = []
    for step in wf.gold_plan:
        res = svc.call(step.tool, fill(step.arguments, params))
        assert res.status_code < 300, f"{wf.id} {step.tool}: {res.status_code} {res.text}"
        responses.append(res.json())
    return responses


def evaluate(pred: StatePredicate, params: dict[str, Any], tables: dict[str, Any]) -> bool:
    where = fill(pred.where, params)
    rows = [r for r in tables[pred.table] if all(r.get(k) == v for k, v in where.items())]
    expected = fill(pred.value, params)
    if pred.op == "count":
        return len(rows) == expected
    if len(rows) != 1 or pred.field is None:
        return False
    assert pred.op == "eq"
    return bool(rows[0][pred.field] == expected)


def failing(wf: WorkflowSpec, params: dict[str, Any], state: dict[str, Any]) -> list[str]:
    return [p.description for p in wf.invariants if not evaluate(p, params, state["tables"])]


def effect_count(
    log: list[dict[str, Any]], effect: EffectExpectation, params: dict[str, Any]
) -> int:
    identity = fill(effect.identity, params)
    return sum(1 for r in log if r["op"] == effect.op and json.loads(r["identity"]) == identity)


def params_for(wf: WorkflowSpec, seed: int = SEED) -> dict[str, Any]:
    return wf.draw_params(seed, build_fixture(seed))


def workflow(wf_id: str) -> WorkflowSpec:
    return next(w for w in WORKFLOWS if w.id == wf_id)


def step_args(wf: WorkflowSpec, tool: str, params: dict[str, Any]) -> dict[str, Any]:
    step = next(s for s in wf.gold_plan if s.tool == tool)
    return dict(fill(step.arguments, params))


# ---- seeded state ------------------------------------------------------------------


def test_seeded_state_is_deterministic(svc: Service) -> None:
    first = svc.reset(SEED)
    assert svc.reset(SEED) == first
    assert svc.state()["hash"] == first
    assert svc.reset(SEED + 1) != first
    assert build_fixture(SEED) == build_fixture(SEED)
    assert build_fixture(SEED) != build_fixture(SEED + 1)


def test_reset_clears_sends_and_received_log(svc: Service) -> None:
    fresh = svc.reset(SEED)
    wf = workflow("msg-page-oncall")
    run_gold(svc, wf, params_for(wf))
    assert svc.tables()["msg_received"]
    assert svc.reset(SEED) == fresh
    tables = svc.tables()
    assert tables["msg_received"] == tables["msg_webhook_deliveries"] == []
    assert svc.commit_log() == []


def test_same_gold_plan_same_final_state(svc: Service) -> None:
    wf = workflow("msg-statuspage-webhook")
    hashes = []
    for _ in range(2):
        svc.reset(SEED)
        run_gold(svc, wf, params_for(wf))
        hashes.append(svc.state()["hash"])
    assert hashes[0] == hashes[1]


def test_fixture_shape_supports_workflows() -> None:
    for seed in range(30):
        fx = build_fixture(seed)
        assert len({p["dedup_key"] for p in fx["pages"]}) == len(fx["pages"])
        assert fx["pages"][0]["service_id"] == fx["pages"][1]["service_id"]
        for wf in WORKFLOWS:
            wf.instruction.format(**wf.draw_params(seed, fx))


# ---- tool catalogue ----------------------------------------------------------------


def test_every_route_declares_its_effect(svc: Service) -> None:
    classes = set()
    for path, ops in svc.app.openapi()["paths"].items():
        assert not path.startswith("/receiver"), "the receiver is never a public route"
        for method, op in ops.items():
            meta = op["x-undobench"]
            assert op["operationId"] and op.get("description"), path
            if method == "get":
                assert meta == {"read_only": True}, path
            else:
                assert meta["op"] and meta["identity"], path
                classes.add((meta["effect_class"], meta["idempotency"]))
                keyed = any(p["name"] == "Idempotency-Key" for p in op.get("parameters", []))
                assert keyed == (meta["idempotency"] == "native"), path
    assert ("irreversible_send", "none") in classes
    assert ("irreversible_send", "native") in classes
    assert ("create_unique", "constraint") in classes


def test_workflows_are_consistent(svc: Service) -> None:
    assert len(WORKFLOWS) == 4
    assert sorted(w.split for w in WORKFLOWS) == ["dev", "dev", "test", "val"]
    assert len({w.id for w in WORKFLOWS}) == 4
    tools = tools_from_openapi(svc.app.openapi())
    for wf in WORKFLOWS:
        assert wf.domain == "messaging" and wf.id.startswith("msg-")
        assert set(wf.tools) <= set(tools), wf.id
        gold_tools = [s.tool for s in wf.gold_plan]
        for sc in wf.scenarios:
            assert sc.target.tool in gold_tools, f"{wf.id}/{sc.id}"
            assert not tools[str(sc.target.tool)].read_only, f"{wf.id}/{sc.id}"
        if wf.split == "test":
            assert any(s.boundary is Boundary.POST_MUTATION_PRE_ACK for s in wf.scenarios)
        params = params_for(wf)
        for step in wf.gold_plan:
            validator = Draft202012Validator(tools[step.tool].parameters)
            assert list(validator.iter_errors(fill(step.arguments, params))) == [], step.tool
        text = wf.instruction.lower()
        assert not any(w in text for w in ("fault", "inject", "retry", "benchmark", "test"))
    scenarios = [s for w in WORKFLOWS for s in w.scenarios]
    assert any(s.crash_point == CRASH_MID_BATCH for s in scenarios)
    assert any(s.ambiguous for s in scenarios)


# ---- gold plans --------------------------------------------------------------------


@pytest.mark.parametrize("seed", [SEED, 11, 12345])
@pytest.mark.parametrize("wf", WORKFLOWS, ids=lambda w: w.id)
def test_gold_plan_leaves_invariants_true(svc: Service, wf: WorkflowSpec, seed: int) -> None:
    svc.reset(seed)
    params = params_for(wf, seed)
    assert failing(wf, params, svc.state())  # the task is not already done
    run_gold(svc, wf, params)
    state = svc.state()
    assert failing(wf, params, state) == []
    assert state["partial"] == []
    log = svc.commit_log()
    for effect in wf.required_effects:
        assert effect_count(log, effect, params) == 1, effect
    for effect in wf.forbidden_effects:
        assert effect_count(log, effect, params) == 0, effect


@pytest.mark.parametrize(
    ("wf_id", "tool"),
    [
        ("msg-oncall-sms", "send_sms"),
        ("msg-oncall-sms", "post_chat_message"),
        ("msg-page-oncall", "post_chat_message"),
    ],
)
def test_repeated_send_breaks_invariants(svc: Service, wf_id: str, tool: str) -> None:
    wf = workflow(wf_id)
    params = params_for(wf)
    run_gold(svc, wf, params)
    assert svc.call(tool, step_args(wf, tool, params)).status_code == 201
    assert failing(wf, params, svc.state())
    sends = [r for r in svc.commit_log() if r["effect_class"] == "irreversible_send"]
    assert len({r["identity"] for r in sends}) < len(sends)  # a duplicate semantic effect


# ---- webhooks ----------------------------------------------------------------------


def test_resolve_delivers_to_the_subscribed_receiver(svc: Service) -> None:
    wf = workflow("msg-statuspage-webhook")
    params = params_for(wf)
    run_gold(svc, wf, params)
    (url, payload), *others = svc.delivered
    assert others == []
    assert url == "http://127.0.0.1:2/receiver/statuspage"
    assert payload["event"] == "page.resolved" and payload["data"]["id"] == params["page_id"]
    tables = svc.tables()
    (received,) = tables["msg_received"]
    (delivery,) = tables["msg_webhook_deliveries"]
    assert received["delivery_id"] == delivery["id"] and delivery["status"] == "delivered"
    assert received["ref"] == params["dedup_key"] and received["body"] == payload
    # Resolving again changes nothing and delivers nothing.
    again = svc.call("resolve_page", step_args(wf, "resolve_page", params))
    assert again.status_code == 200 and len(svc.delivered) == 1
    assert failing(wf, params, svc.state()) == []


def test_no_subscription_no_delivery(svc: Service) -> None:
    wf = workflow("msg-statuspage-webhook")
    params = params_for(wf)
    assert svc.call("resolve_page", step_args(wf, "resolve_page", params)).status_code == 200
    assert svc.delivered == [] and svc.tables()["msg_received"] == []
    assert "the status page received the resolution once" in failing(wf, params, svc.state())


def test_subscription_is_unique_and_takes_no_url(svc: Service) -> None:
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
    assert [r["op"] for r in svc.commit_log()] == ["webhook.subscribe"]


def test_failed_delivery_is_recorded_not_committed(
    svc: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    def down(url: str, payload: dict[str, Any], headers: dict[str, str]) -> int:
        raise httpx.ConnectError("connection refused")

    monkeypatch.setattr(webhooks, "deliver", down)
    wf = workflow("msg-page-oncall")
    params = params_for(wf)
    res = svc.call("trigger_page", step_args(wf, "trigger_page", params))
    assert res.status_code == 201
    (delivery,) = svc.tables()["msg_webhook_deliveries"]
    assert delivery["status"] == "failed" and delivery["response_status"] is None
    assert [r["op"] for r in svc.commit_log()] == ["page.trigger"]


def test_receiver_validates_what_it_gets(svc: Service) -> None:
    assert svc.admin.post("/receiver/nope", json={"event": "x"}).status_code == 404
    assert svc.admin.post("/receiver/statuspage", content=b"{bad").status_code == 400
    assert svc.admin.post("/receiver/statuspage", json=[1, 2]).status_code == 400
    assert svc.admin.post("/receiver/Bad..Name", json={}).status_code == 422
    big = {"pad": "x" * (webhooks.MAX_RECEIVED_BYTES + 1)}
    assert svc.admin.post("/receiver/statuspage", json=big).status_code == 413
    assert svc.tables()["msg_received"] == []
    assert svc.public.post("/receiver/statuspage", json={}).status_code == 404  # not public


def test_dedup_key_joins_the_existing_page(svc: Service) -> None:
    wf = workflow("msg-page-oncall")
    params = params_for(wf)
    run_gold(svc, wf, params)
    again = svc.call("trigger_page", step_args(wf, "trigger_page", params))
    assert again.status_code == 200 and again.json()["deduplicated"] is True
    assert len(svc.delivered) == 1  # the incident bot is not told twice
    assert failing(wf, params, svc.state()) == []
    assert [r["op"] for r in svc.commit_log()].count("page.trigger") == 1


def test_acknowledge_fires_once_and_refuses_resolved(svc: Service) -> None:
    fx = build_fixture(SEED)
    page = fx["pages"][0]
    assert svc.call("acknowledge_page", {"page_id": page["id"]}).status_code == 200
    assert svc.call("acknowledge_page", {"page_id": page["id"]}).status_code == 200
    received = svc.tables()["msg_received"]
    assert [(r["endpoint_id"], r["event"]) for r in received] == [
        ("audit-archive", "page.acknowledged")
    ]
    assert svc.call("resolve_page", {"page_id": page["id"], "note": "done"}).status_code == 200
    assert svc.call("acknowledge_page", {"page_id": page["id"]}).status_code == 409


# ---- native idempotency ------------------------------------------------------------


def test_send_sms_idempotency_key(svc: Service) -> None:
    wf = workflow("msg-oncall-sms")
    params = params_for(wf)
    args = step_args(wf, "send_sms", params)
    key = {"Idempotency-Key": "sms-1"}
    first, again = svc.call("send_sms", args, headers=key), svc.call("send_sms", args, headers=key)
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json() and again.headers.get("Idempotent-Replayed") == "true"
    assert len(svc.tables()["msg_sms"]) == 1
    assert svc.call("send_sms", {**args, "body": "other"}, headers=key).status_code == 422
    # The chat route has no native key: the header is ignored there.
    chat = step_args(wf, "post_chat_message", params)
    for _ in range(2):
        assert (
            svc.call("post_chat_message", chat, headers={"Idempotency-Key": "c"}).status_code == 201
        )
    assert len([r for r in svc.commit_log() if r["op"] == "chat.post"]) == 2


def test_all_mode_replay_does_not_redeliver(svc: Service) -> None:
    assert svc.admin.post("/admin/config", json={"idempotency_mode": "all"}).status_code == 200
    wf = workflow("msg-statuspage-webhook")
    params = params_for(wf)
    sub = step_args(wf, "create_webhook_subscription", params)
    assert svc.call("create_webhook_subscription", sub).status_code == 201
    key = {"Idempotency-Key": "resolve-1"}
    resolve = step_args(wf, "resolve_page", params)
    first = svc.call("resolve_page", resolve, headers=key)
    again = svc.call("resolve_page", resolve, headers=key)
    assert again.headers.get("Idempotent-Replayed") == "true" and again.json() == first.json()
    assert len(svc.delivered) == 1 and failing(wf, params, svc.state()) == []


# ---- the half-sent batch -----------------------------------------------------------


class Crashed(Exception):
    """Stands in for the process exit of an armed crash point."""


@pytest.fixture
def crashable(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_exit(code: int) -> None:
        raise Crashed(code)

    monkeypatch.setattr(os, "_exit", fake_exit)


@pytest.mark.usefixtures("crashable")
def test_crash_mid_batch_then_resume(svc: Service) -> None:
    wf = workflow("msg-maintenance-email")
    params = params_for(wf)
    args = step_args(wf, "send_email_batch", params)
    with pytest.raises(Crashed):
        svc.call("send_email_batch", args, headers={CRASH_HEADER: CRASH_MID_BATCH})
    state = svc.state()
    assert len(state["partial"]) == 1 and "sending with 1/4 emails sent" in state["partial"][0]
    assert [e["recipient"] for e in state["tables"]["msg_emails"]] == [params["recipient0"]]
    again = svc.call("send_email_batch", args)
    assert again.status_code == 409 and "resume_email_batch" in again.json()["detail"]["message"]
    batch = svc.call("list_email_batches", {"reference": params["reference"]}).json()[0]
    assert batch["status"] == "sending" and batch["sent_count"] == 1
    done = svc.call("resume_email_batch", {"batch_id": batch["id"]})
    assert done.status_code == 200 and done.json()["status"] == "sent"
    assert done.json()["sent_count"] == 4
    assert svc.call("resume_email_batch", {"batch_id": batch["id"]}).json()["sent_count"] == 4
    state = svc.state()
    assert state["partial"] == [] and failing(wf, params, state) == []
    log = svc.commit_log()
    for effect in wf.required_effects:
        assert effect_count(log, effect, params) == 1, effect


def test_repeated_batch_conflicts(svc: Service) -> None:
    wf = workflow("msg-maintenance-email")
    params = params_for(wf)
    run_gold(svc, wf, params)
    again = svc.call("send_email_batch", step_args(wf, "send_email_batch", params))
    assert again.status_code == 409 and "get_email_batch" in again.json()["detail"]["message"]
    assert failing(wf, params, svc.state()) == []


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
def test_bad_bodies_are_4xx(svc: Service, method: str, path: str, body: Any) -> None:
    before = svc.state()["hash"]
    res = svc.public.request(method, path, json=body)
    assert 400 <= res.status_code < 500, res.text
    assert svc.commit_log() == []
    assert svc.state()["hash"] == before


@pytest.mark.parametrize("raw", [b"{not json", b"", b"\xff\xfe", b'{"text": "x"'])
def test_malformed_json_is_4xx(svc: Service, raw: bytes) -> None:
    headers = {"content-type": "application/json"}
    for path in ("/v1/sms", f"/v1/channels/{CH}/messages", "/v1/pages", "/v1/email-batches"):
        res = svc.public.post(path, content=raw, headers=headers)
        assert 400 <= res.status_code < 500, (path, res.status_code, res.text)
    assert svc.commit_log() == []


def test_bad_queries_are_4xx(svc: Service) -> None:
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
            "undobench_gym.envs._service.server",
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
    wf = workflow("msg-statuspage-webhook")
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
    (received,) = state["tables"]["msg_received"]
    assert received["endpoint_id"] == "statuspage" and received["ref"] == params["dedup_key"]
    (delivery,) = state["tables"]["msg_webhook_deliveries"]
    assert delivery["status"] == "delivered" and delivery["response_status"] == 202
    assert failing(wf, params, state) == []
    for effect in wf.required_effects:
        assert effect_count(log, effect, params) == 1, effect
