"""Cloud fixture history: the activity log, the revisions, the catalog, the traffic and the
cutovers agree with the current state for many seeds, and the tasks' parameters and
oracles are not satisfied by history (a read-back can tell new rows from old ones)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from undobench_gym.services.domains.cloud.fixture import (
    active,
    address_for,
    build_fixture,
    cutover_id,
)
from undobench_gym.services.domains.cloud.fixture import deployment_id as dep_id
from undobench_gym.services.domains.cloud.service import DOMAIN
from undobench_gym.services.domains.cloud.workflows import WORKFLOWS

from .service_harness import GOLD_SEEDS, ServiceClient, params_for, workflow
from .workflow_harness import (
    CLOCK,
    assert_new_rows_follow_history,
    tables_around_gold_plan,
    where,
)

pytestmark = pytest.mark.service(DOMAIN)

SEEDS = (0, 1, 2, 3, 7, 11, 42, 99, 2024, 12345)


def _events(fx: dict[str, Any], **match: Any) -> list[dict[str, Any]]:
    return where(fx["events"], **match)


@pytest.mark.parametrize("seed", SEEDS)
def test_revisions_agree_with_the_activity_log(seed: int) -> None:
    fx = build_fixture(seed)
    for svc in fx["services"]:
        deps = [d for d in fx["deployments"] if d["service_id"] == svc["id"]]
        revisions = [d["revision"] for d in deps]
        assert sorted(revisions) == list(range(1, svc["latest_revision"] + 1))
        assert [d["created"] for d in sorted(deps, key=lambda d: d["revision"])] == sorted(
            d["created"] for d in deps
        )
        for colour in ("blue", "green"):
            slot = sorted((d for d in deps if d["colour"] == colour), key=lambda d: d["revision"])
            # The newest revision of a slot is its active one; the older ones were replaced.
            assert [d["status"] for d in slot] == ["superseded"] * (len(slot) - 1) + ["active"]
            for before, after in zip([None, *slot], slot, strict=False):
                (create,) = _events(fx, action="deployment.create", deployment_id=after["id"])
                assert create["at"] == after["created"]
                assert create["detail"] == {
                    "colour": colour,
                    "image": after["image"],
                    "replicas": after["replicas"],
                    "revision": after["revision"],
                    "replaced": before["id"] if before else None,
                }
        for d in deps:
            assert d["id"] == dep_id(seed, svc["id"], d["revision"])
            restarts = _events(fx, action="deployment.restart", deployment_id=d["id"])
            assert len(restarts) == d["restart_count"]
            assert all(e["at"] > d["created"] for e in restarts)


@pytest.mark.parametrize("seed", SEEDS)
def test_catalog_and_traffic_agree_with_the_activity_log(seed: int) -> None:
    fx = build_fixture(seed)
    deps = {d["id"]: d for d in fx["deployments"]}
    names = {s["id"]: s["name"] for s in fx["services"]}
    for d in deps.values():
        registered = _events(fx, action="endpoint.register", deployment_id=d["id"])
        removed = _events(fx, action="endpoint.deregister", deployment_id=d["id"])
        rows = [e for e in fx["endpoints"] if e["deployment_id"] == d["id"]]
        assert len(registered) - len(removed) == len(rows) <= 1
        # Replaced revisions were taken out of the catalog.
        assert len(rows) == (d["status"] == "active")
        for ep in rows:
            assert ep["service_id"] == d["service_id"] and ep["colour"] == d["colour"]
            assert ep["address"] == address_for(names[d["service_id"]], d["revision"])
            assert ep["registered"] == registered[-1]["at"]
    for svc in fx["services"]:
        weights = {t["colour"]: t["weight"] for t in fx["traffic"] if t["service_id"] == svc["id"]}
        assert sum(weights.values()) == 100
        last = _events(fx, action="traffic.set", service_id=svc["id"])[-1]
        assert last["detail"] == weights
        for colour, weight in weights.items():
            dep = active(fx, svc["id"], colour)
            if weight:
                assert dep is not None and dep["health"] == "healthy"
                assert any(e["deployment_id"] == dep["id"] for e in fx["endpoints"])


@pytest.mark.parametrize("seed", SEEDS)
def test_cutovers_and_clock_agree(seed: int) -> None:
    fx = build_fixture(seed)
    deps = {d["id"]: d for d in fx["deployments"]}
    changes = Counter(c["change_id"] for c in fx["cutovers"])
    assert set(changes.values()) == {1}
    for c in fx["cutovers"]:
        assert c["id"] == cutover_id(seed, c["service_id"], c["change_id"])
        assert (c["status"], c["step"]) == ("completed", "switched")
        dep = deps[c["deployment_id"]]
        assert (dep["service_id"], dep["colour"], dep["image"], dep["replicas"]) == (
            c["service_id"],
            c["colour"],
            c["image"],
            c["replicas"],
        )
        for action in ("cutover.start", "cutover.complete"):
            named = [
                e
                for e in _events(fx, action=action)
                if e["detail"].get("change_id") == c["change_id"]
            ]
            assert len(named) == 1, (action, c["change_id"])
        started = _events(fx, action="cutover.start", deployment_id=dep["id"])
        completed = _events(fx, action="cutover.complete", deployment_id=dep["id"])
        assert len(started) == len(completed) == 1
        assert started[0]["at"] == c["created"] < completed[0]["at"] == c["completed"]
    seqs = [e["seq"] for e in fx["events"]]
    assert seqs == list(range(1, len(seqs) + 1))
    stamps = [e["at"] for e in fx["events"]]
    assert stamps == sorted(stamps) and stamps[-1] < CLOCK
    created = {s["id"]: s["created"] for s in fx["services"]}
    assert all(e["at"] > created[e["service_id"]] for e in fx["events"])


@pytest.mark.parametrize("seed", SEEDS)
def test_task_parameters_are_not_history(seed: int) -> None:
    """What a task asks for is not in the fixture already, and its baselines count the
    history that is."""
    fx = build_fixture(seed)
    ids = {d["id"] for d in fx["deployments"]}
    canary = params_for(workflow("cloud", "cloud-canary-release"), seed)
    cutover = params_for(workflow("cloud", "cloud-blue-green-cutover"), seed)
    for p in (canary, cutover):
        assert p["green_id"] not in ids and p["deploys_after"] == 1
        images = {d["image"] for d in fx["deployments"] if d["service_id"] == p["service_id"]}
        assert p["image"] not in images
    assert cutover["change_id"] not in {c["change_id"] for c in fx["cutovers"]}
    assert cutover["cutover_id"] not in {c["id"] for c in fx["cutovers"]}
    assert cutover["cutovers_after"] == 3
    rotate = params_for(workflow("cloud", "cloud-rotate-secrets"), seed)
    assert rotate["restart_events_after"] == rotate["restarts_after"]
    back = params_for(workflow("cloud", "cloud-rollback-bad-release"), seed)
    greens = sorted(
        (d for d in fx["deployments"] if d["service_id"] == back["service_id"]),
        key=lambda d: d["revision"],
    )
    greens = [d for d in greens if d["colour"] == "green"]
    # The way back is the green revision the bad one replaced, not an older one.
    assert len(greens) >= 3 and greens[-1]["id"] == back["bad_id"]
    assert back["good_image"] == greens[-2]["image"] != greens[-3]["image"]


@pytest.mark.parametrize("wf", WORKFLOWS, ids=lambda w: w.id)
@pytest.mark.parametrize("seed", GOLD_SEEDS)
def test_new_rows_are_newer_than_history(svc: ServiceClient, wf: Any, seed: int) -> None:
    """Every row a gold plan adds is stamped on the episode clock, every fixture row
    before it: a read-back tells what the episode did from what was there. (That the
    oracles hold after the plan but not before, `WorkflowContract` checks.)"""
    before, after = tables_around_gold_plan(svc, wf, seed)
    stamps = {
        "cl_deployments": ("id", "created"),
        "cl_endpoints": ("id", "registered"),
        "cl_cutovers": ("id", "created"),
        "cl_events": ("seq", "at"),
    }
    assert sum(assert_new_rows_follow_history(before, after, stamps).values()) > 0
