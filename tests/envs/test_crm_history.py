"""CRM fixture history: SLA renewals and invoices, sequence enrollments and their emails,
won deals and converted leads agree with the current state for many seeds, and the
tasks' parameters and oracles are not satisfied by history."""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise
from typing import Any

import pytest

from undobench_gym.services.domains.crm.fixture import ONBOARDING_NOW, build_fixture, seq_id
from undobench_gym.services.domains.crm.service import DOMAIN
from undobench_gym.services.domains.crm.workflows import WORKFLOWS

from .service_harness import GOLD_SEEDS, ServiceClient, params_for, workflow
from .workflow_harness import (
    CLOCK,
    assert_new_rows_follow_history,
    tables_around_gold_plan,
    where,
)

pytestmark = pytest.mark.service(DOMAIN)

SEEDS = (0, 1, 2, 3, 7, 11, 42, 99, 2024, 12345)
STAMPS = ("created", "updated", "sent")


def _rows(fx: dict[str, Any], key: str, **match: Any) -> list[dict[str, Any]]:
    return where(fx[key], **match)


@pytest.mark.parametrize("seed", SEEDS)
def test_contracts_agree_with_renewals_and_invoices(seed: int) -> None:
    fx = build_fixture(seed)
    invoices = {i["id"]: i for i in fx["invoices"]}
    for c in fx["sla_contracts"]:
        renewals = sorted(
            _rows(fx, "sla_renewals", contract_id=c["id"]), key=lambda r: r["from_year"]
        )
        billed = sorted(_rows(fx, "invoices", contract_id=c["id"]), key=lambda i: i["first_year"])
        assert renewals, "every contract has been renewed at least once"
        assert len(billed) == len(renewals) + 1  # the initial term, then one per renewal
        # The invoices tile the contract's years without gap or overlap, up to the term end.
        for a, b in pairwise(billed):
            assert b["first_year"] == a["last_year"] + 1
        assert billed[-1]["last_year"] == c["term_end_year"]
        years = c["term_end_year"] - billed[0]["first_year"] + 1
        assert sum(i["amount"] for i in billed) == c["annual_fee"] * years
        assert all(i["account_id"] == c["account_id"] for i in billed)
        # The renewals chain from the initial term to the current term end.
        assert renewals[0]["from_year"] == billed[0]["last_year"]
        for a, b in pairwise(renewals):
            assert b["from_year"] == a["to_year"] and b["created"] > a["created"]
        assert renewals[-1]["to_year"] == c["term_end_year"]
        for r in renewals:
            inv = invoices[r["invoice_id"]]
            assert r["years"] == r["to_year"] - r["from_year"] > 0
            assert inv["contract_id"] == c["id"] and inv["amount"] == c["annual_fee"] * r["years"]
            assert (inv["first_year"], inv["last_year"]) == (r["from_year"] + 1, r["to_year"])
            assert inv["created"] == r["created"] > c["created"]
        # The won deal that sold the contract is the initial term's invoice.
        won = _rows(fx, "opportunities", account_id=c["account_id"], stage="closed_won")
        assert [o["amount"] for o in won] == [billed[0]["amount"]]
        assert billed[0]["created"] == c["created"]


@pytest.mark.parametrize("seed", SEEDS)
def test_enrollments_agree_with_the_outbox(seed: int) -> None:
    fx = build_fixture(seed)
    sequences = {s["id"]: s for s in fx["sequences"]}
    contacts = {c["id"]: c for c in fx["contacts"]}
    sent: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for m in fx["emails"]:
        sent[m["enrollment_id"]].append(m)
    assert set(sent) <= {e["id"] for e in fx["enrollments"]}
    for e in fx["enrollments"]:
        steps = sequences[e["sequence_id"]]["steps"]
        emails = sorted(sent[e["id"]], key=lambda m: m["step"])
        assert [m["step"] for m in emails] == list(range(1, e["next_step"]))
        assert [m["subject"] for m in emails] == steps[: e["next_step"] - 1]
        assert (e["status"] == "completed") == (e["next_step"] == len(steps) + 1)
        assert e["status"] in ("active", "completed")
        for m in emails:
            assert (m["sequence_id"], m["contact_id"]) == (e["sequence_id"], e["contact_id"])
            assert m["to_email"] == contacts[e["contact_id"]]["email"]
        stamps = [m["sent"] for m in emails]
        assert stamps == sorted(stamps) and stamps[0] == e["created"] and stamps[-1] == e["updated"]
        assert e["created"] > contacts[e["contact_id"]]["created"]
    # Each customer's first contact was reminded before its latest renewal, and onboarded
    # when the contract was signed (but for the customer onboarded right now).
    reminder = seq_id(fx, "renewal-reminder")
    onboarding = seq_id(fx, "customer-onboarding")
    for i, c in enumerate(fx["sla_contracts"]):
        first = next(x for x in fx["contacts"] if x["account_id"] == c["account_id"])
        latest = max(r["created"] for r in _rows(fx, "sla_renewals", contract_id=c["id"]))
        (remind,) = _rows(fx, "enrollments", contact_id=first["id"], sequence_id=reminder)
        assert remind["status"] == "completed" and remind["updated"] < latest
        onboarded = _rows(fx, "enrollments", contact_id=first["id"], sequence_id=onboarding)
        assert [e["status"] for e in onboarded] == (
            ["active"] if i == ONBOARDING_NOW else ["completed"]
        )


@pytest.mark.parametrize("seed", SEEDS)
def test_leads_accounts_and_foreign_keys_agree(seed: int) -> None:
    fx = build_fixture(seed)
    accounts = {a["id"]: a for a in fx["accounts"]}
    assert all(c["account_id"] in accounts for c in fx["contacts"])
    assert all(o["account_id"] in accounts for o in fx["opportunities"])
    assert all(c["account_id"] in accounts for c in fx["sla_contracts"])
    converted = [x for x in fx["leads"] if x["status"] == "converted"]
    assert len(converted) == 1
    for lead in fx["leads"]:
        from_lead = [a for a in fx["accounts"] if a["source_lead_id"] == lead["id"]]
        contact = [c for c in fx["contacts"] if c["email"] == lead["email"]]
        opps = [o for o in fx["opportunities"] if o["source_lead_id"] == lead["id"]]
        if lead["status"] == "open":
            assert from_lead == contact == opps == []
            assert lead["converted_account_id"] is None and lead["pending"] is None
            continue
        assert [a["id"] for a in from_lead] == [lead["converted_account_id"]]
        assert [c["id"] for c in contact] == [lead["converted_contact_id"]]
        assert [o["id"] for o in opps] == [lead["converted_opportunity_id"]]
        assert from_lead[0]["name"] == lead["company"] and contact[0]["name"] == lead["name"]
        assert contact[0]["account_id"] == opps[0]["account_id"] == from_lead[0]["id"]
        assert from_lead[0]["created"] > lead["created"]
    for key, rows in fx.items():
        for r in rows:
            for stamp in STAMPS:
                assert r.get(stamp, "") < CLOCK, (key, r)


@pytest.mark.parametrize("seed", SEEDS)
def test_task_parameters_are_not_history(seed: int) -> None:
    fx = build_fixture(seed)
    renew = params_for(workflow("crm", "crm-renew-sla"), seed)
    cid = renew["contract_id"]
    assert renew["renewals_after"] == len(_rows(fx, "sla_renewals", contract_id=cid)) + 1 >= 2
    assert renew["invoices_after"] == len(_rows(fx, "invoices", contract_id=cid)) + 1 >= 3
    # No earlier renewal extends the current term and no invoice bills the new years yet.
    assert not _rows(fx, "sla_renewals", contract_id=cid, from_year=renew["term_end_year"])
    assert all(
        i["last_year"] < renew["first_new_year"] for i in _rows(fx, "invoices", contract_id=cid)
    )
    fix = params_for(workflow("crm", "crm-fix-sequence-enrollment"), seed)
    # The contact was reminded before: the new enrollment must be told from the old one.
    assert fix["right_enrollments_after"] == 2 and fix["right_emails_after"] == 4
    old = _rows(fx, "enrollments", contact_id=fix["contact_id"], sequence_id=fix["right_sequence"])
    assert [e["status"] for e in old] == ["completed"]
    assert fix["wrong_emails"] == 1
    convert = params_for(workflow("crm", "crm-convert-lead"), seed)
    lead = next(x for x in fx["leads"] if x["id"] == convert["lead_id"])
    assert lead["status"] == "open"
    close = params_for(workflow("crm", "crm-close-won-deal"), seed)
    opp = next(o for o in fx["opportunities"] if o["id"] == close["opportunity_id"])
    assert opp["stage"] not in ("closed_won", "closed_lost")
    assert close["onboardings_after"] == close["welcome_emails_after"] == 1


@pytest.mark.parametrize("wf", WORKFLOWS, ids=lambda w: w.id)
@pytest.mark.parametrize("seed", GOLD_SEEDS)
def test_new_rows_are_newer_than_history(svc: ServiceClient, wf: Any, seed: int) -> None:
    """Every row a gold plan adds is stamped on the episode clock and every fixture row
    before it, so a read-back tells what the episode did from what was there. (That the
    oracles hold after the plan and not before, `WorkflowContract` checks.) A table is
    stamped by when its rows were created, or sent; sequences have no history of their
    own."""
    before, after = tables_around_gold_plan(svc, wf, seed)
    stamps = {
        table: ("id", next(s for s in ("created", "sent") if s in rows[0]))
        for table, rows in after.items()
        if rows and not {"created", "sent"}.isdisjoint(rows[0])
    }
    assert sum(assert_new_rows_follow_history(before, after, stamps).values()) > 0
