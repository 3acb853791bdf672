"""The local spin for real: `docker-compose.yml` comes up, every domain answers on its agent
port (through its fault proxy), its proxy control port and its admin port (those two only
with the token from the environment), and `down -v` leaves no container, network or
volume of the project behind.

Uses `docker compose` (the v2 plugin) where present, else Debian's `docker-compose` 1.29,
which `.ci/run` installs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from undobench_gym.contract.stack_auth import TOKEN_ENV, auth_headers

pytestmark = [pytest.mark.docker, pytest.mark.slow]

COMPOSE_FILE = Path(__file__).resolve().parents[2] / "docker-compose.yml"
PROJECT = "undobench-compose-test"
PROJECT_LABEL = f"com.docker.compose.project={PROJECT}"
TOKEN = "compose-test-token"
AUTH = auth_headers(TOKEN)


def _compose_command() -> list[str] | None:
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True)
        if probe.returncode == 0:
            return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


def _ports() -> dict[str, dict[str, int]]:
    """domain -> {agent, control, admin} from the file's own port table (its header)."""
    table = re.findall(
        r"#\s+(\w+)\s+agent (\d+)\s+control (\d+)\s+admin (\d+)", COMPOSE_FILE.read_text()
    )
    return {d: {"agent": int(a), "control": int(c), "admin": int(m)} for d, a, c, m in table}


def _wait_ok(url: str, deadline: float, headers: dict[str, str] | None = None) -> httpx.Response:
    last: Any = None
    while time.monotonic() < deadline:
        try:
            resp = httpx.get(url, timeout=5, headers=headers)
            if resp.status_code == 200:
                return resp
            last = resp.status_code
        except httpx.HTTPError as exc:
            last = exc
        time.sleep(0.5)
    raise AssertionError(f"{url} did not answer 200 in time (last: {last!r})")


def _leftovers(client: Any) -> dict[str, list[str]]:
    flt = {"label": PROJECT_LABEL}
    return {
        "containers": [c.name for c in client.containers.list(all=True, filters=flt)],
        "networks": [n.name for n in client.networks.list(filters=flt)],
        "volumes": [v.name for v in client.volumes.list(filters=flt)],
    }


@pytest.fixture()
def compose(docker_client: Any) -> Any:
    command = _compose_command()
    if command is None:
        if os.environ.get("CI"):
            pytest.fail("no `docker compose` and no `docker-compose`: .ci/run installs it")
        pytest.skip("needs `docker compose` or `docker-compose`")
    if not docker_client.images.list(name="undobench/stack:latest"):
        pytest.fail("no undobench/stack:latest image: run `undobench images build --offline`")
    base = [*command, "-p", PROJECT, "-f", str(COMPOSE_FILE)]

    def run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*base, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env={**os.environ, TOKEN_ENV: TOKEN},
        )

    yield run
    run("down", "-v", "--remove-orphans")


@pytest.fixture()
def docker_client() -> Any:
    docker = pytest.importorskip("docker")
    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:
        if os.environ.get("CI"):
            pytest.fail(f"no docker engine: {exc}")
        pytest.skip(f"no docker engine: {exc}")
    return client


def test_compose_up_serves_every_domain_and_down_leaves_nothing(
    compose: Any, docker_client: Any
) -> None:
    ports = _ports()
    assert len(ports) == 8  # the file's table names every domain
    up = compose("up", "-d")
    assert up.returncode == 0, up.stderr[-3000:]
    deadline = time.monotonic() + 180
    for domain, p in ports.items():
        admin = f"http://127.0.0.1:{p['admin']}/admin/health"
        health = _wait_ok(admin, deadline, AUTH).json()
        assert health["ok"] is True and health["domain"] == domain
        assert httpx.get(admin, timeout=5).status_code == 401  # no token, no answer
        # the agent's port is the fault proxy in front of the service's public API
        agent = f"http://127.0.0.1:{p['agent']}/{domain}"
        doc = _wait_ok(f"{agent}/openapi.json", deadline).json()
        reads = [
            path
            for path, ops in doc["paths"].items()
            if "{" not in path
            and "get" in ops
            and not any(q.get("required") for q in ops["get"].get("parameters", []))
        ]
        assert reads, f"{domain}: no read without parameters in its API document"
        _wait_ok(agent + reads[0], deadline)  # a real call, through the proxy
        control = f"http://127.0.0.1:{p['control']}/control/health"
        _wait_ok(control, deadline, AUTH)
        assert httpx.get(control, timeout=5).status_code == 401
    published = {
        port["HostIp"]
        for c in docker_client.containers.list(filters={"label": PROJECT_LABEL})
        for bindings in (c.attrs["NetworkSettings"]["Ports"] or {}).values()
        for port in bindings or []
    }
    assert published == {"127.0.0.1"}  # never on another address

    down = compose("down", "-v", "--remove-orphans")
    assert down.returncode == 0, down.stderr[-3000:]
    assert _leftovers(docker_client) == {"containers": [], "networks": [], "volumes": []}
