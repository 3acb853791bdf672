"""Shared pieces of the cloud workflows: predicates on values and parameter draws."""

from __future__ import annotations

from typing import Any

from undobench_gym.contract.specs import Boundary, EffectExpectation, StatePredicate
from undobench_gym.services.domains.cloud.fixture import active, deployment_id, history, image_for

#: The short names the workflow modules write their specs with.
B = Boundary
E = EffectExpectation
P = StatePredicate
SVC = {"id": "{service_id}"}
GREEN = {"service_id": "{service_id}", "colour": "green", "status": "active"}


def weight(colour: str, value: Any) -> P:
    where = {"service_id": "{service_id}", "colour": colour}
    return P.field_is(
        f"{colour} takes {value}% of the traffic", "cl_traffic", where, "weight", value
    )


def revision(value: str) -> P:
    return P.field_is(
        "no extra revision was deployed", "cl_services", SVC, "latest_revision", value
    )


def next_image(image: str, name: str, bump: int, patch: int) -> str:
    major, minor, _ = (int(x) for x in image.rsplit(":", 1)[1].split("."))
    return image_for(name, (major, minor + bump, patch))


def pick_service(fx: dict[str, Any], rng: Any) -> dict[str, Any]:
    """One of the services that are not mid-release (service 0 is)."""
    svc: dict[str, Any] = rng.choice(fx["services"][1:])
    return svc


def base_params(seed: int, fx: dict[str, Any], svc: dict[str, Any]) -> dict[str, Any]:
    """What every release task needs; counts of history rows are the fixture's baselines,
    so an oracle counts what the episode added and never mistakes history for it."""
    blue = active(fx, svc["id"], "blue")
    assert blue is not None
    return {
        "service_id": svc["id"],
        "service_name": svc["name"],
        "team": svc["team"],
        "blue_id": blue["id"],
        "blue_image": blue["image"],
        "revision_after": svc["latest_revision"] + 1,
        "green_id": deployment_id(seed, svc["id"], svc["latest_revision"] + 1),
        "cutovers_after": sum(c["service_id"] == svc["id"] for c in fx["cutovers"]) + 1,
    }


def deploys_after(fx: dict[str, Any], service_id: str, image: str) -> int:
    """Deployments of `image` once the task has deployed it once more."""
    return 1 + sum(
        bool(d["service_id"] == service_id and d["image"] == image) for d in fx["deployments"]
    )


def events_after(fx: dict[str, Any], service_id: str, action: str, deployment_id: str) -> int:
    """Activity-log rows of this action on this deployment once the task added one."""
    return 1 + len(history(fx, service_id, action=action, deployment_id=deployment_id))
