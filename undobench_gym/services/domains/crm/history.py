"""The history behind the seeded CRM state: sequence enrollments with the emails they
sent, and SLA contracts' renewals with their invoices, as the service's own routes would
have written them (`fixture.build_fixture` puts them together)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from undobench_gym.contract.seeding import stable_id

#: The year the state was taken in: no renewal is signed later than that.
THIS_YEAR = 2025


def stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def day(rng: Any, year: int, months: tuple[int, int]) -> datetime:
    return datetime(
        year,
        rng.randint(*months),
        rng.randint(1, 26),
        rng.randint(8, 17),
        rng.randint(0, 59),
        tzinfo=UTC,
    )


class Outbox:
    """Enrollments and the emails they sent, with their sequences' subjects."""

    def __init__(self, seed: int, sequences: list[dict[str, Any]]) -> None:
        self.seed = seed
        self.seq = {s["name"]: s for s in sequences}
        self.enrollments: list[dict[str, Any]] = []
        self.emails: list[dict[str, Any]] = []

    def enroll(
        self, contact: dict[str, Any], name: str, start: datetime, sent: int | None = None
    ) -> dict[str, Any]:
        """`sent` emails (all of them when None, and the enrollment is completed), a week
        apart from `start`."""
        seq = self.seq[name]
        steps = len(seq["steps"])
        n = steps if sent is None else sent
        k = len(self.enrollments)
        eid = stable_id("enr", self.seed, "enr", k)
        last = start + timedelta(days=7 * (n - 1))
        enr = {
            "id": eid,
            "sequence_id": seq["id"],
            "contact_id": contact["id"],
            "status": "completed" if n == steps else "active",
            "next_step": n + 1,
            "created": stamp(start),
            "updated": stamp(last),
        }
        self.enrollments.append(enr)
        for step in range(1, n + 1):
            self.emails.append(
                {
                    "id": stable_id("eml", self.seed, "eml", k, step),
                    "enrollment_id": eid,
                    "sequence_id": seq["id"],
                    "contact_id": contact["id"],
                    "to_email": contact["email"],
                    "step": step,
                    "subject": seq["steps"][step - 1],
                    "sent": stamp(start + timedelta(days=7 * (step - 1))),
                }
            )
        return enr


def contract_history(
    seed: int, rng: Any, contract: dict[str, Any]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], datetime]:
    """Renewals and invoices that lead to the contract's term end; when it was signed.

    The initial term covers the years first_year..initial end; a renewal from year F to
    year T covers F+1..T (as renew_sla invoices it)."""
    cid, fee, level = contract["id"], contract["annual_fee"], contract["level"]
    years = [rng.randint(1, 2) for _ in range(rng.randint(1, 2))]
    # The initial term ended before this year, so every signature lies in the past.
    years[0] += max(0, contract["term_end_year"] - sum(years) - (THIS_YEAR - 1))
    initial_end = contract["term_end_year"] - sum(years)
    initial = rng.randint(1, 2)
    start = initial_end - initial + 1
    signed = day(rng, start - 1, (9, 11))
    invoices = [
        {
            "id": stable_id("inv", seed, "inv", cid, 0),
            "account_id": contract["account_id"],
            "contract_id": cid,
            "amount": fee * initial,
            "description": f"SLA {level} initial term {start}-{initial_end}",
            "first_year": start,
            "last_year": initial_end,
            "created": stamp(signed),
        }
    ]
    renewals = []
    end = initial_end
    for j, y in enumerate(years, start=1):
        # Signed in the last year of the term it extends, or early, this year.
        when = (
            day(rng, end, (8, 11)) if end < THIS_YEAR else day(rng, THIS_YEAR, (4 * j - 1, 4 * j))
        )
        inv = {
            "id": stable_id("inv", seed, "inv", cid, j),
            "account_id": contract["account_id"],
            "contract_id": cid,
            "amount": fee * y,
            "description": f"SLA {level} renewal {end + 1}-{end + y}",
            "first_year": end + 1,
            "last_year": end + y,
            "created": stamp(when),
        }
        invoices.append(inv)
        renewals.append(
            {
                "id": stable_id("ren", seed, "ren", cid, j),
                "contract_id": cid,
                "years": y,
                "from_year": end,
                "to_year": end + y,
                "invoice_id": inv["id"],
                "created": stamp(when),
            }
        )
        end += y
    return renewals, invoices, signed
