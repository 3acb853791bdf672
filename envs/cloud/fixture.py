"""The seeded initial state of the cloud service: a pure function of the seed.

Every service runs an active blue deployment (revision 2, after a superseded revision 1)
that takes all traffic and is registered in the discovery catalog. Service 0 is mid-way
through a bad green release: green revision 4 (registered, half the traffic) replaced a
good green revision 3.
"""

from __future__ import annotations

from typing import Any

from undobench_gym.seeding import rng_for, stable_id

SERVICE_NAMES = [
    "checkout",
    "payments-api",
    "search",
    "inventory",
    "notifications",
    "auth",
    "recommendations",
    "shipping",
    "catalog",
    "billing",
]
TEAMS = ["storefront", "platform", "growth", "fulfilment", "identity"]
N_SERVICES = 5
REGISTRY = "registry.internal"
CREATED = "2025-12-31T12:00:00Z"
COLOURS = ("blue", "green")


def deployment_id(seed: int, service_id: str, revision: int) -> str:
    """Deployment ids are a pure function of (seed, service, revision), like a rollout name."""
    return stable_id("dep", seed, service_id, revision)


def image_for(name: str, version: tuple[int, int, int]) -> str:
    return f"{REGISTRY}/{name}:{version[0]}.{version[1]}.{version[2]}"


def address_for(name: str, revision: int) -> str:
    return f"{name}-r{revision}.svc.cluster.internal:8080"


def _deployment(
    seed: int, service: dict[str, Any], colour: str, revision: int, image: str, **kw: Any
) -> dict[str, Any]:
    return {
        "id": deployment_id(seed, service["id"], revision),
        "service_id": service["id"],
        "colour": colour,
        "revision": revision,
        "image": image,
        "replicas": kw.get("replicas", 2),
        "status": kw.get("status", "active"),
        "health": "healthy",
        "restart_count": kw.get("restart_count", 0),
        "created": CREATED,
    }


def _endpoint(seed: int, service: dict[str, Any], dep: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": stable_id("ep", seed, dep["id"]),
        "service_id": service["id"],
        "deployment_id": dep["id"],
        "colour": dep["colour"],
        "address": address_for(service["name"], dep["revision"]),
        "registered": CREATED,
    }


def build_fixture(seed: int) -> dict[str, list[dict[str, Any]]]:
    rng = rng_for("cloud-fixture", seed)
    names = rng.sample(SERVICE_NAMES, N_SERVICES)
    services: list[dict[str, Any]] = []
    deployments: list[dict[str, Any]] = []
    endpoints: list[dict[str, Any]] = []
    traffic: list[dict[str, Any]] = []
    for i, name in enumerate(names):
        svc = {
            "id": stable_id("svc", seed, i),
            "name": name,
            "team": rng.choice(TEAMS),
            "latest_revision": 2,
            "created": CREATED,
        }
        major, minor = rng.randint(1, 4), rng.randint(0, 9)
        old = image_for(name, (major, minor, rng.randint(0, 4)))
        current = image_for(name, (major, minor + 1, rng.randint(0, 4)))
        replicas = rng.randint(2, 8)
        deployments.append(_deployment(seed, svc, "blue", 1, old, status="superseded"))
        blue = _deployment(
            seed, svc, "blue", 2, current, replicas=replicas, restart_count=rng.randint(0, 4)
        )
        deployments.append(blue)
        endpoints.append(_endpoint(seed, svc, blue))
        weights = {"blue": 100, "green": 0}
        if i == 0:
            good = image_for(name, (major, minor + 2, 0))
            bad = image_for(name, (major, minor + 3, 0))
            deployments.append(
                _deployment(seed, svc, "green", 3, good, replicas=replicas, status="superseded")
            )
            green = _deployment(seed, svc, "green", 4, bad, replicas=replicas)
            deployments.append(green)
            endpoints.append(_endpoint(seed, svc, green))
            svc["latest_revision"] = 4
            weights = {"blue": 50, "green": 50}
        services.append(svc)
        traffic.extend(
            {"service_id": svc["id"], "colour": c, "weight": weights[c]} for c in COLOURS
        )
    return {
        "services": services,
        "deployments": deployments,
        "endpoints": endpoints,
        "traffic": traffic,
    }


def active(fx: dict[str, Any], service_id: str, colour: str) -> dict[str, Any] | None:
    """The active deployment of one slot in a fixture."""
    return next(
        (
            d
            for d in fx["deployments"]
            if d["service_id"] == service_id and d["colour"] == colour and d["status"] == "active"
        ),
        None,
    )
