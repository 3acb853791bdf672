"""The docker runtime: isolation, crash restart with state on disk, nothing left behind."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from typing import Any

import pytest

pytestmark = pytest.mark.docker


def _project_objects(client: Any, stack: str | None = None) -> dict[str, list[Any]]:
    label = "io.undobench.project=undobench-gym"
    filters = {"label": [label] + ([f"io.undobench.stack={stack}"] if stack else [])}
    return {
        "containers": client.containers.list(all=True, filters=filters),
        "networks": client.networks.list(filters=filters),
        "volumes": client.volumes.list(filters=filters),
    }


@pytest.fixture()
def stack() -> Any:
    from undobench_gym.core.runtime.docker import DockerRuntime

    rt = DockerRuntime("payments")
    rt.start()
    yield rt
    rt.close()


def test_only_the_proxy_is_reachable_and_services_cannot_leave_the_stack(stack: Any) -> None:
    service, proxy = stack._service, stack._proxy
    service.reload()
    proxy.reload()
    # The service publishes nothing; the proxy publishes on 127.0.0.1 only.
    assert not any(service.ports.values())
    bindings = [b for v in proxy.ports.values() if v for b in v]
    assert bindings and {b["HostIp"] for b in bindings} == {"127.0.0.1"}
    # The service sits on one network, and that network is internal: no route out.
    nets = service.attrs["NetworkSettings"]["Networks"]
    assert len(nets) == 1
    (net_name,) = nets
    assert stack.client.networks.get(net_name).attrs["Internal"] is True
    # Checked without sending traffic anywhere outside the stack: the engine drops
    # everything that would leave the internal bridge (its isolation rules) ...
    network = stack.client.networks.get(net_name)
    bridge = "br-" + network.id[:12]
    subnet = network.attrs["IPAM"]["Config"][0]["Subnet"]
    if shutil.which("iptables"):
        rules = subprocess.run(["iptables", "-S"], capture_output=True, text=True).stdout
        drops = [r for r in rules.splitlines() if bridge in r and r.endswith("-j DROP")]
        assert any(f"! -d {subnet}" in r and f"-i {bridge}" in r for r in drops), drops
    # ... and the host's published ports are on the host's loopback, which is not the
    # service's: from inside, that port is closed (the probe stays in its own namespace).
    agent_port = stack.endpoints.agent_url.rsplit(":", 1)[1]
    probe = (
        "import socket,sys; s=socket.socket(); s.settimeout(2); "
        f"sys.exit(s.connect_ex(('127.0.0.1', {agent_port})) == 0)"
    )
    assert service.exec_run(["python3", "-c", probe]).exit_code == 0
    # The proxy's agent route does not lead to the admin API.
    import httpx

    r = httpx.get(f"{stack.endpoints.agent_url}/admin/state")
    assert r.status_code == 404


def test_crash_point_restarts_the_container_with_its_state(play: Any, env_for: Any) -> None:
    from undobench_gym.core.catalog import find_workflow

    wf = find_workflow("pay-split-payout")
    env = env_for("payments", "native", "docker")
    before = env.runtime.restarts
    ep = play(wf, "crash-mid-batch", runtime="docker")
    assert env.runtime.restarts == before + 1
    assert ep["fault_fired"] and any("processing with 1/3" in p for p in ep["verdict"]["partial"])
    assert play(wf, None, runtime="docker")["success"]


def _bridge(rt: Any) -> str:
    rt._service.reload()
    (net,) = rt._service.attrs["NetworkSettings"]["Networks"].values()
    return "br-" + str(net["NetworkID"])[:12]


def _host_drops(bridge: str) -> list[str]:
    """The host INPUT rules that drop what enters from `bridge` (none without iptables)."""
    if not shutil.which("iptables") or os.geteuid() != 0:
        return []
    out = subprocess.run(["iptables", "-S", "INPUT"], capture_output=True, text=True).stdout
    return [r for r in out.splitlines() if f"-i {bridge} " in r and r.endswith("-j DROP")]


def test_close_and_gc_leave_nothing_behind() -> None:
    from undobench_gym.core.runtime.docker import DockerRuntime, gc

    can_filter = bool(shutil.which("iptables")) and os.geteuid() == 0
    rt = DockerRuntime("payments")
    rt.start()
    sid, bridge = rt.stack_id, _bridge(rt)
    assert all(_project_objects(rt.client, sid).values())
    assert len(_host_drops(bridge)) == int(can_filter)
    rt.close()
    rt.close()
    assert not any(_project_objects(rt.client, sid).values())
    assert not _host_drops(bridge)
    leaked = DockerRuntime("database")
    leaked.start()
    leaked._finalizer.detach()  # simulate a process that died without closing
    bridge = _bridge(leaked)
    assert len(_host_drops(bridge)) == int(can_filter)
    # Only this stack: other stacks of the session (and of other runs) stay up.
    counts = gc(stack=leaked.stack_id)
    assert counts == {"containers": 2, "networks": 2, "volumes": 1}
    assert not any(_project_objects(leaked.client, leaked.stack_id).values())
    assert not _host_drops(bridge)
    # The finalizer (what atexit runs for a runtime never closed) removes the rule too.
    dropped = DockerRuntime("payments")
    dropped.start()
    sid, bridge = dropped.stack_id, _bridge(dropped)
    dropped._finalizer()
    assert not any(_project_objects(dropped.client, sid).values())
    assert not _host_drops(bridge)


def _kill_main_process(container: Any) -> None:
    container.reload()
    os.kill(int(container.attrs["State"]["Pid"]), signal.SIGKILL)


def test_unplanned_exits_count_kills_but_not_crash_points() -> None:
    """A crash point's exit (75) is planned; a SIGKILLed service or proxy is not. Each exit
    counts once, whether the container is still down when the env probes or was already
    started again, and the stack answers on the same endpoints afterwards."""
    import httpx

    from undobench_gym.agents.scripted import ScriptedAgent
    from undobench_gym.core.env import UndoBenchEnv
    from undobench_gym.core.pairing import run_episode

    if os.geteuid() != 0:
        pytest.skip("signalling a container's main process from the host needs root")
    env = UndoBenchEnv("payments", runtime="docker")
    try:
        rt: Any = env.runtime
        endpoints = rt.endpoints
        ep = run_episode(
            env, ScriptedAgent(), seed=1, workflow="pay-split-payout", fault="crash-mid-batch"
        )
        assert ep["fault_fired"]
        assert (rt.restarts, rt.unplanned_exits, rt.exits) == (1, 0, [("service", 75)])

        _kill_main_process(rt._service)
        deadline = time.monotonic() + 20
        while rt._service.status != "exited" and time.monotonic() < deadline:
            time.sleep(0.05)
            rt._service.reload()
        assert rt._service.status == "exited"  # no restart policy: down until we probe
        rt.wait_healthy(probe=True)
        assert rt.unplanned_exits == 1 and rt.exits[-1] == ("service", 137)
        rt.wait_healthy(probe=True)  # already started again: not counted twice
        assert rt.unplanned_exits == 1

        _kill_main_process(rt._proxy)  # probed at once: may still look running
        rt.wait_healthy(probe=True)
        assert rt.unplanned_exits == 2 and rt.exits[-1] == ("proxy", 137)
        assert rt.restarts == 3 and rt.endpoints == endpoints
        admin = endpoints.admin_urls["payments"]
        for url in (f"{admin}/admin", f"{endpoints.control_url}/control"):
            assert httpx.get(f"{url}/health", headers=endpoints.auth).status_code == 200
            assert httpx.get(f"{url}/health").status_code == 401  # the stack's token only
        again = run_episode(
            env, ScriptedAgent(), seed=2, workflow="pay-split-payout", fault="crash-mid-batch"
        )
        assert again["fault_fired"] and rt.unplanned_exits == 2 and rt.restarts == 4
    finally:
        env.close()


def test_compose_file_is_generated_and_current() -> None:
    from pathlib import Path

    from undobench_gym.core.runtime.compose import render

    compose = Path(__file__).resolve().parents[2] / "docker-compose.yml"
    assert compose.read_text() == render(), "run: undobench images compose > docker-compose.yml"
    assert "0.0.0.0:" not in "".join(
        line for line in compose.read_text().splitlines() if line.strip().startswith('- "')
    )
