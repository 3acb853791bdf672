"""Random HTTP requests at every route of every service (public and admin apps), in process.

Each domain's apps come from `create_apps(DOMAIN, ServiceContext.open(DOMAIN, tmp_path))`
after an admin reset, driven with `fastapi.testclient.TestClient`: no request may get a
5xx or raise. Routes, parameters and bodies come from each app's OpenAPI document. Every
route first gets a fixed set of bad requests (so none is missed), then hypothesis sends
schema-shaped bodies, mutated ones, and random ones.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from undobench_gym.services.domains import DOMAIN_MODULES
from undobench_gym.services.domains._service.app import create_apps
from undobench_gym.services.domains._service.context import ServiceContext
from undobench_gym.services.domains._service.server import load_domain

from .conftest import Figures
from .strategies import (
    PATHS,
    RANDOM,
    SCALE,
    SQL,
    adversarial_text,
    from_schema,
    mutated,
    object_from_schema,
    string_pool,
    wrong_values,
)

pytestmark = pytest.mark.slow
#: Examples per service (git and storage resets rebuild files: fewer); UB_FUZZ_SCALE
#: multiplies them, as in test_fuzz_env.
EXAMPLES = {"git": 100, "storage": 100}
DEFAULT_EXAMPLES = 250
SEED = 1
ASCII_PRINTABLE = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E))
FIXED_BODIES: list[bytes | None] = [
    None,
    b"",
    b"null",
    b"[]",
    b'"text"',
    b"{",
    b'{"unknown": 1}',
    b"\xff\xfe\x00",
    json.dumps({"a": "b" * 1000}).encode(),
    b"x" * ((1 << 20) + 1),  # over the 1 MiB body limit
]


@dataclass(frozen=True)
class Route:
    app: str  # "public" | "admin"
    method: str
    path: str
    params: tuple[dict[str, Any], ...]
    body: dict[str, Any] | None  # the JSON body schema, if any

    @property
    def label(self) -> str:
        return f"{self.app} {self.method} {self.path}"


def routes_of(name: str, app: FastAPI) -> tuple[list[Route], dict[str, Any]]:
    doc = app.openapi()
    out = []
    for path, item in doc["paths"].items():
        for method, op in item.items():
            body = op.get("requestBody", {}).get("content", {}).get("application/json")
            out.append(
                Route(
                    name,
                    method.upper(),
                    path,
                    tuple(op.get("parameters", [])),
                    body["schema"] if body else None,
                )
            )
    return out, doc.get("components", {}).get("schemas", {})


@dataclass
class Service:
    clients: dict[str, TestClient]
    routes: list[Route]
    components: dict[str, dict[str, Any]]
    pool: list[str]

    def reset(self) -> None:
        self.clients["admin"].post("/admin/reset", json={"seed": SEED}).raise_for_status()


@pytest.fixture()
def service(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    domain = load_domain(request.param)
    ctx = ServiceContext.open(domain, tmp_path / "data")
    public, admin = create_apps(domain, ctx)
    routes: list[Route] = []
    components: dict[str, dict[str, Any]] = {}
    for name, app in (("public", public), ("admin", admin)):
        found, comps = routes_of(name, app)
        routes += found
        components[name] = comps
    with TestClient(public) as pub, TestClient(admin) as adm:
        svc = Service({"public": pub, "admin": adm}, routes, components, [])
        svc.reset()
        svc.pool = string_pool(adm.get("/admin/state").json()["tables"])
        yield svc
    ctx.engine.dispose()


def url_for(route: Route, values: dict[str, Any], raw: bool = False) -> str:
    path = route.path
    for p in route.params:
        if p["in"] == "path":
            value = str(values.get(p["name"], "x"))
            # raw: keep "/" and "." as they are, so ".." segments reach the router.
            path = path.replace("{" + p["name"] + "}", quote(value, safe="/." if raw else ""))
    return path


def in_url(value: Any) -> bool:
    """Whether `value` can travel in a path or query string: a lone surrogate has no UTF-8
    bytes, so no HTTP client can send it there (the env makes it an invalid_action). In a
    JSON body it can, escaped as \\ud800: bodies keep it."""
    try:
        str(value).encode()
    except UnicodeEncodeError:
        return False
    return True


@st.composite
def request_for(draw: st.DrawFn, svc: Service, route: Route) -> dict[str, Any]:
    comps = svc.components[route.app]
    values: dict[str, Any] = {}
    query: dict[str, str] = {}
    headers: dict[str, str] = {}
    for p in route.params:
        schema = p.get("schema", {})
        value = draw(
            st.one_of(from_schema(schema, svc.pool, comps), adversarial_text()).filter(in_url)
        )
        if p["in"] == "path":
            values[p["name"]] = value
        elif p["in"] == "query" and draw(st.booleans()):
            query[p["name"]] = json.dumps(value) if not isinstance(value, str) else value
        elif p["in"] == "header":
            headers[p["name"]] = draw(ASCII_PRINTABLE)
    body: bytes | None = None
    kind = draw(st.sampled_from(["schema", "schema", "mutated", "random", "none"]))
    if route.body is not None and kind in ("schema", "mutated"):
        obj = draw(object_from_schema(_deref(route.body, comps), svc.pool, comps))
        if kind == "mutated":
            obj = draw(mutated(obj))
        body = json.dumps(obj, default=str).encode()
    elif kind in ("random", "schema", "mutated"):
        body = json.dumps(draw(wrong_values()), default=str).encode()
    if body is not None:
        headers["content-type"] = "application/json"
    raw = draw(st.integers(0, 4)) == 0  # sometimes unencoded: "/" and ".." in the path
    return {
        "url": url_for(route, values, raw),
        "params": query,
        "content": body,
        "headers": headers,
    }


def _deref(schema: dict[str, Any], comps: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = comps[schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def send(svc: Service, route: Route, req: dict[str, Any], statuses: Counter[int]) -> None:
    resp = svc.clients[route.app].request(
        route.method,
        req["url"],
        params=req["params"],
        content=req["content"],
        headers=req["headers"],
    )
    statuses[resp.status_code] += 1
    shown = {k: (v[:200] if isinstance(v, bytes) else v) for k, v in req.items()}
    assert resp.status_code < 500, f"{route.label} {shown} -> {resp.status_code} {resp.text[:500]}"


@pytest.mark.parametrize("service", sorted(DOMAIN_MODULES), indirect=True)
def test_every_route_answers_bad_requests_without_5xx(service: Service, figures: Figures) -> None:
    svc = service
    domain = str(svc.clients["admin"].get("/admin/health").json()["domain"])
    statuses: Counter[int] = Counter()
    t0 = time.monotonic()
    fixed = 0
    for route in svc.routes:
        has_path_params = any(p["in"] == "path" for p in route.params)
        for name in PATHS[:12] + SQL[:3] if has_path_params else []:
            values = {p["name"]: name for p in route.params}
            send(
                svc,
                route,
                {"url": url_for(route, values), "params": {}, "content": None, "headers": {}},
                statuses,
            )
            fixed += 1
        for body in FIXED_BODIES:
            headers = {"content-type": "application/json"} if body is not None else {}
            send(
                svc,
                route,
                {"url": url_for(route, {}), "params": {}, "content": body, "headers": headers},
                statuses,
            )
            fixed += 1
        svc.reset()
    tried: Counter[str] = Counter()

    examples = max(1, round(EXAMPLES.get(domain, DEFAULT_EXAMPLES) * SCALE))

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=not RANDOM,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        svc.reset()
        for _ in range(data.draw(st.integers(1, 3))):
            route = data.draw(st.sampled_from(svc.routes))
            send(svc, route, data.draw(request_for(svc, route)), statuses)
            tried[route.label] += 1

    run()
    counts = {
        "routes": len(svc.routes),
        "requests": fixed + sum(tried.values()),
        "fixed_requests": fixed,
        "random_requests": sum(tried.values()),
        "routes_hit_randomly": len(tried),
        "status_2xx": sum(n for s, n in statuses.items() if 200 <= s < 300),
        "status_4xx": sum(n for s, n in statuses.items() if 400 <= s < 500),
        "status_5xx": sum(n for s, n in statuses.items() if s >= 500),
        "seconds": round(time.monotonic() - t0, 1),
    }
    figures.add("fuzz_service", domain, counts)
    assert counts["status_2xx"] > 0, counts  # the fuzzing reached real resources too


def test_json_that_only_python_reads_is_4xx(tmp_path: Path) -> None:
    answers = {}
    for name in sorted(DOMAIN_MODULES):
        domain = load_domain(name)
        ctx = ServiceContext.open(domain, tmp_path / name)
        public, admin = create_apps(domain, ctx)
        TestClient(admin).post("/admin/reset", json={"seed": SEED}).raise_for_status()
        client = TestClient(public, raise_server_exceptions=False)
        route = next(r for r in routes_of("public", public)[0] if r.body is not None)
        for body in (b"NaN", b'{"amount": Infinity}', b'{"amount": 1, "x": "\\ud800"}'):
            resp = client.request(
                route.method,
                url_for(route, {}),
                content=body,
                headers={"content-type": "application/json"},
            )
            answers[f"{name} {route.method} {route.path} {body!r}"] = resp.status_code
        ctx.engine.dispose()
    assert all(code < 500 for code in answers.values()), answers
