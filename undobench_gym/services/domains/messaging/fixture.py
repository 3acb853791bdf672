"""The seeded initial state of the messaging service: a pure function of the seed.

The service inserts it on reset, and the env draws task parameters from the same rows.

The state carries the history that led to it, all before the virtual clock's epoch
(2026-01-01T00:00:00Z, where every episode starts): every page fired `page.triggered` (and,
once acknowledged, `page.acknowledged`) to the endpoints subscribed to it, with the
sender's delivery record and the receiver's log of it; #incidents got a post per page;
the on-call of the older incidents was texted, and #ops was told so; an earlier
maintenance batch was emailed to some customer admins. A read-back therefore sees old
texts, posts, emails and deliveries next to the ones an episode adds.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from undobench_gym.contract.seeding import rng_for, stable_id

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
#: Customer admins that maintenance notices go to.
ADMIN_NAMES = ["ana", "ben", "chen", "dara", "eli", "fatima", "goran", "hana", "ivan", "jun"]
ADMIN_DOMAINS = ["northwind", "contoso", "fabrikam", "tailspin", "litware", "adatum", "lamna"]
ADMINS = [f"{n}@{d}.example.com" for n in ADMIN_NAMES for d in ADMIN_DOMAINS]
N_SERVICES = 4
#: (service index, status, minutes after HISTORY_START): pages 0 and 1 are the first
#: service's live pages (one to resolve, one still live), 2 and 3 older ones elsewhere.
PAGE_SHAPES = [(0, "triggered", 1300), (0, "acknowledged", 1200), (2, "acknowledged", 700)]
PAGE_SHAPES += [(1, "resolved", 200)]
#: Pages whose on-call was texted and #ops told so (the older incidents).
TEXTED = (2, 3)
HISTORY_START = datetime(2025, 12, 31, 0, 0, tzinfo=UTC)
EPOCH_TEXT = "2026-01-01T00:00:00Z"
ACK_AFTER_MIN, RESOLVE_AFTER_MIN = 6, 45
RECEIVER_STATUS = 202


def at(minutes: int) -> str:
    """A history timestamp, `minutes` after HISTORY_START (always before the epoch)."""
    return (HISTORY_START + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


def sms_text(service: str, problem: str) -> str:
    return f"{service}: {problem}. Please join #incidents now."


def texted_post(oncall: str, service: str, problem: str) -> str:
    return f"Texted {oncall} about {service}: {problem}."


def page_post(severity: str, service: str, dedup_key: str, problem: str) -> str:
    return f"{severity.upper()} page on {service} ({dedup_key}): {problem}. Updates here."


class _History:
    """Rows of the workspace's past, with ids that are a pure function of the seed."""

    def __init__(self, seed: int, channels: list[dict[str, Any]]) -> None:
        self.seed = seed
        self.channel = {c["name"]: c["id"] for c in channels}
        self.subscriptions = [
            {
                "id": stable_id("whs", seed, "whs", ep, event),
                "endpoint_id": ep,
                "event": event,
                "created": at(0),
            }
            for ep, event in SUBSCRIPTIONS
        ]
        self.rows: dict[str, list[dict[str, Any]]] = {
            k: []
            for k in (
                "chat_messages",
                "sms",
                "email_batches",
                "emails",
                "webhook_deliveries",
                "received",
            )
        }

    def _id(self, prefix: str, table: str) -> str:
        return stable_id(prefix, self.seed, prefix, len(self.rows[table]))

    def post(self, channel: str, text: str, when: str) -> None:
        self.rows["chat_messages"].append(
            {
                "id": self._id("msg", "chat_messages"),
                "channel_id": self.channel[channel],
                "text": text,
                "posted": when,
            }
        )

    def text(self, to: str, body: str, when: str) -> None:
        self.rows["sms"].append(
            {"id": self._id("sms", "sms"), "to": to, "body": body, "sent": when}
        )

    def fire(self, event: str, page: dict[str, Any], when: str) -> None:
        """Deliver `event` to its subscribers as `webhooks.fire` does: the sender's
        delivery row and the receiver's log row, both with the page as it was then."""
        for sub in self.subscriptions:
            if sub["event"] != event:
                continue
            delivery_id = self._id("whd", "webhook_deliveries")
            ref = page["dedup_key"]
            self.rows["webhook_deliveries"].append(
                {
                    "id": delivery_id,
                    "subscription_id": sub["id"],
                    "endpoint_id": sub["endpoint_id"],
                    "event": event,
                    "ref": ref,
                    "status": "delivered",
                    "response_status": RECEIVER_STATUS,
                    "attempted": when,
                }
            )
            body = {"id": delivery_id, "event": event, "ref": ref, "data": dict(page)}
            self.rows["received"].append(
                {
                    "seq": len(self.rows["received"]) + 1,
                    "endpoint_id": sub["endpoint_id"],
                    "event": event,
                    "ref": ref,
                    "delivery_id": delivery_id,
                    "body": body,
                    "received": when,
                }
            )

    def email_batch(self, reference: str, subject: str, recipients: list[str], t: int) -> None:
        batch_id = stable_id("eb", self.seed, "eb", reference)
        self.rows["email_batches"].append(
            {
                "id": batch_id,
                "reference": reference,
                "subject": subject,
                "recipients": list(recipients),
                "status": "sent",
                "created": at(t),
            }
        )
        for n, recipient in enumerate(recipients):
            self.rows["emails"].append(
                {
                    "id": self._id("em", "emails"),
                    "batch_id": batch_id,
                    "reference": reference,
                    "recipient": recipient,
                    "subject": subject,
                    "sent": at(t + n + 1),
                }
            )


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
    history = _History(seed, channels)
    history.post("ops", f"Handover: {people[0]} is on call for {services[0]['name']}.", at(30))
    day = rng.randint(10, 28)
    history.email_batch(
        f"MAINT-2025-12-{day}-{rng.randint(100, 999)}",
        f"Scheduled maintenance on 2025-12-{day} at 02:00 UTC",
        rng.sample(ADMINS, 3),
        60,
    )
    svc = rng.choice(services)
    history.post("releases", f"Deployed {svc['name']} {rng.randint(40, 90)}.0.1", at(90))
    pages = []
    for n, (s, status, t) in enumerate(PAGE_SHAPES):
        svc = services[s]
        problem = PROBLEMS[(n + rng.randint(0, 4)) % len(PROBLEMS)]
        severity = rng.choice(["critical", "high"])
        dedup_key = f"{svc['name']}-{rng.randint(10000, 99999)}"
        page: dict[str, Any] = {
            "id": stable_id("pg", seed, "pg", n),
            "service_id": svc["id"],
            "summary": f"{svc['name']}: {problem}",
            "severity": severity,
            "dedup_key": dedup_key,
            "status": "triggered",
            "resolution_note": None,
            "created": at(t),
            "updated": at(t),
        }
        history.fire("page.triggered", page, at(t))
        history.post(
            "incidents",
            page_post(severity, svc["name"], dedup_key, problem),
            at(t + 1),
        )
        if n in TEXTED:
            history.text(svc["oncall_phone"], sms_text(svc["name"], problem), at(t + 2))
            history.post("ops", texted_post(svc["oncall_name"], svc["name"], problem), at(t + 3))
        if status in ("acknowledged", "resolved"):
            acked = at(t + ACK_AFTER_MIN)
            page["status"], page["updated"] = "acknowledged", acked
            history.fire("page.acknowledged", page, acked)
        if status == "resolved":
            resolved = at(t + RESOLVE_AFTER_MIN)
            page["status"], page["updated"] = "resolved", resolved
            page["resolution_note"] = "Recovered after a restart"
            history.fire("page.resolved", page, resolved)
            history.post("incidents", f"Resolved: {svc['name']}: {problem} ({dedup_key})", resolved)
        pages.append(page)
    endpoints = [
        {"id": ident, "name": name, "description": desc}
        for ident, (name, desc) in ENDPOINTS.items()
    ]
    return {
        "channels": channels,
        "services": services,
        "pages": pages,
        "webhook_endpoints": endpoints,
        "webhook_subscriptions": history.subscriptions,
        **history.rows,
    }


def fixture_count(fx: dict[str, Any], key: str, **where: Any) -> int:
    """How many rows of fixture table `key` match `where`: what the history already holds,
    so that an oracle counts what an episode added on top of it."""
    return sum(1 for r in fx[key] if all(r.get(k) == v for k, v in where.items()))
