"""The seeded initial state of the cloud service: a pure function of the seed.

The state is the end of a history that follows the service's own rules, and the history
is in the state too (superseded revisions, completed cutovers, the activity log), so a
read-back can tell what an episode did from what was there before:

- every service started with blue revision 1 (registered, all the traffic), was cut
  over to green revision 2, then back to blue revision 3 (the current release; blue's
  revision 1 was taken out of the catalog). Green revision 2 stays deployed, registered
  and idle as the way back. Blue revision 3 was restarted a few times.
- service 0 then went on: a good green revision 4 was deployed and took part of the
  traffic; a bad green revision 5 replaced it and now takes half the traffic.

Everything happened before the episode's virtual clock starts (`_service.context.EPOCH`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from undobench_gym.contract.seeding import rng_for, stable_id

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
COLOURS = ("blue", "green")
#: When the history starts; it ends well before the episode clock (2026-01-01).
HISTORY_START = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)
HISTORY_END = datetime(2025, 12, 31, 12, 0, tzinfo=UTC)
#: The current release of a service is revision 3 (service 0: 5).
CURRENT_REVISION = 3


def deployment_id(seed: int, service_id: str, revision: int) -> str:
    """Deployment ids are a pure function of (seed, service, revision), like a rollout name."""
    return stable_id("dep", seed, service_id, revision)


def cutover_id(seed: int, service_id: str, change_id: str) -> str:
    """Cutover ids are a pure function of (seed, service, change id), like deployment ids."""
    return stable_id("cut", seed, service_id, change_id)


def image_for(name: str, version: tuple[int, int, int]) -> str:
    return f"{REGISTRY}/{name}:{version[0]}.{version[1]}.{version[2]}"


def address_for(name: str, revision: int) -> str:
    return f"{name}-r{revision}.svc.cluster.internal:8080"


def _stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class _History:
    """Applies history steps with the service's rules and keeps the rows they leave."""

    seed: int
    rng: Any
    t: datetime
    deployments: list[dict[str, Any]] = field(default_factory=list)
    endpoints: list[dict[str, Any]] = field(default_factory=list)
    cutovers: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    weights: dict[str, dict[str, int]] = field(default_factory=dict)

    def tick(self, hours: int = 0) -> str:
        self.t += timedelta(hours=hours, minutes=self.rng.randint(1, 50))
        return _stamp(self.t)

    def event(self, svc: dict[str, Any], action: str, dep: str | None, **detail: Any) -> None:
        at = self.tick()
        self.events.append(
            {
                "at": at,
                "service_id": svc["id"],
                "deployment_id": dep,
                "action": action,
                "detail": detail,
            }
        )

    def active(self, svc: dict[str, Any], colour: str) -> dict[str, Any] | None:
        return next(
            (
                d
                for d in self.deployments
                if d["service_id"] == svc["id"]
                and d["colour"] == colour
                and d["status"] == "active"
            ),
            None,
        )

    def deploy(self, svc: dict[str, Any], colour: str, image: str, replicas: int) -> str:
        assert self.weights[svc["id"]][colour] == 0, "a slot that takes traffic is not deployed"
        previous = self.active(svc, colour)
        if previous is not None:
            previous["status"] = "superseded"
        svc["latest_revision"] += 1
        dep = {
            "id": deployment_id(self.seed, svc["id"], svc["latest_revision"]),
            "service_id": svc["id"],
            "colour": colour,
            "revision": svc["latest_revision"],
            "image": image,
            "replicas": replicas,
            "status": "active",
            "health": "healthy",
            "restart_count": 0,
            "created": self.tick(hours=self.rng.randint(24 * 3, 24 * 20)),
        }
        self.deployments.append(dep)
        self.events.append(
            {
                "at": dep["created"],
                "service_id": svc["id"],
                "deployment_id": dep["id"],
                "action": "deployment.create",
                "detail": {
                    "colour": colour,
                    "image": image,
                    "replicas": replicas,
                    "revision": dep["revision"],
                    "replaced": previous["id"] if previous else None,
                },
            }
        )
        return str(dep["id"])

    def register(self, svc: dict[str, Any], dep_id: str) -> None:
        dep = next(d for d in self.deployments if d["id"] == dep_id)
        address = address_for(svc["name"], dep["revision"])
        self.event(svc, "endpoint.register", dep_id, address=address)
        self.endpoints.append(
            {
                "id": stable_id("ep", self.seed, dep_id),
                "service_id": svc["id"],
                "deployment_id": dep_id,
                "colour": dep["colour"],
                "address": address,
                "registered": self.events[-1]["at"],
            }
        )

    def deregister(self, svc: dict[str, Any], dep_id: str) -> None:
        ep = next(e for e in self.endpoints if e["deployment_id"] == dep_id)
        self.endpoints.remove(ep)
        self.event(svc, "endpoint.deregister", dep_id, address=ep["address"])

    def traffic(self, svc: dict[str, Any], blue: int, green: int) -> None:
        self.weights[svc["id"]] = {"blue": blue, "green": green}
        self.event(svc, "traffic.set", None, blue=blue, green=green)

    def restart(self, svc: dict[str, Any], dep_id: str, reason: str) -> None:
        dep = next(d for d in self.deployments if d["id"] == dep_id)
        dep["restart_count"] += 1
        self.tick(hours=self.rng.randint(24 * 2, 24 * 10))
        self.event(svc, "deployment.restart", dep_id, reason=reason)

    def cutover(self, svc: dict[str, Any], change_id: str, image: str, replicas: int) -> None:
        """Deploy into the idle colour, health-check, register, switch all traffic."""
        colour = next(c for c, w in self.weights[svc["id"]].items() if w == 0)
        dep_id = self.deploy(svc, colour, image, replicas)
        cut_id = cutover_id(self.seed, svc["id"], change_id)
        self.event(svc, "cutover.start", dep_id, change_id=change_id, colour=colour)
        created = self.events[-1]["at"]
        self.event(svc, "deployment.healthy", dep_id, checks="passed")
        self.register(svc, dep_id)
        other = "blue" if colour == "green" else "green"
        self.traffic(svc, **{colour: 100, other: 0})
        self.event(svc, "cutover.complete", dep_id, change_id=change_id)
        self.cutovers.append(
            {
                "id": cut_id,
                "service_id": svc["id"],
                "change_id": change_id,
                "colour": colour,
                "image": image,
                "replicas": replicas,
                "deployment_id": dep_id,
                "status": "completed",
                "step": "switched",
                "created": created,
                "completed": self.events[-1]["at"],
            }
        )


def build_fixture(seed: int) -> dict[str, list[dict[str, Any]]]:
    rng = rng_for("cloud-fixture", seed)
    hist = _History(seed=seed, rng=rng_for("cloud-history", seed), t=HISTORY_START)
    names = rng.sample(SERVICE_NAMES, N_SERVICES)
    services: list[dict[str, Any]] = []
    #: History change ids have four digits; tasks draw five-digit ones.
    change_ids = iter(hist.rng.sample(range(1000, 10000), 2 * N_SERVICES))
    for i, name in enumerate(names):
        # Each service has a clock of its own; the activity log interleaves them.
        hist.t = HISTORY_START + timedelta(days=hist.rng.randint(0, 60))
        svc: dict[str, Any] = {
            "id": stable_id("svc", seed, i),
            "name": name,
            "team": rng.choice(TEAMS),
            "latest_revision": 0,
            "created": hist.tick(hours=hist.rng.randint(1, 24 * 3)),
        }
        services.append(svc)
        hist.weights[svc["id"]] = {"blue": 0, "green": 0}
        major, minor = rng.randint(1, 4), rng.randint(0, 9)
        patch_old, patch_now = rng.randint(0, 4), rng.randint(0, 4)
        replicas = rng.randint(2, 8)
        restarts = rng.randint(0, 4)
        # Bootstrap: the first release takes all the traffic.
        first = hist.deploy(svc, "blue", image_for(name, (major, minor, patch_old)), replicas)
        hist.register(svc, first)
        hist.traffic(svc, 100, 0)
        # Two cutovers: to green, then back to blue with the current release.
        mid = image_for(name, (major, minor, patch_old + 1))
        hist.cutover(svc, f"CHG-{next(change_ids)}", mid, replicas)
        now = image_for(name, (major, minor + 1, patch_now))
        hist.cutover(svc, f"CHG-{next(change_ids)}", now, replicas)
        hist.deregister(svc, first)
        blue = hist.active(svc, "blue")
        assert blue is not None
        for n in range(restarts):
            hist.restart(svc, blue["id"], f"routine restart {n + 1} of {name}")
        if i == 0:
            # A good green canary, promoted to half the traffic, then replaced by a bad one.
            good = image_for(name, (major, minor + 2, 0))
            bad = image_for(name, (major, minor + 3, 0))
            old_green = hist.active(svc, "green")
            assert old_green is not None
            canary = hist.deploy(svc, "green", good, replicas)
            hist.register(svc, canary)
            hist.deregister(svc, old_green["id"])
            hist.traffic(svc, 90, 10)
            hist.traffic(svc, 50, 50)
            hist.traffic(svc, 100, 0)
            release = hist.deploy(svc, "green", bad, replicas)
            hist.register(svc, release)
            hist.deregister(svc, canary)
            hist.traffic(svc, 50, 50)
        assert hist.t < HISTORY_END, "the history must end before the episode clock starts"
    events = sorted(hist.events, key=lambda e: str(e["at"]))
    for seq, ev in enumerate(events, start=1):
        ev["seq"] = seq
    traffic = [
        {"service_id": svc["id"], "colour": c, "weight": hist.weights[svc["id"]][c]}
        for svc in services
        for c in COLOURS
    ]
    order = {svc["id"]: i for i, svc in enumerate(services)}
    deployments = sorted(hist.deployments, key=lambda d: (order[d["service_id"]], d["revision"]))
    return {
        "services": services,
        "deployments": deployments,
        "endpoints": hist.endpoints,
        "traffic": traffic,
        "cutovers": hist.cutovers,
        "events": events,
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


def history(fx: dict[str, Any], service_id: str, **where: Any) -> list[dict[str, Any]]:
    """The fixture's activity-log rows of one service matching `where` (task baselines)."""
    return [
        e
        for e in fx["events"]
        if e["service_id"] == service_id and all(e.get(k) == v for k, v in where.items())
    ]
