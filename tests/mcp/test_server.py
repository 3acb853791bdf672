"""`undobench mcp` with the official SDK's own client, over stdio and streamable HTTP: the
tools it lists (hints present or switched off), a faulted call (a lost acknowledgement is
an error result with the text a client sees), the agent's `finish`, and the verdict, which
only the harness's control endpoint gives."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

pytest.importorskip("mcp", reason="pip install -e '.[mcp]'")

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from undobench_gym.contract.specs import fill
from undobench_gym.core.catalog import domain, find_workflow
from undobench_gym.core.mcp.sdk import http_streams, wire

WF = find_workflow("pay-charge-customer")
SEED = 1
BASE = ["-m", "undobench_gym.harness.cli", "mcp", "--domain", "Payments", "--workflow", WF.id]


def plan(seed: int = SEED) -> list[dict[str, Any]]:
    params = WF.draw_params(seed, domain(WF.domain).fixture(seed))
    return [{"tool": s.tool, "arguments": fill(s.arguments, params)} for s in WF.gold_plan]


def wait_for(path: Path, proc: subprocess.Popen[bytes], timeout: float = 60) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    while not path.exists() or not path.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"undobench mcp did not come up (exit {proc.poll()})")
        time.sleep(0.05)
    urls: dict[str, str] = {**json.loads(path.read_text()), "file": str(path)}
    return urls


def auth(urls: dict[str, str]) -> dict[str, str]:
    """The control endpoint's token, from the --control-file the harness reads."""
    return {"Authorization": f"Bearer {urls['token']}"}


@pytest.fixture()
def http_server(tmp_path: Path) -> Iterator[tuple[dict[str, str], subprocess.Popen[bytes]]]:
    control = tmp_path / "control.json"
    args = [*BASE, "--transport", "http", "--control-file", str(control), "--no-episode"]
    proc = subprocess.Popen([sys.executable, *args], stderr=subprocess.DEVNULL)
    try:
        yield wait_for(control, proc), proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def faulted_episode(session: ClientSession) -> dict[str, Any]:
    """List the tools, follow the plan into the lost acknowledgement, then finish."""
    await session.initialize()
    listed = (await session.list_tools()).tools
    get, charge = plan()
    first = await session.call_tool(get["tool"], get["arguments"])
    second = await session.call_tool(charge["tool"], charge["arguments"])
    bad = await session.call_tool("create_charge", {"amount": "lots"})
    done = await session.call_tool("finish", {"status": "gave_up", "summary": "lost ack"})
    after = await session.call_tool(get["tool"], get["arguments"])
    return {"tools": {t.name: t for t in listed}, "calls": [first, second, bad, done, after]}


def is_error(result: Any) -> bool:
    return bool(wire(result).get("isError"))


def text(result: Any) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(result.content[0].text)
    return value


def check_faulted(seen: dict[str, Any], *, annotations: bool) -> None:
    assert sorted(seen["tools"]) == sorted([*WF.tools, "finish"])
    tools = {name: wire(t) for name, t in seen["tools"].items()}  # the wire names
    charge = tools["create_charge"]
    assert charge["inputSchema"]["properties"]["amount"]
    if annotations:
        hints = charge["annotations"]
        assert hints == {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False}
        assert tools["get_customer"]["annotations"]["readOnlyHint"] is True
    else:
        assert all("annotations" not in t for t in tools.values())
    first, second, bad, done, after = seen["calls"]
    assert not is_error(first) and text(first)["status"] == 200
    # The lost acknowledgement: what a client sees, as an error result; nothing says "fault".
    assert is_error(second)
    assert text(second)["error"]["type"] == "transport"
    assert "fault" not in second.content[0].text.lower()
    assert is_error(bad) and text(bad)["error"]["type"] == "invalid_action"
    assert text(done) == {"finished": True} and not is_error(done)
    assert is_error(after) and text(after)["error"]["type"] == "episode"


def check_verdict(result: dict[str, Any]) -> None:
    assert result["running"] is False
    episode = result["episode"]
    assert episode["fault_fired"] is True and episode["finish_status"] == "gave_up"
    assert [e["tool"] for e in episode["wire"]] == ["get_customer", "create_charge"]
    # The charge committed once: the state is right (by luck: the agent said it failed).
    assert result["verdict"]["success"] is True and result["verdict"]["duplicates"] == []
    assert result["harness"]["scenario"] == "lost-ack"


@pytest.mark.parametrize("annotations", [True, False])
def test_stdio_with_the_sdk_client(tmp_path: Path, annotations: bool) -> None:
    control, record = tmp_path / "control.json", tmp_path / "record.json"
    args = [*BASE, "--seed", str(SEED), "--fault", "lost-ack", "--control-file", str(control)]
    args += ["--record", str(record)] + ([] if annotations else ["--no-annotations"])
    params = StdioServerParameters(command=sys.executable, args=args)

    async def run() -> tuple[dict[str, Any], dict[str, Any]]:
        with open(tmp_path / "stderr.log", "w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                seen = await faulted_episode(session)
                urls = json.loads(control.read_text())
                async with httpx.AsyncClient(headers=auth(urls)) as client:
                    verdict = (await client.get(urls["control"] + "/episode")).json()
        return seen, verdict

    seen, verdict = anyio.run(run)
    check_faulted(seen, annotations=annotations)
    check_verdict(verdict)
    # Closing stdin ends the server; --record holds the same result.
    deadline = time.monotonic() + 30
    while not record.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    check_verdict(json.loads(record.read_text()))


def test_streamable_http_with_the_sdk_client(http_server: Any) -> None:
    urls, _proc = http_server
    # Without the token (an agent that found the port) the control endpoint refuses.
    for method, path in (("GET", "/episode"), ("POST", "/reset"), ("POST", "/finish")):
        refused = httpx.request(method, urls["control"] + path, json={"seed": SEED}, timeout=60)
        assert refused.status_code == 401, (method, path, refused.text)
    wrong = {"Authorization": "Bearer not-the-token"}
    assert httpx.get(urls["control"] + "/episode", headers=wrong).status_code == 401
    assert oct(os.stat(urls["file"]).st_mode & 0o777) == "0o600"  # the token's file
    with httpx.Client(base_url=urls["control"], headers=auth(urls), timeout=60) as control:
        assert control.get("/episode").json()["running"] is False
        started = control.post("/reset", json={"seed": SEED, "fault": "lost-ack"}).json()
        # The control episode of the same seed is told exactly the same.
        assert started["tools"] == [*WF.tools, "finish"]
        assert set(started) == {"running", "task", "task_instance", "tools"}

        async def run() -> dict[str, Any]:
            async with (
                http_streams(urls["mcp"]) as (read, write),
                ClientSession(read, write) as session,
            ):
                return await faulted_episode(session)

        seen = anyio.run(run)
        check_faulted(seen, annotations=True)
        check_verdict(control.post("/finish").json())
        # Malformed control input is a clear 400, and the server keeps serving.
        bad = control.post("/reset", content=b"{not json")
        assert bad.status_code == 400 and "JSON" in bad.json()["error"]
        assert control.post("/reset", json={"seed": "x"}).status_code == 400
        assert control.post("/reset", json={"seed": 2, "fault": "nope"}).status_code == 400


def test_no_episode_no_step(http_server: Any) -> None:
    """Before the harness starts an episode the agent sees no tools and cannot step."""
    urls, _proc = http_server

    async def run() -> tuple[list[str], Any]:
        async with (
            http_streams(urls["mcp"]) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            names = [t.name for t in (await session.list_tools()).tools]
            return names, await session.call_tool("get_customer", {"customer_id": "x"})

    names, result = anyio.run(run)
    assert names == []
    assert is_error(result) and text(result)["error"]["type"] == "episode"


def test_a_desktop_client_sees_the_tools_with_no_option_given(tmp_path: Path) -> None:
    """`undobench mcp --domain payments` alone serves a default episode (the domain's first
    TEST workflow, seed 1, no fault): the tools with their hints, a read, and `finish`."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "undobench_gym.harness.cli", "mcp", "--domain", "payments"],
    )
    wf = find_workflow("pay-split-payout")

    async def run() -> tuple[list[Any], Any, Any]:
        with open(tmp_path / "stderr.log", "w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                tools = (await session.list_tools()).tools
                reads = [t for t in tools if wire(t).get("annotations", {}).get("readOnlyHint")]
                read_result = await session.call_tool(reads[0].name, {})
                done = await session.call_tool("finish", {"status": "gave_up", "summary": "x"})
        return tools, read_result, done

    tools, read_result, done = anyio.run(run)
    assert sorted(t.name for t in tools) == sorted([*wf.tools, "finish"])
    # a read without its arguments is the env's own invalid-action answer, not a crash
    assert json.loads(read_result.content[0].text)
    assert json.loads(done.content[0].text) == {"finished": True}
    assert "pay-split-payout seed 1" in (tmp_path / "stderr.log").read_text()
