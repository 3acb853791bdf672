"""The process runtime: readiness, supervision, and nothing left behind."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import httpx
import pytest

from undobench_gym.contract.errors import StackStartError
from undobench_gym.core.runtime import children, process
from undobench_gym.core.runtime.children import OWNER_FILE, process_started, remove_stale_workdirs
from undobench_gym.core.runtime.process import ProcessRuntime


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); check its state.
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def test_close_leaves_no_process_or_port_and_is_idempotent() -> None:
    rt = ProcessRuntime("payments")
    ep = rt.start()
    pids = rt.pids()
    ports = [
        int(u.rsplit(":", 1)[1]) for u in (ep.agent_url, ep.control_url, *ep.admin_urls.values())
    ]
    assert all(_alive(p) for p in pids)
    assert httpx.get(f"{ep.admin_urls['payments']}/admin/health", headers=ep.auth).json()["ok"]
    workdir = rt.workdir
    rt.close()
    rt.close()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    assert not any(_alive(p) for p in pids)
    while time.monotonic() < deadline and not all(_port_free(p) for p in ports):
        time.sleep(0.05)
    busy = [p for p in ports if not _port_free(p)]
    ss = ["ss", "-ltnpH"] if shutil.which("ss") else ["true"]
    listeners = subprocess.run(ss, capture_output=True, text=True).stdout
    assert not busy, f"ports {busy} still answer; listeners:\n{listeners}"
    assert not workdir.exists()
    with pytest.raises(StackStartError):
        rt.start()


def test_stack_processes_load_neither_gymnasium_nor_numpy() -> None:
    """A service and its proxy never make an environment: the registration (and the
    ~16 MiB per process of Gymnasium and NumPy) stays out of them."""
    with ProcessRuntime("payments") as rt:
        for pid in rt.process_pids():
            maps = Path(f"/proc/{pid}/maps").read_text()
            assert "/numpy/" not in maps, pid
    probe = "import sys, undobench_gym as u; print(len(u.ENV_IDS), 'gymnasium' in sys.modules)"
    env = {**os.environ, "UNDOBENCH_STACK_PROCESS": "1"}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    assert out.stdout.split() == ["8", "True"], out.stderr  # ENV_IDS on demand imports it
    probe = "import sys, undobench_gym.contract; print('gymnasium' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    assert out.stdout.split() == ["False"], out.stderr


def test_context_manager_closes_on_exceptions() -> None:
    pids: list[int] = []
    with pytest.raises(RuntimeError, match="boom"), ProcessRuntime("payments") as rt:
        pids = rt.pids()
        raise RuntimeError("boom")
    time.sleep(0.2)
    assert pids and not any(_alive(p) for p in pids)


def test_admin_and_control_apis_answer_only_the_stacks_token() -> None:
    """Every admin and control path (health and API documents included) is 401 without
    the stack's token or with another; the agent's URL needs none."""
    with ProcessRuntime("payments") as rt:
        ep = rt.endpoints
        admin, control = ep.admin_urls["payments"], ep.control_url
        paths = [f"{admin}/admin/{p}" for p in ("health", "state", "commit-log", "verdict")] + [
            f"{admin}/openapi.json",
            f"{admin}/admin/writer/v1/customers",
        ]
        paths += [f"{control}/control/{p}" for p in ("health", "wire")] + [f"{control}/docs"]
        for url in paths:
            for headers in ({}, {"Authorization": "Bearer not-the-token"}):
                assert httpx.get(url, headers=headers).status_code == 401, (url, headers)
            assert httpx.get(url, headers=ep.auth).status_code == 200, url
        for url, body in (
            (f"{admin}/admin/reset", {"seed": 2}),
            (f"{control}/control/episode", {"episode_id": "x"}),
        ):
            assert httpx.post(url, json=body).status_code == 401
        assert httpx.get(f"{ep.agent_url}/payments/v1/customers").status_code == 200
        assert len(ep.token) >= 32 and ep.token not in repr(ep)
        # the token is in no command line (any local user reads those)
        for pid in rt.process_pids():
            assert ep.token.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
        assert rt.workdir.stat().st_mode & 0o077 == 0


def test_killed_service_is_restarted_with_its_data() -> None:
    with ProcessRuntime("payments") as rt, httpx.Client(headers=rt.endpoints.auth) as http:
        admin = rt.endpoints.admin_urls["payments"]
        http.post(f"{admin}/admin/reset", json={"seed": 4}).raise_for_status()
        before = http.get(f"{admin}/admin/state").json()["hash"]
        old_pid = http.get(f"{admin}/admin/health").json()["pid"]
        os.kill(old_pid, signal.SIGKILL)
        time.sleep(0.3)
        rt.wait_healthy(timeout=20)
        deadline = time.monotonic() + 10
        while True:
            try:
                health = http.get(f"{admin}/admin/health").json()
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        assert health["pid"] != old_pid and rt.restarts == 1
        assert http.get(f"{admin}/admin/state").json()["hash"] == before
        assert rt.unplanned_exits == 1 and rt.service_exits == [-signal.SIGKILL]


def test_a_killed_proxy_is_unplanned_and_keeps_its_tool_table() -> None:
    with ProcessRuntime("payments") as rt:
        _service, proxy = rt.pids()
        os.kill(proxy, signal.SIGKILL)
        deadline = time.monotonic() + 20
        while proxy in rt.pids() and time.monotonic() < deadline:
            time.sleep(0.05)
        rt.wait_healthy(probe=True)
        assert rt.unplanned_exits == 1
        # The restarted proxy still names calls by tool (the table is on its command line).
        httpx.get(f"{rt.endpoints.agent_url}/payments/v1/customers")
        wire = httpx.get(
            f"{rt.endpoints.control_url}/control/wire", headers=rt.endpoints.auth
        ).json()
        assert [e["tool"] for e in wire["events"]] == ["list_customers"]


def test_workdirs_of_dead_owners_are_removed(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    for name, pid in (("undobench-gone-1", dead.pid), ("undobench-live-1", os.getpid())):
        (tmp_path / name).mkdir()
        started = process_started(pid) or "0"
        (tmp_path / name / OWNER_FILE).write_text(json.dumps({"pid": pid, "started": started}))
    (tmp_path / "undobench-foreign").mkdir()  # no owner file: not ours to remove
    assert remove_stale_workdirs(tmp_path) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["undobench-foreign", "undobench-live-1"]


def test_a_spawn_interrupted_by_a_signal_kills_the_child_it_forked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SIGTERM -> SystemExit in a worker while the spawner thread forks: the caller never
    gets the Popen, so popen() itself must stop the child (else it outlives close())."""
    forked: list[subprocess.Popen[bytes]] = []

    class InterruptedWait(Future[Any]):
        def result(self, timeout: float | None = None) -> Any:
            if timeout is None:  # the caller's wait: let the fork finish, then "get SIGTERM"
                forked.append(super().result())
                raise SystemExit(143)
            return super().result(timeout)

    monkeypatch.setattr(children, "Future", InterruptedWait)
    with pytest.raises(SystemExit):
        children.SPAWNER.popen(["sleep", "30"], start_new_session=True)
    assert len(forked) == 1
    assert forked[0].returncode == -signal.SIGKILL


def test_a_runtime_interrupted_while_it_is_made_leaves_no_workdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(pid: int) -> str | None:
        raise SystemExit(143)

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(process, "process_started", interrupted)
    with pytest.raises(SystemExit):
        ProcessRuntime("payments")
    assert list(tmp_path.iterdir()) == []


def test_start_failure_names_the_service_and_shows_its_log() -> None:
    rt = ProcessRuntime("no-such-domain")
    with pytest.raises(StackStartError) as info:
        rt.start()
    message = str(info.value)
    assert "no-such-domain" in message and "unknown domain" in message
    rt.close()


def test_ports_are_chosen_below_the_ephemeral_range() -> None:
    lo = children._ephemeral_range()[0]
    ports = {children.free_port() for _ in range(50)}
    assert all(children._LOWEST_PORT <= p < lo for p in ports)
    assert len(ports) > 40  # random, so that concurrent choosers rarely collide


def test_ports_are_chosen_above_the_compose_files_fixed_ports() -> None:
    """Stop 25's CI failure: a test's stack held 127.0.0.1:18302 (database's admin port
    in docker-compose.yml) when the compose test brought the file up."""
    from undobench_gym.core.runtime.compose import host_ports

    fixed = [port for ports in host_ports().values() for port in ports.values()]
    assert max(fixed) < children._LOWEST_PORT


@pytest.mark.parametrize(
    "taken_index", [0, 2, 3], ids=["service-port", "proxy-port", "control-port"]
)
def test_a_port_taken_before_the_child_binds_it_is_chosen_again(
    monkeypatch: pytest.MonkeyPatch, taken_index: int
) -> None:
    """The CI failure of stop 22: another process bound the proxy's chosen port between
    the choice and mitmproxy's bind. The stack must choose again, not fail, and at once:
    a proxy whose control API could not bind exits (it used to run on without one, and the
    stack waited out its 30 s readiness timeout before choosing again)."""
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    taken = squatter.getsockname()[1]
    real = children.free_port
    calls = iter(range(1000))
    monkeypatch.setattr(
        process, "free_port", lambda: taken if next(calls) == taken_index else real()
    )
    try:
        t0 = time.monotonic()
        with ProcessRuntime("payments") as rt:  # starts the stack
            assert time.monotonic() - t0 < children.READY_TIMEOUT_S / 2, "waited for a timeout"
            ep = rt.start()
            assert str(taken) not in ep.agent_url + ep.control_url
            health = httpx.get(f"{ep.admin_urls['payments']}/admin/health", headers=ep.auth)
            assert health.json()["ok"]
            assert list(rt.workdir.glob("*.port-taken-0.log"))
    finally:
        squatter.close()


def test_undobench_image_pins_the_docker_runtimes_image(monkeypatch: pytest.MonkeyPatch) -> None:
    """`UNDOBENCH_IMAGE` wins over :latest, and a tag that does not exist is a clear error."""
    from undobench_gym.contract.errors import UndoBenchError
    from undobench_gym.core.runtime.images import current_image

    class Images:
        def list(self, name: str) -> list[str]:
            return [name] if name in {"undobench/stack:latest", "undobench/stack:abc"} else []

    class Client:
        images = Images()

    monkeypatch.delenv("UNDOBENCH_IMAGE", raising=False)
    assert current_image(Client()) == "undobench/stack:latest"
    monkeypatch.setenv("UNDOBENCH_IMAGE", "undobench/stack:abc")
    assert current_image(Client()) == "undobench/stack:abc"
    monkeypatch.setenv("UNDOBENCH_IMAGE", "undobench/stack:gone")
    with pytest.raises(UndoBenchError, match="UNDOBENCH_IMAGE"):
        current_image(Client())
