"""The seeded initial state of the CRM service: a pure function of the seed.

The service inserts it on reset, and the env draws task parameters from the same rows.
The state carries the history that led to it, consistent with it, so that a read-back
cannot mistake old rows for what an episode did:

- every SLA contract was sold by a won opportunity, invoiced for its initial term and
  renewed once or twice (a renewal and an invoice per renewal, with the years it covers),
  up to its current term end; its account's first contact got the renewal-reminder
  sequence before the latest renewal, and (but for the customer onboarded right now)
  the onboarding sequence when the contract was signed;
- one lead was converted earlier (its account, contact and opportunity exist);
- a few contacts went through the webinar invitation;
- every enrollment has sent the emails of the steps before its `next_step`; a
  `completed` one has sent them all.

Everything happened before the episode's virtual clock starts (2026-01-01).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from undobench_gym.contract.seeding import rng_for, stable_id
from undobench_gym.services.domains.crm.history import (
    THIS_YEAR,
    Outbox,
    contract_history,
    day,
    stamp,
)

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
#: Accounts 0..N_SLA-1 are customers with an SLA contract.
N_SLA = 4
#: The account whose customer is being onboarded right now (its onboarding is active).
ONBOARDING_NOW = 1
#: When the state was taken: the latest history row is older.
CREATED = "2025-12-31T12:00:00Z"


def _email(first: str, last: str, company: str) -> str:
    domain = company.lower().replace(" ", "")
    return f"{first.lower()}.{last.lower()}@{domain}.example.com"


def build_fixture(seed: int) -> dict[str, list[dict[str, Any]]]:
    rng = rng_for("crm-fixture", seed)
    # The history has a generator of its own, so the current state draws stay as they were.
    hist = rng_for("crm-history", seed)
    pool = [(c, s) for c in COMPANIES for s in SUFFIXES]
    companies = rng.sample(pool, N_ACCOUNTS + N_LEADS)
    folks = [(f, last) for f in FIRST for last in LAST]
    people = rng.sample(folks, N_ACCOUNTS * 2 + N_LEADS)
    sequences = [
        {
            "id": stable_id("seq", seed, "seq", name),
            "name": name,
            "purpose": purpose,
            "steps": steps,
        }
        for name, (purpose, steps) in SEQUENCES.items()
    ]
    outbox = Outbox(seed, sequences)
    accounts: list[dict[str, Any]] = []
    contacts: list[dict[str, Any]] = []
    opportunities: list[dict[str, Any]] = []
    contracts: list[dict[str, Any]] = []
    renewals: list[dict[str, Any]] = []
    invoices: list[dict[str, Any]] = []
    reminders: list[tuple[int, datetime]] = []
    for i, (company, suffix) in enumerate(companies[:N_ACCOUNTS]):
        aid = stable_id("acc", seed, "acc", i)
        # Most accounts sit in the lower tiers, so there is an upgrade to make.
        tier = rng.choices(TIERS, weights=[4, 3, 2, 1])[0] if i == 0 else rng.choice(TIERS[:2])
        account = {"id": aid, "name": f"{company} {suffix}", "tier": tier, "source_lead_id": None}
        accounts.append(account)
        first_contact = len(contacts)
        for c in range(2 if i < 3 else 1):
            first, last = people[2 * i + c]
            contacts.append(
                {
                    "id": stable_id("con", seed, "con", i, c),
                    "account_id": aid,
                    "name": f"{first} {last}",
                    "email": _email(first, last, company),
                }
            )
        opened = day(hist, THIS_YEAR, (6, 11))
        opportunities.append(
            {
                "id": stable_id("opp", seed, "opp", i),
                "account_id": aid,
                "name": f"{company} {rng.choice(['platform', 'analytics', 'support'])} deal",
                "stage": rng.choice(OPEN_STAGES),
                "amount": rng.randint(50, 900) * 10_000,
                "source_lead_id": None,
                "created": stamp(opened),
                "updated": stamp(opened + timedelta(days=hist.randint(1, 20))),
            }
        )
        since = day(hist, THIS_YEAR - 1, (1, 6))
        if i < N_SLA:
            level = rng.choice(sorted(SLA_LEVELS))
            contract = {
                "id": stable_id("sla", seed, "sla", i),
                "account_id": aid,
                "level": level,
                "annual_fee": SLA_LEVELS[level],
                "term_end_year": rng.randint(2026, 2027),
            }
            ren, inv, signed = contract_history(seed, hist, contract)
            contract["created"] = stamp(signed)
            contracts.append(contract)
            renewals.extend(ren)
            invoices.extend(inv)
            # The deal that sold the SLA: won for the amount of the initial term.
            opportunities.append(
                {
                    "id": stable_id("opp", seed, "opp-sla", i),
                    "account_id": aid,
                    "name": f"{company} {level} SLA",
                    "stage": "closed_won",
                    "amount": inv[0]["amount"],
                    "source_lead_id": None,
                    "created": stamp(signed - timedelta(days=hist.randint(20, 60))),
                    "updated": stamp(signed),
                }
            )
            since = signed - timedelta(days=hist.randint(60, 200))
            if i != ONBOARDING_NOW:
                outbox.enroll(contacts[first_contact], "customer-onboarding", signed)
            latest = datetime.strptime(ren[-1]["created"], "%Y-%m-%dT%H:%M:%SZ")
            reminders.append((first_contact, latest.replace(tzinfo=UTC) - timedelta(days=45)))
        account["created"] = stamp(since)
        for person_row in contacts[first_contact:]:
            person_row["created"] = stamp(since + timedelta(days=hist.randint(0, 10)))
    for index, when in reminders:
        outbox.enroll(contacts[index], "renewal-reminder", when)
    leads = [
        _lead(seed, n, people[N_ACCOUNTS * 2 + n], firm, day(hist, THIS_YEAR, (7, 11)))
        for n, firm in enumerate(companies[N_ACCOUNTS:])
    ]
    # A lead converted earlier, from a company and a person no other row has.
    firm = hist.choice([c for c in pool if c not in companies])
    person = hist.choice([p for p in folks if p not in people])
    converted = _lead(seed, N_LEADS, person, firm, day(hist, THIS_YEAR, (2, 4)))
    _convert(seed, hist, converted, accounts, contacts, opportunities)
    leads.append(converted)
    # A few contacts went through the webinar invitation in the autumn.
    for index in hist.sample(range(1, len(contacts)), 2):
        outbox.enroll(contacts[index], "webinar-invite", day(hist, THIS_YEAR, (9, 10)))
    # The current enrollments, from December: the first contact of account 0 (a customer
    # with an SLA) was put in the prospecting sequence by mistake, their webinar enrollment
    # is right; account ONBOARDING_NOW's first contact is being onboarded.
    onboarding = next(c for c in contacts if c["account_id"] == accounts[ONBOARDING_NOW]["id"])
    for contact, name in (
        (contacts[0], "webinar-invite"),
        (contacts[0], "prospecting-outreach"),
        (onboarding, "customer-onboarding"),
    ):
        outbox.enroll(contact, name, day(hist, THIS_YEAR, (12, 12)), sent=1)
    return {
        "leads": leads,
        "accounts": accounts,
        "contacts": contacts,
        "opportunities": opportunities,
        "sla_contracts": contracts,
        "sla_renewals": renewals,
        "invoices": invoices,
        "sequences": sequences,
        "enrollments": outbox.enrollments,
        "emails": outbox.emails,
    }


def _lead(
    seed: int, n: int, person: tuple[str, str], company: tuple[str, str], created: datetime
) -> dict[str, Any]:
    first, last = person
    return {
        "id": stable_id("lead", seed, "lead", n),
        "name": f"{first} {last}",
        "email": _email(first, last, company[0]),
        "company": f"{company[0]} {company[1]}",
        "status": "open",
        "pending": None,
        "converted_account_id": None,
        "converted_contact_id": None,
        "converted_opportunity_id": None,
        "created": stamp(created),
    }


def _convert(
    seed: int,
    rng: Any,
    lead: dict[str, Any],
    accounts: list[dict[str, Any]],
    contacts: list[dict[str, Any]],
    opportunities: list[dict[str, Any]],
) -> None:
    """What convert_lead leaves behind, a few weeks after the lead came in."""
    at = stamp(datetime.strptime(lead["created"], "%Y-%m-%dT%H:%M:%SZ") + timedelta(days=20))
    account = {
        "id": stable_id("acc", seed, "lead-acc", lead["id"]),
        "name": lead["company"],
        "tier": "standard",
        "source_lead_id": lead["id"],
        "created": at,
    }
    contact = {
        "id": stable_id("con", seed, "lead-con", lead["id"]),
        "account_id": account["id"],
        "name": lead["name"],
        "email": lead["email"],
        "created": at,
    }
    opp = {
        "id": stable_id("opp", seed, "lead-opp", lead["id"]),
        "account_id": account["id"],
        "name": f"{lead['company']} pilot",
        "stage": rng.choice(["proposal", "negotiation"]),
        "amount": rng.randint(20, 300) * 10_000,
        "source_lead_id": lead["id"],
        "created": at,
        "updated": at,
    }
    accounts.append(account)
    contacts.append(contact)
    opportunities.append(opp)
    lead.update(
        status="converted",
        converted_account_id=account["id"],
        converted_contact_id=contact["id"],
        converted_opportunity_id=opp["id"],
    )


def by_id(rows: list[dict[str, Any]], ident: str) -> dict[str, Any]:
    return next(r for r in rows if r["id"] == ident)


def seq_id(fx: dict[str, Any], name: str) -> str:
    return str(next(s["id"] for s in fx["sequences"] if s["name"] == name))


def count_rows(fx: dict[str, Any], key: str, **where: Any) -> int:
    """Fixture rows matching `where`: the baselines task oracles count on top of."""
    return sum(all(r.get(k) == v for k, v in where.items()) for r in fx[key])
