"""The seeded initial state of the ticketing service: a pure function of the seed.

Two teams each own an escalation policy of three levels (one primary, three secondaries,
one manager). Incident 0 waits at level 1 for an escalation; incident 1 was assigned and
paged to someone of the other team by mistake; incident 2 is acknowledged and fixed, ready
to resolve; incident 3 was resolved long ago.
"""

from __future__ import annotations

from typing import Any

from undobench_gym.seeding import rng_for, stable_id

FIRST = ["Amara", "Bjorn", "Chen", "Dalia", "Emeka", "Farah", "Goran", "Hana", "Ivo", "Jun"]
LAST = ["Okafor", "Lindqvist", "Wei", "Haddad", "Novak", "Sato", "Moreau", "Kowalski", "Reyes"]
TEAMS = ["payments-sre", "search-sre", "platform-sre", "storefront-sre"]
SERVICES = {
    "payments-sre": ["payments-api", "ledger"],
    "search-sre": ["search", "indexer"],
    "platform-sre": ["kubernetes", "dns"],
    "storefront-sre": ["checkout", "cart"],
}
SYMPTOMS = [
    "p99 latency above 2s",
    "error rate above 5%",
    "health checks failing in eu-west-1",
    "queue backlog above 10k messages",
    "5xx spike after deploy",
]
SEVERITIES = ("sev1", "sev2", "sev3", "sev4")
LEVEL_SIZES = (1, 3, 1)
PER_TEAM = sum(LEVEL_SIZES)
AUDIENCES = ("stakeholders", "status-page", "support")
CREATED = "2025-12-31T12:00:00Z"


def incident_id(seed: int, external_ref: str) -> str:
    """Incident ids derive from the alert reference, one incident per alert."""
    return stable_id("inc", seed, external_ref)


def build_fixture(seed: int) -> dict[str, list[dict[str, Any]]]:
    rng = rng_for("ticketing-fixture", seed)
    teams = rng.sample(TEAMS, 2)
    people = rng.sample([(f, s) for f in FIRST for s in LAST], PER_TEAM * len(teams))
    responders: list[dict[str, Any]] = []
    policies: list[dict[str, Any]] = []
    levels: list[dict[str, Any]] = []
    for t, team in enumerate(teams):
        members = []
        for first, last in people[t * PER_TEAM : (t + 1) * PER_TEAM]:
            rid = stable_id("rsp", seed, len(responders))
            email = f"{first.lower()}.{last.lower()}@example.com"
            responders.append({"id": rid, "name": f"{first} {last}", "email": email, "team": team})
            members.append(rid)
        pid = stable_id("pol", seed, t)
        policies.append({"id": pid, "name": f"{team} on-call", "team": team})
        start = 0
        for n, size in enumerate(LEVEL_SIZES, start=1):
            levels.append(
                {
                    "id": stable_id("lvl", seed, pid, n),
                    "policy_id": pid,
                    "level": n,
                    "responder_ids": members[start : start + size],
                }
            )
            start += size
    refs = [f"ALRT-{n}" for n in rng.sample(range(10000, 99999), 4)]
    shape = [  # (policy, severity, status, assignee policy)
        (0, "sev3", "open", 0),
        (1, "sev2", "open", 0),
        (1, "sev2", "acknowledged", 1),
        (0, "sev3", "resolved", 0),
    ]
    incidents: list[dict[str, Any]] = []
    pages: list[dict[str, Any]] = []
    for i, (p, severity, status, assignee_policy) in enumerate(shape):
        policy = policies[p]
        service = rng.choice(SERVICES[policy["team"]])
        primary = _level(levels, policies[assignee_policy]["id"], 1)[0]
        inc = {
            "id": incident_id(seed, refs[i]),
            "external_ref": refs[i],
            "title": f"{service}: {rng.choice(SYMPTOMS)}",
            "service": service,
            "severity": severity,
            "status": status,
            "policy_id": policy["id"],
            "escalation_level": 1,
            "assignee_id": primary,
            "resolution": "Transient; recovered on its own" if status == "resolved" else None,
            "created": CREATED,
            "resolved": CREATED if status == "resolved" else None,
        }
        incidents.append(inc)
        pages.append(
            {
                "id": stable_id("page", seed, i),
                "incident_id": inc["id"],
                "responder_id": primary,
                "message": f"[{severity}] {inc['title']} ({refs[i]})",
                "escalation_id": None,
                "retracted": False,
                "created": CREATED,
            }
        )
    return {
        "responders": responders,
        "policies": policies,
        "policy_levels": levels,
        "incidents": incidents,
        "pages": pages,
    }


def _level(levels: list[dict[str, Any]], policy_id: str, level: int) -> list[str]:
    found: list[str] = next(
        lv["responder_ids"]
        for lv in levels
        if lv["policy_id"] == policy_id and lv["level"] == level
    )
    return found


def level_responders(fx: dict[str, Any], policy_id: str, level: int) -> list[str]:
    return _level(fx["policy_levels"], policy_id, level)


def responder(fx: dict[str, Any], responder_id: str) -> dict[str, Any]:
    found: dict[str, Any] = next(r for r in fx["responders"] if r["id"] == responder_id)
    return found
