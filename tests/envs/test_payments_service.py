"""The payments service in-process: seeded state, Idempotency-Key semantics, bad input."""

from __future__ import annotations

import hashlib
import threading
from typing import Any

import pytest
from httpx import Response
from sqlalchemy.orm import Session

from undobench_gym.services.domains._service.db import IdempotencyRecord, canonical_json
from undobench_gym.services.domains.payments.service import DOMAIN

from .service_harness import KEY_HEADER, ServiceClient, assert_rejected, unchanged

pytestmark = pytest.mark.service(DOMAIN, seed=7)


def _charge_body(svc: ServiceClient, amount: int = 500) -> dict[str, Any]:
    cust = svc.ok("list_customers")[0]["id"]
    return {"customer_id": cust, "amount": amount, "currency": "usd", "description": "t"}


def _charge(svc: ServiceClient, key: str | None = None, amount: int = 500) -> Response:
    headers = {KEY_HEADER: key} if key else {}
    return svc.call("create_charge", _charge_body(svc, amount), headers=headers)


def _hold_key(svc: ServiceClient, key: str, payload_hash: str, **owner: str) -> None:
    """Record `key` as claimed by a request that is (or was) still running."""
    with Session(svc.ctx.engine) as s, s.begin():
        s.add(
            IdempotencyRecord(
                key=key,
                route="create_charge",
                payload_hash=payload_hash,
                state="in_flight",
                **owner,
            )
        )


def _digest(payload: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()


def test_reset_is_deterministic_and_in_place(svc: ServiceClient) -> None:
    h1 = svc.state()["hash"]
    _charge(svc)
    assert svc.state()["hash"] != h1
    assert svc.reset(7) == h1
    assert svc.reset(8) != h1
    assert svc.commit_log() == []


def test_ids_and_timestamps_follow_the_seed(svc: ServiceClient) -> None:
    first = _charge(svc).json()
    svc.reset()
    assert _charge(svc).json() == first
    assert first["created"].startswith("2026-01-01T00:00")


def test_native_key_replays_and_conflicts(svc: ServiceClient) -> None:
    r1 = _charge(svc, key="k1")
    r2 = _charge(svc, key="k1")
    assert r1.status_code == r2.status_code == 201 and r1.json() == r2.json()
    assert r2.headers["idempotent-replayed"] == "true"
    assert _charge(svc, key="k1", amount=600).status_code == 422
    assert len(svc.commit_log()) == 1


def test_in_flight_key_is_409(svc: ServiceClient) -> None:
    _hold_key(svc, "busy", "x")
    # Same payload hash is irrelevant while in flight: the first request owns the key.
    assert _charge(svc, key="busy").status_code in (409, 422)
    with Session(svc.ctx.engine) as s, s.begin():
        rec = s.get(IdempotencyRecord, ("busy", "create_charge"))
        assert rec is not None
        rec.payload_hash = _digest(_charge_body(svc))
    assert _charge(svc, key="busy").status_code == 409


def test_non_native_route_ignores_keys_unless_mode_all(svc: ServiceClient) -> None:
    sub = {"subscription_id": svc.tables()["pay_subscriptions"][0]["id"]}
    for _ in range(2):
        svc.call("renew_subscription", sub, headers={KEY_HEADER: "r"})
    assert len(svc.commit_log()) == 2
    svc.reset()
    svc.configure(idempotency_mode="all")
    for _ in range(2):
        svc.call("renew_subscription", sub, headers={KEY_HEADER: "r"})
    assert len(svc.commit_log()) == 1
    svc.configure(idempotency_mode="none")
    svc.reset()
    _charge(svc, key="z")
    _charge(svc, key="z")
    assert len(svc.commit_log()) == 2
    assert svc.admin.post("/admin/config", json={"idempotency_mode": "bogus"}).status_code == 422


def test_concurrent_same_key_commits_once(svc: ServiceClient) -> None:
    results: list[int] = []

    def go() -> None:
        results.append(_charge(svc, key="race").status_code)

    threads = [threading.Thread(target=go) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(svc.commit_log()) == 1
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
def test_malformed_bodies_are_4xx(svc: ServiceClient, body: bytes) -> None:
    assert_rejected(svc, "POST", "/v1/charges", content=body)


def test_oversized_body_is_413(svc: ServiceClient) -> None:
    big = b'{"x": "' + b"a" * (2 << 20) + b'"}'
    assert assert_rejected(svc, "POST", "/v1/charges", content=big).status_code == 413


def test_oversized_chunked_body_is_413(svc: ServiceClient) -> None:
    """No content-length to refuse it by: the body is counted as it arrives."""

    def chunks() -> Any:
        yield b'{"x": "'
        for _ in range(4):
            yield b"a" * (1 << 19)
        yield b'"}'

    with unchanged(svc):
        res = svc.public.post(
            "/v1/charges", content=chunks(), headers={"content-type": "application/json"}
        )
    assert res.status_code == 413 and "content-length" not in res.request.headers


def test_refund_cannot_exceed_charge_and_balance_moves(svc: ServiceClient) -> None:
    charge = svc.tables()["pay_charges"][0]
    before = svc.ok("get_balance")["usd"]
    ok = svc.call("create_refund", {"charge_id": charge["id"], "amount": charge["amount"]})
    assert ok.status_code == 201
    assert svc.ok("get_balance")["usd"] == before - charge["amount"]
    again = svc.call("create_refund", {"charge_id": charge["id"], "amount": 1})
    assert again.status_code == 400
    assert svc.call("get_charge", {"charge_id": "nope"}).status_code == 404


def test_payout_pays_each_recipient_and_resume_is_harmless(svc: ServiceClient) -> None:
    body = {
        "reference": "r1",
        "currency": "usd",
        "recipients": [{"account": "a", "amount": 100}, {"account": "b", "amount": 200}],
    }
    po = svc.call("create_payout", body).json()
    assert po["status"] == "paid" and len(po["transfers"]) == 2
    resumed = svc.call("resume_payout", {"payout_id": po["id"]}).json()
    assert len(resumed["transfers"]) == 2
    assert svc.ops() == ["payout.create", "payout.transfer", "payout.transfer"]
    dup = {**body, "recipients": [{"account": "a", "amount": 1}, {"account": "a", "amount": 2}]}
    assert svc.call("create_payout", dup).status_code == 400


def test_wire_needs_the_matching_quote(svc: ServiceClient) -> None:
    q = svc.ok("get_fx_quote", {"source": "usd", "target": "eur", "amount": 1000})
    wire = {
        "quote_id": q["quote_id"],
        "beneficiary_iban": "DE44500105175407324931",
        "amount": 1000,
        "source_currency": "usd",
        "target_currency": "eur",
    }
    assert svc.call("create_wire", wire).status_code == 201
    assert svc.call("create_wire", {**wire, "amount": 999}).status_code == 400


def test_key_of_a_crashed_request_is_reported_as_interrupted(svc: ServiceClient) -> None:
    _hold_key(svc, "died", _digest(_charge_body(svc)), owner="a-process-that-crashed")
    r = _charge(svc, key="died")
    assert r.status_code == 409 and r.json()["error"]["type"] == "idempotency_interrupted"
