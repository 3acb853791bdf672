"""The seeded initial state of the messaging service: a pure function of the seed.

The service inserts it on reset, and the env draws task parameters from the same rows.
"""

from __future__ import annotations

from typing import Any

from undobench_gym.seeding import rng_for, stable_id

CHANNELS = {
    "ops": "Operations chatter and on-call handovers",
    "incidents": "One thread per live incident",
    "support": "Customer support escalations",
    "releases": "Deploy announcements",
}
SERVICES = ["checkout-api", "payments-gateway", "search", "auth", "notifications", "billing"]
PEOPLE = ["Maya Okafor", "Omar Lindqvist", "Ines Moreau", "Kenji Tanaka", "Priya Haddad"]
PEOPLE += ["Lars Novak", "Chloe Reyes", "Tomas Fischer"]
ENDPOINTS = {
    "statuspage": ("Public status page", "Posts incident updates to status.example.com"),
    "incident-bot": ("Incident timeline bot", "Keeps the incident timeline document"),
    "crm-sync": ("Customer comms sync", "Flags affected accounts in the CRM"),
    "audit-archive": ("Audit archive", "Stores every pager event for compliance"),
}
#: Pre-existing subscriptions: (endpoint, event).
SUBSCRIPTIONS = [("incident-bot", "page.triggered"), ("audit-archive", "page.acknowledged")]
PROBLEMS = [
    "error rate above 5%",
    "p99 latency above 2 s",
    "queue backlog growing",
    "certificate expires in 3 days",
    "disk 90% full",
]
N_SERVICES = 4
CREATED = "2025-12-31T12:00:00Z"


def build_fixture(seed: int) -> dict[str, list[dict[str, Any]]]:
    rng = rng_for("messaging-fixture", seed)
    channels = [
        {"id": stable_id("ch", seed, "ch", name), "name": name, "topic": topic}
        for name, topic in CHANNELS.items()
    ]
    people = rng.sample(PEOPLE, N_SERVICES)
    services = []
    for i, name in enumerate(rng.sample(SERVICES, N_SERVICES)):
        services.append(
            {
                "id": stable_id("svc", seed, "svc", name),
                "name": name,
                "oncall_name": people[i],
                "oncall_phone": f"+1555{rng.randint(1000000, 9999999)}",
            }
        )
    pages = []
    # Two open pages on the first service (one to resolve, one that is still live) and
    # one acknowledged page elsewhere.
    for n, (svc, status) in enumerate(
        [(services[0], "triggered"), (services[0], "acknowledged"), (services[2], "acknowledged")]
    ):
        problem = PROBLEMS[(n + rng.randint(0, 4)) % len(PROBLEMS)]
        pages.append(
            {
                "id": stable_id("pg", seed, "pg", n),
                "service_id": svc["id"],
                "summary": f"{svc['name']}: {problem}",
                "severity": rng.choice(["critical", "high"]),
                "dedup_key": f"{svc['name']}-{rng.randint(10000, 99999)}",
                "status": status,
                "resolution_note": None,
                "created": CREATED,
                "updated": CREATED,
            }
        )
    ops = channels[0]["id"]
    chat = [
        {
            "id": stable_id("msg", seed, "msg", 0),
            "channel_id": ops,
            "text": f"Handover: {people[0]} is on call for {services[0]['name']} this week.",
            "posted": CREATED,
        }
    ]
    endpoints = [
        {"id": ident, "name": name, "description": desc}
        for ident, (name, desc) in ENDPOINTS.items()
    ]
    subscriptions = [
        {
            "id": stable_id("whs", seed, "whs", ep, event),
            "endpoint_id": ep,
            "event": event,
            "created": CREATED,
        }
        for ep, event in SUBSCRIPTIONS
    ]
    return {
        "channels": channels,
        "chat_messages": chat,
        "services": services,
        "pages": pages,
        "webhook_endpoints": endpoints,
        "webhook_subscriptions": subscriptions,
    }
