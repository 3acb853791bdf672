"""`undobench openenv`: a round trip with OpenEnv's own client over its WebSocket session:
reset (seed and fault), a call the fault hits, the verdict on finish; and the CLI serves it."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("openenv") is None, reason="needs the rl extra (openenv-core)"
    ),
]

WF = "pay-charge-customer"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    import uvicorn

    from undobench_gym.harness.rl.openenv_server import StackPool, create_app

    pool = StackPool("payments", runtime="process", max_steps=8)
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(pool), host="127.0.0.1", port=port, log_level="critical")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        pool.close()


def _episode(base_url: str, fault: str | None) -> tuple[str, list[dict[str, object]], object]:
    from openenv.core.generic_client import GenericEnvClient

    with GenericEnvClient(base_url=base_url).sync() as client:
        first = client.reset(seed=7, fault=fault, workflow=WF)
        obs = first.observation
        assert first.done is False and obs["tools"]
        charge = {"tool": "create_charge"}
        from undobench_gym.core import catalog

        spec = catalog.find_workflow(WF)
        params = spec.draw_params(7, catalog.domain("payments").fixture(7))
        charge["arguments"] = {
            "customer_id": params["customer_id"],
            "amount": params["amount"],
            "currency": "usd",
            "description": params["description"],
        }
        seen = [json.loads(client.step(charge).observation["text"])]
        assert client.state()["step_count"] == 1
        last = client.step({"tool": "finish", "arguments": {"status": "done"}})
        assert last.done is True
        seen.append(last.observation["verdict"])
        return obs["task"], seen, last.reward


def test_a_pair_over_openenv_reset_a_faulted_call_and_the_verdict(base_url: str) -> None:
    task_c, (call_c, verdict_c), reward_c = _episode(base_url, None)
    task_f, (call_f, verdict_f), reward_f = _episode(base_url, "lost-ack")
    assert task_c == task_f  # one task instance for the pair
    assert call_c["status"] in (200, 201) and reward_c == 1.0
    assert call_f["error"]["type"] == "transport"  # the acknowledgement was lost...
    assert verdict_f["fault_fired"] is True  # ...after the charge committed
    assert verdict_f["success"] is True and reward_f == 1.0  # finishing there is right
    assert verdict_c["success"] is True


def test_the_cli_serves_a_domain_and_rejects_an_unknown_one() -> None:
    from undobench_gym.harness.cli import main

    assert main(["openenv", "--domain", "bank"]) == 2  # a clear error, no stack started
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "undobench_gym.harness.cli",
            "openenv",
            "--domain",
            "Payments",
            "--port",
            str(port),
        ],
        env=env,
        stderr=subprocess.DEVNULL,
    )
    try:
        import httpx

        deadline = time.monotonic() + 90
        while True:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.3)
        assert health.status_code == 200
        schema = httpx.get(f"http://127.0.0.1:{port}/schema", timeout=5).json()
        assert "tool" in json.dumps(schema["action"])
    finally:
        proc.terminate()
        proc.wait(timeout=30)
