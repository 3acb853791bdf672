"""The payments service in-process: seeded state, Idempotency-Key semantics, bad input."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session
from undobench_gym.envs._service.app import create_apps
from undobench_gym.envs._service.context import ServiceContext
from undobench_gym.envs._service.db import IdempotencyRecord
from undobench_gym.envs.payments.service import DOMAIN


@pytest.fixture()
def service(tmp_path: Path) -> tuple[TestClient, TestClient, ServiceContext]:
    ctx = ServiceContext.open(DOMAIN, tmp_path)
    public, admin = create_apps(DOMAIN, ctx)
    a = TestClient(admin)
    assert a.post("/admin/reset", json={"seed": 7}).status_code == 200
    return TestClient(public), a, ctx


def _charge(p: TestClient, key: str | None = None, amount: int = 500) -> Any:
    cust = p.get("/v1/customers").json()[0]["id"]
    headers = {"Idempotency-Key": key} if key else {}
    return p.post(
        "/v1/charges",
        json={"customer_id": cust, "amount": amount, "currency": "usd", "description": "t"},
        headers=headers,
    )


def test_reset_is_deterministic_and_in_place(service: Any) -> None:
    p, a, _ = service
    h1 = a.get("/admin/state").json()["hash"]
    _charge(p)
    assert a.get("/admin/state").json()["hash"] != h1
    assert a.post("/admin/reset", json={"seed": 7}).json()["hash"] == h1
    assert a.post("/admin/reset", json={"seed": 8}).json()["hash"] != h1
    assert a.get("/admin/commit-log").json() == []


def test_ids_and_timestamps_follow_the_seed(service: Any) -> None:
    p, a, _ = service
    first = _charge(p).json()
    a.post("/admin/reset", json={"seed": 7})
    assert _charge(p).json() == first
    assert first["created"].startswith("2026-01-01T00:00")


def test_native_key_replays_and_conflicts(service: Any) -> None:
    p, a, _ = service
    r1 = _charge(p, key="k1")
    r2 = _charge(p, key="k1")
    assert r1.status_code == r2.status_code == 201 and r1.json() == r2.json()
    assert r2.headers["idempotent-replayed"] == "true"
    assert _charge(p, key="k1", amount=600).status_code == 422
    assert len(a.get("/admin/commit-log").json()) == 1


def test_in_flight_key_is_409(service: Any) -> None:
    p, _, ctx = service
    with Session(ctx.engine) as s, s.begin():
        s.add(
            IdempotencyRecord(
                key="busy", route="create_charge", payload_hash="x", state="in_flight"
            )
        )
    # Same payload hash is irrelevant while in flight: the first request owns the key.
    r = _charge(p, key="busy")
    assert r.status_code in (409, 422)
    with Session(ctx.engine) as s, s.begin():
        rec = s.get(IdempotencyRecord, ("busy", "create_charge"))
        assert rec is not None
        import hashlib
        import json

        cust = p.get("/v1/customers").json()[0]["id"]
        payload = {"customer_id": cust, "amount": 500, "currency": "usd", "description": "t"}
        rec.payload_hash = hashlib.sha256(
            json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
        ).hexdigest()
    assert _charge(p, key="busy").status_code == 409


def test_non_native_route_ignores_keys_unless_mode_all(service: Any) -> None:
    p, a, _ = service
    sub = DOMAIN_SUB(a)
    for _ in range(2):
        p.post(f"/v1/subscriptions/{sub}/renew", headers={"Idempotency-Key": "r"})
    assert len(a.get("/admin/commit-log").json()) == 2
    a.post("/admin/reset", json={"seed": 7})
    assert a.post("/admin/config", json={"idempotency_mode": "all"}).status_code == 200
    for _ in range(2):
        p.post(f"/v1/subscriptions/{sub}/renew", headers={"Idempotency-Key": "r"})
    assert len(a.get("/admin/commit-log").json()) == 1
    a.post("/admin/config", json={"idempotency_mode": "none"})
    a.post("/admin/reset", json={"seed": 7})
    _charge(p, key="z")
    _charge(p, key="z")
    assert len(a.get("/admin/commit-log").json()) == 2
    assert a.post("/admin/config", json={"idempotency_mode": "bogus"}).status_code == 422


def DOMAIN_SUB(a: TestClient) -> str:
    return str(a.get("/admin/state").json()["tables"]["pay_subscriptions"][0]["id"])


def test_concurrent_same_key_commits_once(service: Any) -> None:
    p, a, _ = service
    results: list[int] = []

    def go() -> None:
        results.append(_charge(p, key="race").status_code)

    threads = [threading.Thread(target=go) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(a.get("/admin/commit-log").json()) == 1
    assert len(results) == 4 and set(results) <= {201, 409} and 201 in results


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"[]",
        b'{"customer_id": 5}',
        b'{"customer_id": "x", "amount": "lots"}',
        b'{"customer_id": "x", "amount": -1, "currency": "usd", "description": "d"}',
        b'{"customer_id": "x", "amount": 1, "currency": "doge", "description": "d"}',
    ],
)
def test_malformed_bodies_are_4xx(service: Any, body: bytes) -> None:
    p, _, _ = service
    r = p.post("/v1/charges", content=body, headers={"content-type": "application/json"})
    assert 400 <= r.status_code < 500


def test_oversized_body_is_413(service: Any) -> None:
    p, _, _ = service
    big = b'{"x": "' + b"a" * (2 << 20) + b'"}'
    r = p.post("/v1/charges", content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413


def test_refund_cannot_exceed_charge_and_balance_moves(service: Any) -> None:
    p, a, _ = service
    charge = a.get("/admin/state").json()["tables"]["pay_charges"][0]
    before = p.get("/v1/balance").json()["usd"]
    ok = p.post("/v1/refunds", json={"charge_id": charge["id"], "amount": charge["amount"]})
    assert ok.status_code == 201
    assert p.get("/v1/balance").json()["usd"] == before - charge["amount"]
    again = p.post("/v1/refunds", json={"charge_id": charge["id"], "amount": 1})
    assert again.status_code == 400
    assert p.get("/v1/charges/nope").status_code == 404


def test_payout_pays_each_recipient_and_resume_is_harmless(service: Any) -> None:
    p, a, _ = service
    body = {
        "reference": "r1",
        "currency": "usd",
        "recipients": [{"account": "a", "amount": 100}, {"account": "b", "amount": 200}],
    }
    po = p.post("/v1/payouts", json=body).json()
    assert po["status"] == "paid" and len(po["transfers"]) == 2
    resumed = p.post(f"/v1/payouts/{po['id']}/resume").json()
    assert len(resumed["transfers"]) == 2
    ops = [r["op"] for r in a.get("/admin/commit-log").json()]
    assert ops == ["payout.create", "payout.transfer", "payout.transfer"]
    dup = {**body, "recipients": [{"account": "a", "amount": 1}, {"account": "a", "amount": 2}]}
    assert p.post("/v1/payouts", json=dup).status_code == 400


def test_wire_needs_the_matching_quote(service: Any) -> None:
    p, _, _ = service
    q = p.get("/v1/fx/quote", params={"source": "usd", "target": "eur", "amount": 1000}).json()
    wire = {
        "quote_id": q["quote_id"],
        "beneficiary_iban": "DE44500105175407324931",
        "amount": 1000,
        "source_currency": "usd",
        "target_currency": "eur",
    }
    assert p.post("/v1/wires", json=wire).status_code == 201
    assert p.post("/v1/wires", json={**wire, "amount": 999}).status_code == 400


def test_key_of_a_crashed_request_is_reported_as_interrupted(service: Any) -> None:
    import hashlib
    import json

    p, _, ctx = service
    cust = p.get("/v1/customers").json()[0]["id"]
    payload = {"customer_id": cust, "amount": 500, "currency": "usd", "description": "t"}
    digest = hashlib.sha256(
        json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()
    with Session(ctx.engine) as s, s.begin():
        s.add(
            IdempotencyRecord(
                key="died",
                route="create_charge",
                payload_hash=digest,
                state="in_flight",
                owner="a-process-that-crashed",
            )
        )
    r = _charge(p, key="died")
    assert r.status_code == 409 and r.json()["error"]["type"] == "idempotency_interrupted"
