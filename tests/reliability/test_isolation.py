"""Isolation: what the agent's side can reach and see.

The admin and control APIs are not reachable through the agent's URL; fault-arming headers
from a client are dropped end to end; a service container has no route out of its stack
network (checked without sending traffic outside the stack); and nothing the agent sees
(tool schemas, task text, observations, response headers) names the benchmark's
internals, over every scenario of every workflow.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
from typing import Any

import httpx
import pytest

from undobench_gym.core.catalog import all_workflows
from undobench_gym.services.domains import DOMAIN_MODULES

from .conftest import Figures

WORKFLOWS = all_workflows()
CRASHING = [(w, s) for w in WORKFLOWS for s in w.scenarios if s.crash_point]
LEAK = re.compile(
    r"(?<![a-z])(inject|fault|undobench|mitmproxy|crash[_ -]?point|scenario|benchmark)", re.I
)


def raw_get(port: int, target: str, host: str) -> int:
    """Status of a hand-written request (an absolute-form target, a forged Host)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(f"GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        head = s.recv(64)
    return int(head.split()[1])


@pytest.mark.parametrize("domain", sorted(DOMAIN_MODULES))
def test_admin_and_control_apis_are_404_through_the_agent_url(
    domain: str, env_for: Any, figures: Figures
) -> None:
    env = env_for(domain)
    env.reset(seed=1)
    ep = env.runtime.endpoints
    admin = ep.admin_urls[domain]
    harness = httpx.Client(headers=ep.auth)  # the stack's token: the harness's requests only
    paths = list(harness.get(f"{admin}/openapi.json").json()["paths"])
    paths += list(harness.get(f"{ep.control_url}/openapi.json").json()["paths"])
    assert "/admin/reset" in paths and "/control/episode" in paths
    before = harness.get(f"{admin}/admin/state").json()["hash"]
    episode = harness.get(f"{ep.control_url}/control/health").json()["episode_id"]
    agent, port = ep.agent_url, int(ep.agent_url.rsplit(":", 1)[1])
    answers: dict[str, int] = {}
    for path in paths:
        for variant in (
            path,
            f"/{domain}{path}",
            f"/{domain}/..{path}",
            f"/{domain}/%2e%2e{path}",
            f"//{path.lstrip('/')}",
            f"/{domain}/{path.lstrip('/')}",
        ):
            for method in ("GET", "POST"):
                body = {"seed": 2, "episode_id": "x", "tools": [], "idempotency_mode": "none"}
                answers[f"{method} {variant}"] = httpx.request(
                    method, agent + variant, json=body
                ).status_code
        answers[f"absolute {path}"] = raw_get(port, admin + path, "x")
        answers[f"host {path}"] = raw_get(port, path, admin.removeprefix("http://"))
    reached = {k: v for k, v in answers.items() if v != 404}
    assert not reached, reached
    # Nothing of it took effect: same state, same idempotency mode, same proxy episode.
    assert harness.get(f"{admin}/admin/state").json()["hash"] == before
    mode = harness.post(f"{admin}/admin/config", json={}).json()["idempotency_mode"]
    assert mode == env.server_idempotency
    assert harness.get(f"{ep.control_url}/control/health").json()["episode_id"] == episode
    harness.close()
    figures.add("isolation", f"admin_paths_{domain}", {"requests": len(answers), "not_404": 0})


@pytest.mark.parametrize("doc", ["openapi.json", "docs", "redoc"])
def test_agent_url_serves_no_api_internals(doc: str, env_for: Any) -> None:
    """The API document is served (a plain client may follow it) without the effect
    labels or the harness's name; FastAPI's HTML docs are not served at all."""
    env = env_for("payments")
    env.reset(seed=1)
    resp = httpx.get(f"{env.runtime.endpoints.agent_url}/payments/{doc}")
    if doc != "openapi.json":
        assert resp.status_code == 404, resp.text[:200]
        return
    assert resp.status_code == 200
    assert resp.json()["paths"], "an empty document"
    assert not LEAK.findall(resp.text), sorted(set(LEAK.findall(resp.text)))


@pytest.mark.parametrize(
    ("workflow", "scenario"), CRASHING, ids=[f"{w.id}:{s.id}" for w, s in CRASHING]
)
def test_client_crash_header_is_ignored_end_to_end(
    workflow: Any, scenario: Any, env_for: Any, play: Any
) -> None:
    """The gold plan reaches the crash point with the header set by the client on every
    request (in three spellings): the proxy strips it, so the service does not crash."""
    env = env_for(workflow.domain)
    env.reset(seed=1)
    restarts = env.runtime.restarts
    point = scenario.crash_point
    spellings = {"x-undobench-crash-point": point, "X-UndoBench-Crash-Point": point}
    try:
        for name, value in spellings.items():
            env._stack.http.headers[name] = value
            ep = play(workflow, None)
            assert ep["success"], (name, ep["verdict"]["partial"])
            del env._stack.http.headers[name]
    finally:
        for name in spellings:
            env._stack.http.headers.pop(name, None)
    assert env.runtime.restarts == restarts, f"{point}: the service crashed on a client header"
    # Positive control: the same point armed by the proxy's own plan does crash it.
    fault = play(workflow, scenario.id)
    assert fault["fault_fired"] and env.runtime.restarts == restarts + 1


@pytest.fixture(scope="module")
def two_stacks() -> Any:
    from undobench_gym.core.runtime.docker import DockerRuntime

    stacks = [DockerRuntime("payments"), DockerRuntime("database")]
    try:
        for rt in stacks:
            rt.start()
        yield stacks
    finally:
        for rt in stacks:
            rt.close()


def _internal_network(rt: Any) -> Any:
    rt._service.reload()
    nets = rt._service.attrs["NetworkSettings"]["Networks"]
    assert len(nets) == 1, nets
    return rt.client.networks.get(next(iter(nets)))


def _iptables(*args: str) -> list[str]:
    if not shutil.which("iptables"):
        pytest.skip("iptables is not installed: the engine's rules cannot be read")
    out = subprocess.run(["iptables", *args], capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


@pytest.mark.docker
def test_service_containers_sit_alone_on_internal_networks(
    two_stacks: list[Any], figures: Figures
) -> None:
    """Read from the engine and the host's packet filter; no packet is sent anywhere."""
    rules = _iptables("-S")
    nets = []
    for rt in two_stacks:
        service, proxy = rt._service, rt._proxy
        net = _internal_network(rt)
        nets.append(net.id)
        assert net.attrs["Internal"] is True
        assert set(net.attrs["Containers"]) == {service.id, proxy.id}, "a stranger on the net"
        assert not any(service.ports.values()), "the service publishes a port"
        bridge, subnet = "br-" + net.id[:12], net.attrs["IPAM"]["Config"][0]["Subnet"]
        drops = [r for r in rules if bridge in r and r.endswith("-j DROP")]
        # Forwarded traffic is dropped both ways unless it stays inside the subnet.
        assert any(f"! -d {subnet} -i {bridge}" in r for r in drops), drops
        assert any(f"! -s {subnet} -o {bridge}" in r for r in drops), drops
    assert len(set(nets)) == len(two_stacks), "two stacks share a network"
    figures.add("isolation", "docker_stacks_checked", len(two_stacks))


@pytest.mark.docker
def test_service_containers_cannot_reach_the_host(two_stacks: list[Any]) -> None:
    """The engine gives the internal bridge a host address, and traffic to it is local
    delivery (INPUT), which the isolation rules never see: DockerRuntime drops it with
    an INPUT rule per bridge. Read from addresses and rules; no packet is sent."""
    policy = _iptables("-S", "INPUT")
    for rt in two_stacks:
        bridge = "br-" + _internal_network(rt).id[:12]
        addr = subprocess.run(
            ["ip", "-4", "-o", "addr", "show", "dev", bridge], capture_output=True, text=True
        ).stdout
        dropped = any(f"-i {bridge}" in r and r.split()[-1] in ("DROP", "REJECT") for r in policy)
        assert not addr.strip() or dropped, (bridge, addr.split()[3:4], policy[:3])


@pytest.mark.slow
def test_agent_visible_text_never_names_the_harness(
    env_for: Any, play: Any, figures: Figures
) -> None:
    """Every scenario of every workflow (and each control), with the scripted agent."""
    hits: list[str] = []
    headers: list[str] = []
    agent_port = {"port": 0}

    def record(resp: httpx.Response) -> None:
        if resp.request.url.port == agent_port["port"]:
            headers.extend(f"{k}: {v}" for k, v in resp.headers.items())

    episodes = 0
    for domain in sorted(DOMAIN_MODULES):
        env = env_for(domain)
        env.reset(seed=1)
        agent_port["port"] = int(env.runtime.endpoints.agent_url.rsplit(":", 1)[1])
        env._stack.http.event_hooks["response"].append(record)
        try:
            for wf in (w for w in WORKFLOWS if w.domain == domain):
                obs, info = env.reset(seed=1, options={"workflow": wf.id})
                view = {"task": info["task"], "tools": info["tools"], "observation": obs}
                hits += [f"{wf.id} reset: {m}" for m in LEAK.findall(json.dumps(view))]
                for sc in [None, *(s.id for s in wf.scenarios)]:
                    ep = play(wf, sc)
                    episodes += 1
                    text = json.dumps(ep["transcript"], ensure_ascii=False)
                    hits += [f"{wf.id}:{sc}: {m}" for m in LEAK.findall(text)]
        finally:
            env._stack.http.event_hooks["response"].remove(record)
    hits += [f"header {h}" for h in headers if LEAK.search(h)]
    figures.add(
        "isolation", "leak_scan", {"episodes": episodes, "headers": len(headers), "hits": len(hits)}
    )
    assert not hits, hits[:20]
