"""The closed control plane, app by app: the proxy's control API and a service's admin API
answer every path only with the stack's token (`Authorization: Bearer TOKEN`), and the
service's public API (the agent's) needs none. A real stack: tests/runtime/test_process.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from undobench_gym.contract.stack_auth import auth_headers, authorized, new_token
from undobench_gym.services.domains._service.app import create_apps
from undobench_gym.services.domains._service.context import ServiceContext
from undobench_gym.services.domains._service.server import load_domain
from undobench_gym.services.proxy.control import create_control_app
from undobench_gym.services.proxy.state import EpisodeState

TOKEN = new_token()
WRONG = [
    {},
    {"Authorization": "Bearer"},
    {"Authorization": "Bearer wrong"},
    {"Authorization": f"Basic {TOKEN}"},
    {"Authorization": f"Bearer {TOKEN}x"},
    {"Authorization": f"Bearer {TOKEN[:-1]}"},
    {"X-Undobench-Token": TOKEN},
]


def test_the_header_is_checked_exactly() -> None:
    assert authorized(f"Bearer {TOKEN}", TOKEN) and authorized(f"bearer {TOKEN}", TOKEN)
    assert not any(authorized(h.get("Authorization"), TOKEN) for h in WRONG)
    assert auth_headers(None) == {} and auth_headers("") == {}


def test_every_control_route_needs_the_token() -> None:
    client = TestClient(create_control_app(EpisodeState(), TOKEN))
    calls = [
        ("GET", "/control/health", None),
        ("GET", "/control/wire", None),
        ("POST", "/control/episode", {"episode_id": "e1"}),
        ("POST", "/control/tools", {"tools": []}),
        ("GET", "/openapi.json", None),
        ("GET", "/docs", None),
        ("GET", "/no-such-path", None),
    ]
    for method, path, body in calls:
        for headers in WRONG:
            resp = client.request(method, path, json=body, headers=headers)
            assert resp.status_code == 401, (method, path, headers)
            assert resp.headers["www-authenticate"] == "Bearer"
            assert "episode" not in resp.text  # nothing of the state in a refusal
    auth = auth_headers(TOKEN)
    assert client.post("/control/episode", json={"episode_id": "e1"}, headers=auth).is_success
    assert client.get("/control/health", headers=auth).json()["episode_id"] == "e1"
    assert client.get("/control/wire", headers=auth).status_code == 200


def test_without_a_token_the_control_app_is_open() -> None:
    """A proxy started by hand (no UNDOBENCH_STACK_TOKEN) keeps the old behaviour."""
    assert TestClient(create_control_app(EpisodeState())).get("/control/health").is_success


@pytest.fixture()
def apps(tmp_path: Path) -> tuple[TestClient, TestClient]:
    domain = load_domain("payments")
    ctx = ServiceContext.open(domain, tmp_path / "data")
    public, admin = create_apps(domain, ctx, TOKEN)
    return TestClient(public), TestClient(admin)


def test_every_admin_route_needs_the_token(apps: tuple[TestClient, TestClient]) -> None:
    public, admin = apps
    calls = [
        ("GET", "/admin/health", None),
        ("GET", "/admin/state", None),
        ("GET", "/admin/commit-log", None),
        ("GET", "/admin/verdict", None),
        ("POST", "/admin/reset", {"seed": 1}),
        ("POST", "/admin/config", {"idempotency_mode": "none"}),
        ("GET", "/admin/writer/v1/customers", None),  # the public API, unproxied
        ("GET", "/openapi.json", None),
        ("GET", "/docs", None),
    ]
    for method, path, body in calls:
        for headers in WRONG:
            resp = admin.request(method, path, json=body, headers=headers)
            assert resp.status_code == 401, (method, path, headers)
    auth = auth_headers(TOKEN)
    assert admin.post("/admin/reset", json={"seed": 1}, headers=auth).is_success
    assert admin.get("/admin/writer/v1/customers", headers=auth).status_code == 200
    mode = admin.post("/admin/config", json={}, headers=auth).json()["idempotency_mode"]
    assert mode != "none"  # the refused request above changed nothing
    # the agent's API needs no token
    assert public.get("/v1/customers").status_code == 200
