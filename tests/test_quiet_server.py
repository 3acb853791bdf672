"""The stack's uvicorn servers tick once a second, yet exit at once when asked to."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from undobench_gym.contract import quiet_server
from undobench_gym.contract.quiet_server import QuietServer


def _app() -> FastAPI:
    app = FastAPI()

    @app.get("/ping")
    def ping() -> dict[str, bool]:
        return {"ok": True}

    return app


def _serve(server: uvicorn.Server) -> tuple[threading.Thread, int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive()
        time.sleep(0.01)
    return thread, port


def test_exit_from_another_thread_does_not_wait_for_the_tick(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(quiet_server, "TICK_S", 60.0)  # a missed wake-up would take 60 s
    server = QuietServer(uvicorn.Config(_app(), log_level="warning", lifespan="off"))
    thread, port = _serve(server)
    r = httpx.get(f"http://127.0.0.1:{port}/ping")
    assert r.json() == {"ok": True} and r.headers["date"].endswith("GMT")
    time.sleep(0.2)  # the loop is asleep in its wait now
    server.should_exit = True
    thread.join(timeout=10)
    assert not thread.is_alive()


SIGNALLED = """
import socket, sys, uvicorn
from fastapi import FastAPI
from undobench_gym.contract import quiet_server
quiet_server.TICK_S = 60.0
server = quiet_server.QuietServer(uvicorn.Config(FastAPI(), log_level="warning", lifespan="off"))
sock = socket.socket(); sock.bind(("127.0.0.1", 0))
print(sock.getsockname()[1], flush=True)
server.run(sockets=[sock])
"""


def test_a_signal_ends_the_server_without_waiting_for_the_tick(tmp_path: Path) -> None:
    script = tmp_path / "serve.py"
    script.write_text(SIGNALLED)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/")
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline
                time.sleep(0.02)
        time.sleep(0.2)
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)  # a missed wake-up would take 60 s
    finally:
        proc.kill()
        proc.wait()
