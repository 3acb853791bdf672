"""Concurrency: one Idempotency-Key twice at once through the real proxy, and two stacks
driven from two threads at once.

For the key test the first request must still be in flight when the second arrives. A
composite such as create_payout is only some milliseconds long, so racing two requests
would pass or fail by luck. Instead the real payments app runs in this process (uvicorn,
real sockets) behind a real fault-proxy process, and `complete_key` (the step that writes
the stored response, inside the mutation's transaction, after the key was claimed) waits
on an event: the first request is held in flight for exactly as long as the test needs.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi.testclient import TestClient

from undobench_gym.agents.scripted import ScriptedAgent
from undobench_gym.core.env import UndoBenchEnv
from undobench_gym.core.pairing import run_episode
from undobench_gym.core.runtime.process import free_port, proxy_command
from undobench_gym.services.domains._service import mutation
from undobench_gym.services.domains._service.app import create_apps
from undobench_gym.services.domains._service.context import ServiceContext
from undobench_gym.services.domains._service.server import load_domain

from .conftest import Figures
from .procs import kill, wait_gone


class Gate:
    """Holds every request that reaches complete_key until `release()`."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.released = threading.Event()
        self.original = mutation.complete_key

    def complete_key(self, *args: Any, **kw: Any) -> None:
        self.entered.set()
        assert self.released.wait(20), "the test never released the gate"
        self.original(*args, **kw)

    def release(self) -> None:
        self.released.set()


@pytest.fixture()
def gated_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    domain = load_domain("payments")
    ctx = ServiceContext.open(domain, tmp_path / "data")
    public, admin = create_apps(domain, ctx)
    TestClient(admin).post("/admin/reset", json={"seed": 1}).raise_for_status()
    gate = Gate()
    monkeypatch.setattr(mutation, "complete_key", gate.complete_key)
    svc_port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(public, host="127.0.0.1", port=svc_port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    proxy_port, control_port = free_port(), free_port()
    proxy = subprocess.Popen(
        proxy_command("payments", svc_port, proxy_port, control_port, tmp_path / "mitmproxy"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{control_port}/control/health").raise_for_status()
                httpx.get(f"http://127.0.0.1:{proxy_port}/payments/v1/balance").raise_for_status()
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline and proxy.poll() is None, "proxy not up"
                time.sleep(0.1)
        yield {
            "url": f"http://127.0.0.1:{proxy_port}/payments",
            "gate": gate,
            "admin": admin,
            "customer": TestClient(admin).get("/admin/state").json()["tables"]["pay_customers"],
        }
    finally:
        gate.release()
        kill(proxy.pid)
        proxy.wait(10)
        server.should_exit = True
        thread.join(10)
        ctx.engine.dispose()


def test_same_key_in_flight_is_409_through_the_proxy(
    gated_stack: dict[str, Any], figures: Figures
) -> None:
    url, gate = gated_stack["url"], gated_stack["gate"]
    customer = gated_stack["customer"][0]["id"]
    body = {"customer_id": customer, "amount": 1234, "currency": "usd", "description": "race"}
    headers = {"Idempotency-Key": "key-race-1"}
    first: dict[str, httpx.Response] = {}

    def send_first() -> None:
        first["resp"] = httpx.post(f"{url}/v1/charges", json=body, headers=headers, timeout=30)

    t = threading.Thread(target=send_first)
    t.start()
    assert gate.entered.wait(20), "the first request never reached its mutation"
    second = httpx.post(f"{url}/v1/charges", json=body, headers=headers, timeout=10)
    other = httpx.post(f"{url}/v1/charges", json={**body, "amount": 1}, headers=headers, timeout=10)
    gate.release()
    t.join(30)
    assert second.status_code == 409, second.text
    assert second.json()["error"]["type"] == "idempotency_error"
    assert other.status_code == 422, other.text  # the same key with another payload
    assert first["resp"].status_code == 201, first["resp"].text
    replay = httpx.post(f"{url}/v1/charges", json=body, headers=headers, timeout=10)
    assert replay.status_code == 201 and replay.headers.get("idempotent-replayed") == "true"
    assert replay.json() == first["resp"].json()
    log = TestClient(gated_stack["admin"]).get("/admin/commit-log").json()
    assert [r["op"] for r in log] == ["charge.create"], log
    figures.add(
        "concurrency",
        "same_key_in_flight",
        {
            "second": second.status_code,
            "other_payload": other.status_code,
            "first": first["resp"].status_code,
            "replay": replay.status_code,
            "commits": len(log),
        },
    )


EPISODES = [
    ("pay-charge-customer", None),
    ("pay-split-payout", None),
    ("pay-refund-duplicate-charge", None),
    ("pay-charge-customer", "lost-ack"),
    ("pay-cross-border-wire", None),
    ("pay-renew-subscription", "lost-ack"),
]


def _episode(env: UndoBenchEnv, seed: int, workflow: str, fault: str | None) -> Any:
    ep = run_episode(env, ScriptedAgent(), seed=seed, workflow=workflow, fault=fault)
    log = [(r["op"], r["identity"]) for r in ep["commit_log"]]
    return ep["state_hash"], log, ep["transcript"], ep["success"]


@pytest.mark.slow
def test_two_stacks_in_two_threads_never_share_state(figures: Figures) -> None:
    # Both envs start in this thread: see test_stack_started_in_a_thread_outlives_the_thread.
    envs = [UndoBenchEnv("payments"), UndoBenchEnv("payments")]
    pids: list[int] = []
    results: list[dict[Any, Any]] = [{}, {}]
    try:
        for env in envs:
            env.reset(seed=0)
        plans = [[(s, w, f) for s in seeds for w, f in EPISODES] for seeds in ((1, 2), (3, 4))]
        reference = {item: _episode(envs[0], *item) for plan in plans for item in plan}
        errors: list[BaseException] = []

        def drive(i: int) -> None:
            try:
                for _ in range(2):  # twice through, interleaving with the other thread
                    for item in plans[i]:
                        results[i].setdefault(item, []).append(_episode(envs[i], *item))
            except BaseException as exc:  # surfaced below, with its traceback
                errors.append(exc)

        threads = [threading.Thread(target=drive, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
        assert not errors, errors
        mismatched = [
            (i, item)
            for i in range(2)
            for item, runs in results[i].items()
            if any(run != reference[item] for run in runs)
        ]
        assert not mismatched, mismatched
        assert all(env.runtime.restarts == 0 for env in envs)
        pids = [p for env in envs for p in env.runtime.pids()]  # type: ignore[attr-defined]
        assert len(set(pids)) == 4
    finally:
        for env in envs:
            env.close()
    assert not wait_gone(pids, timeout=10)
    figures.add(
        "concurrency",
        "two_stacks_two_threads",
        {"episodes": sum(len(v) for r in results for v in r.values()), "mismatched": 0},
    )
