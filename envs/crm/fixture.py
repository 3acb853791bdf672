"""The seeded initial state of the CRM service: a pure function of the seed.

The service inserts it on reset, and the env draws task parameters from the same rows.
"""

from __future__ import annotations

from typing import Any

from undobench_gym.seeding import rng_for, stable_id

COMPANIES = [
    "Northwind",
    "Contoso",
    "Fabrikam",
    "Tailspin",
    "Litware",
    "Proseware",
    "Adatum",
    "Woodgrove",
    "Lamna",
    "Fourth Coffee",
    "Alpine Ski",
    "Margie Travel",
]
SUFFIXES = ["Ltd", "GmbH", "Inc", "LLC", "AG", "BV"]
FIRST = ["Maya", "Omar", "Ines", "Kenji", "Priya", "Lars", "Chloe", "Tomas", "Amara", "Felix"]
LAST = ["Okafor", "Lindqvist", "Moreau", "Tanaka", "Haddad", "Novak", "Reyes", "Fischer"]
TIERS = ("standard", "growth", "premium", "enterprise")
STAGES = ("prospecting", "qualification", "proposal", "negotiation", "closed_won", "closed_lost")
OPEN_STAGES = STAGES[:4]
SLA_LEVELS = {"business": 120_000, "premium": 360_000, "24x7": 900_000}
SEQUENCES = {
    "customer-onboarding": (
        "Welcome aboard: getting started with your workspace",
        ["Welcome aboard", "Your first week", "Meet your success manager"],
    ),
    "prospecting-outreach": (
        "Cold outreach to new prospects (not for existing customers)",
        ["Quick question", "Following up", "Last note from us"],
    ),
    "renewal-reminder": (
        "Reminders for customers whose SLA term ends soon",
        ["Your SLA renewal is coming up", "Renewal options", "Renewal deadline"],
    ),
    "webinar-invite": (
        "Invitation to the quarterly product webinar",
        ["You're invited: quarterly product webinar", "Webinar tomorrow"],
    ),
}
N_ACCOUNTS = 6
N_LEADS = 5
CREATED = "2025-12-31T12:00:00Z"


def _email(first: str, last: str, company: str) -> str:
    domain = company.lower().replace(" ", "")
    return f"{first.lower()}.{last.lower()}@{domain}.example.com"


def build_fixture(seed: int) -> dict[str, list[dict[str, Any]]]:
    rng = rng_for("crm-fixture", seed)
    companies = rng.sample([(c, s) for c in COMPANIES for s in SUFFIXES], N_ACCOUNTS + N_LEADS)
    people = rng.sample([(f, last) for f in FIRST for last in LAST], N_ACCOUNTS * 2 + N_LEADS)
    accounts: list[dict[str, Any]] = []
    contacts: list[dict[str, Any]] = []
    opportunities: list[dict[str, Any]] = []
    contracts: list[dict[str, Any]] = []
    for i, (company, suffix) in enumerate(companies[:N_ACCOUNTS]):
        aid = stable_id("acc", seed, "acc", i)
        # Most accounts sit in the lower tiers, so there is an upgrade to make.
        tier = rng.choices(TIERS, weights=[4, 3, 2, 1])[0] if i == 0 else rng.choice(TIERS[:2])
        accounts.append(
            {
                "id": aid,
                "name": f"{company} {suffix}",
                "tier": tier,
                "source_lead_id": None,
                "created": CREATED,
            }
        )
        for c in range(2 if i < 3 else 1):
            first, last = people[2 * i + c]
            contacts.append(
                {
                    "id": stable_id("con", seed, "con", i, c),
                    "account_id": aid,
                    "name": f"{first} {last}",
                    "email": _email(first, last, company),
                    "created": CREATED,
                }
            )
        opportunities.append(
            {
                "id": stable_id("opp", seed, "opp", i),
                "account_id": aid,
                "name": f"{company} {rng.choice(['platform', 'analytics', 'support'])} deal",
                "stage": rng.choice(OPEN_STAGES),
                "amount": rng.randint(50, 900) * 10_000,
                "source_lead_id": None,
                "created": CREATED,
                "updated": CREATED,
            }
        )
        if i < 4:
            level = rng.choice(sorted(SLA_LEVELS))
            contracts.append(
                {
                    "id": stable_id("sla", seed, "sla", i),
                    "account_id": aid,
                    "level": level,
                    "annual_fee": SLA_LEVELS[level],
                    "term_end_year": rng.randint(2026, 2027),
                    "created": CREATED,
                }
            )
    leads: list[dict[str, Any]] = []
    for n, (company, suffix) in enumerate(companies[N_ACCOUNTS:]):
        first, last = people[N_ACCOUNTS * 2 + n]
        leads.append(
            {
                "id": stable_id("lead", seed, "lead", n),
                "name": f"{first} {last}",
                "email": _email(first, last, company),
                "company": f"{company} {suffix}",
                "status": "open",
                "pending": None,
                "converted_account_id": None,
                "converted_contact_id": None,
                "converted_opportunity_id": None,
                "created": CREATED,
            }
        )
    sequences = [
        {
            "id": stable_id("seq", seed, "seq", name),
            "name": name,
            "purpose": purpose,
            "steps": steps,
        }
        for name, (purpose, steps) in SEQUENCES.items()
    ]
    seq_id = {s["name"]: s["id"] for s in sequences}
    enrollments: list[dict[str, Any]] = []
    emails: list[dict[str, Any]] = []
    # The first contact of account 0 (a customer with an SLA) was put in the prospecting
    # sequence by mistake; their webinar enrollment is right. Another contact is in onboarding.
    for k, (contact, seq) in enumerate(
        [
            (contacts[0], "webinar-invite"),
            (contacts[0], "prospecting-outreach"),
            (contacts[2], "customer-onboarding"),
        ]
    ):
        eid = stable_id("enr", seed, "enr", k)
        enrollments.append(
            {
                "id": eid,
                "sequence_id": seq_id[seq],
                "contact_id": contact["id"],
                "status": "active",
                "next_step": 2,
                "created": CREATED,
                "updated": CREATED,
            }
        )
        emails.append(
            {
                "id": stable_id("eml", seed, "eml", k),
                "enrollment_id": eid,
                "sequence_id": seq_id[seq],
                "contact_id": contact["id"],
                "to_email": contact["email"],
                "step": 1,
                "subject": SEQUENCES[seq][1][0],
                "sent": CREATED,
            }
        )
    return {
        "leads": leads,
        "accounts": accounts,
        "contacts": contacts,
        "opportunities": opportunities,
        "sla_contracts": contracts,
        "sequences": sequences,
        "enrollments": enrollments,
        "emails": emails,
    }
