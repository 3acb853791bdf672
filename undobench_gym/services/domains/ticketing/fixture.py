"""The seeded initial state of the ticketing service: a pure function of the seed.

Two teams each own an escalation policy of three levels (one primary, three secondaries,
one manager). Incident 0 waits at level 1 for an escalation; incident 1 was assigned and
paged to someone of the other team by mistake; incident 2 was escalated to level 2, then
acknowledged and fixed, ready to resolve; incident 3 was resolved long ago, after a
mistaken page that was retracted.

Every incident carries the history that led to its current state, all before the virtual
clock's epoch (2026-01-01T00:00:00Z, where every episode starts): the page that engaged
level 1, the escalations with one page per responder of their level, comments, the
disregard notice of a retracted page, the resolution notice of a resolved incident. A
read-back therefore sees old pages, notices and comments next to the ones an episode adds.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from undobench_gym.contract.seeding import rng_for, stable_id

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
COMMENT_KINDS = ("note", "status", "handover", "postmortem")
#: Who writes the routing note when an alert opens an incident.
ROUTER = "alert-router"
#: History happens on the last day before the epoch; the virtual clock starts at the epoch.
HISTORY_START = datetime(2025, 12, 31, 6, 0, tzinfo=UTC)
EPOCH_TEXT = "2026-01-01T00:00:00Z"
ESCALATE_AFTER_MIN = 15


@dataclass(frozen=True)
class _Shape:
    """How one fixture incident came to be where it is."""

    policy: int
    opened_as: str  # severity when it was opened
    status: str
    assignee_policy: int  # != policy: assigned to the other team's primary by mistake
    escalations: int
    start_min: int  # minutes after HISTORY_START
    retracted_first: bool  # first paged someone of the other team, retracted since


SHAPES = (
    _Shape(0, "sev3", "open", 0, 0, 780, False),
    _Shape(1, "sev2", "open", 0, 0, 600, False),
    _Shape(1, "sev3", "acknowledged", 1, 1, 300, False),
    _Shape(0, "sev3", "resolved", 0, 0, 0, True),
)


def at(minutes: int) -> str:
    """A history timestamp, `minutes` after HISTORY_START (always before the epoch)."""
    return (HISTORY_START + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


def more_severe(severity: str) -> str:
    """One step up the severity scale (sev1 is the worst and stays sev1)."""
    return SEVERITIES[max(0, SEVERITIES.index(severity) - 1)]


def incident_id(seed: int, external_ref: str) -> str:
    """Incident ids derive from the alert reference, one incident per alert."""
    return stable_id("inc", seed, external_ref)


def page_message(severity: str, title: str, ref: str) -> str:
    return f"[{severity}] {title} ({ref})"


def escalation_message(severity: str, title: str, ref: str, level: int, reason: str) -> str:
    """What `escalate_incident` writes in the pages it sends (see `escalations`)."""
    return f"{page_message(severity, title, ref)} escalated to level {level}: {reason}"


class _History:
    """Rows of the incidents' pasts, with ids that are a pure function of the seed."""

    def __init__(
        self, seed: int, responders: list[dict[str, Any]], levels: list[dict[str, Any]]
    ) -> None:
        self.seed = seed
        self.names = {r["id"]: r["name"] for r in responders}
        self.level_of = {(lv["policy_id"], lv["level"]): lv["responder_ids"] for lv in levels}
        self.rows: dict[str, list[dict[str, Any]]] = {
            k: [] for k in ("pages", "escalations", "comments", "notices")
        }

    def _id(self, prefix: str, table: str) -> str:
        return stable_id(prefix, self.seed, "history", len(self.rows[table]))

    def page(
        self, inc: dict[str, Any], responder_id: str, message: str, when: str, **extra: Any
    ) -> dict[str, Any]:
        page = {
            "id": self._id("page", "pages"),
            "incident_id": inc["id"],
            "responder_id": responder_id,
            "message": message,
            "escalation_id": extra.get("escalation_id"),
            "retracted": extra.get("retracted", False),
            "created": when,
        }
        self.rows["pages"].append(page)
        return page

    def comment(self, inc: dict[str, Any], author: str, kind: str, body: str, when: str) -> None:
        self.rows["comments"].append(
            {
                "id": self._id("cmt", "comments"),
                "incident_id": inc["id"],
                "author": author,
                "kind": kind,
                "body": body,
                "created": when,
            }
        )

    def notice(
        self,
        inc: dict[str, Any],
        kind: str,
        recipient: str,
        message: str,
        when: str,
        page_id: str | None = None,
    ) -> None:
        self.rows["notices"].append(
            {
                "id": self._id("ntc", "notices"),
                "incident_id": inc["id"],
                "kind": kind,
                "recipient": recipient,
                "message": message,
                "page_id": page_id,
                "created": when,
            }
        )

    def escalate(self, inc: dict[str, Any], responders: list[str], start: int) -> None:
        """A completed escalation one level up: severity one step up, one page per
        responder of the level, as `escalate_incident` does."""
        level = inc["escalation_level"] + 1
        reason = f"No acknowledgement from level {level - 1} after {ESCALATE_AFTER_MIN} minutes"
        esc = {
            "id": self._id("esc", "escalations"),
            "incident_id": inc["id"],
            "level": level,
            "responder_ids": list(responders),
            "severity_from": inc["severity"],
            "severity_to": more_severe(inc["severity"]),
            "reason": reason,
            "status": "completed",
            "created": at(start),
            "completed": at(start + 1),
        }
        self.rows["escalations"].append(esc)
        inc["severity"], inc["escalation_level"] = esc["severity_to"], level
        for responder_id in responders:
            message = escalation_message(
                esc["severity_to"], inc["title"], inc["external_ref"], level, reason
            )
            self.page(inc, responder_id, message, at(start), escalation_id=esc["id"])

    def live(self, inc: dict[str, Any], shape: _Shape, other_primary: str) -> None:
        """Play one incident from its alert to its current status."""
        t = shape.start_min
        assignee = inc["assignee_id"]
        name = self.names[assignee]
        ref, title = inc["external_ref"], inc["title"]
        self.comment(inc, ROUTER, "note", f"Opened from alert {ref}; assigned to {name}.", at(t))
        message = page_message(inc["severity"], title, ref)
        if shape.retracted_first:
            wrong = self.page(inc, other_primary, message, at(t + 1), retracted=True)
            disregard = (
                f"Please disregard the page for {ref}: it reached you by mistake. "
                f"{name} is taking it."
            )
            self.notice(inc, "disregard", other_primary, disregard, at(t + 5), wrong["id"])
            self.page(inc, assignee, message, at(t + 5))
            t += 5
        else:
            self.page(inc, assignee, message, at(t + 1))
            t += 1
        for _ in range(shape.escalations):
            t += ESCALATE_AFTER_MIN
            self.escalate(inc, self.level_of[(inc["policy_id"], inc["escalation_level"] + 1)], t)
        if shape.status == "open":
            return
        t += 4
        self.comment(inc, name, "status", "Acknowledged; investigating.", at(t))
        t += 25
        self.comment(inc, name, "status", "Mitigation deployed; watching the graphs.", at(t))
        if shape.status == "resolved":
            t += 30
            inc["resolved"] = at(t)
            inc["resolution"] = "Transient; recovered on its own"
            self.notice(inc, "resolution", "stakeholders", f"Resolved: {title}.", at(t + 2))
            self.comment(inc, name, "postmortem", "No postmortem: transient, no impact.", at(t + 5))


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
    refs = [f"ALRT-{n}" for n in rng.sample(range(10000, 99999), len(SHAPES))]
    history = _History(seed, responders, levels)
    incidents: list[dict[str, Any]] = []
    for i, shape in enumerate(SHAPES):
        policy = policies[shape.policy]
        service = rng.choice(SERVICES[policy["team"]])
        primary = _level(levels, policies[shape.assignee_policy]["id"], 1)[0]
        other_primary = _level(levels, policies[1 - shape.policy]["id"], 1)[0]
        inc: dict[str, Any] = {
            "id": incident_id(seed, refs[i]),
            "external_ref": refs[i],
            "title": f"{service}: {rng.choice(SYMPTOMS)}",
            "service": service,
            "severity": shape.opened_as,
            "status": shape.status,
            "policy_id": policy["id"],
            "escalation_level": 1,  # the first page engaged level 1
            "assignee_id": primary,
            "resolution": None,
            "created": at(shape.start_min),
            "resolved": None,
        }
        history.live(inc, shape, other_primary)
        incidents.append(inc)
    return {
        "responders": responders,
        "policies": policies,
        "policy_levels": levels,
        "incidents": incidents,
        **history.rows,
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


def fixture_count(fx: dict[str, Any], key: str, **where: Any) -> int:
    """How many rows of fixture table `key` match `where`: what the history already holds,
    so that an oracle counts what an episode added on top of it."""
    return sum(1 for r in fx[key] if all(r.get(k) == v for k, v in where.items()))
