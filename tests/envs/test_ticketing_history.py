"""Ticketing fixtures carry a history consistent with their current state (pages that
engaged each level, escalations with one page per responder, retractions with their
disregard notice, resolution notices of resolved incidents), and the workflows' oracles
and read-backs can tell that history from what an episode adds (that it stands in for
no left-out gold step, `WorkflowContract` checks for every domain)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from undobench_gym.services.domains.ticketing.fixture import (
    EPOCH_TEXT,
    build_fixture,
    level_responders,
    more_severe,
)
from undobench_gym.services.domains.ticketing.service import DOMAIN

from .service_harness import SEED, ServiceClient, params_for, run_gold_plan
from .workflow_harness import (
    assert_service_seeds_fixture,
    where,
)

pytestmark = pytest.mark.service(DOMAIN)
SEEDS = range(12)


def _by_incident(rows: list[dict[str, Any]], incident_id: str) -> list[dict[str, Any]]:
    return where(rows, incident_id=incident_id)


@pytest.mark.parametrize("seed", SEEDS)
def test_history_agrees_with_the_current_state(seed: int) -> None:
    fx = build_fixture(seed)
    responders = {r["id"] for r in fx["responders"]}
    incidents = {i["id"]: i for i in fx["incidents"]}
    pages = {p["id"]: p for p in fx["pages"]}
    escalations = {e["id"]: e for e in fx["escalations"]}
    for key in ("pages", "escalations", "comments", "notices"):
        assert fx[key], f"{key}: no history"
        ids = [r["id"] for r in fx[key]]
        assert len(set(ids)) == len(ids), key
        for r in fx[key]:
            inc = incidents[r["incident_id"]]  # every row belongs to a fixture incident
            # history happens after the incident opened and before the episode starts
            assert inc["created"] <= r["created"] < EPOCH_TEXT, (key, r)
    for inc_id, inc in incidents.items():
        own_pages = _by_incident(fx["pages"], inc_id)
        own_escs = sorted(_by_incident(fx["escalations"], inc_id), key=lambda e: e["level"])
        notices = _by_incident(fx["notices"], inc_id)
        comments = _by_incident(fx["comments"], inc_id)
        # level 1 was engaged by a page to the assignee; each escalation went one level up
        assert any(
            p["responder_id"] == inc["assignee_id"]
            and not p["escalation_id"]
            and not p["retracted"]
            for p in own_pages
        ), inc_id
        assert inc["escalation_level"] == 1 + len(own_escs)
        assert [e["level"] for e in own_escs] == list(range(2, inc["escalation_level"] + 1))
        severity = inc["severity"]
        for e in reversed(own_escs):
            assert e["status"] == "completed" and e["completed"] >= e["created"]
            assert e["severity_to"] == severity and more_severe(e["severity_from"]) == severity
            severity = e["severity_from"]
            assert e["responder_ids"] == level_responders(fx, inc["policy_id"], e["level"])
            sent = Counter(p["responder_id"] for p in own_pages if p["escalation_id"] == e["id"])
            assert sent == Counter(e["responder_ids"]), "one page per responder of the level"
        # a retracted page has its disregard notice, to the person paged, and vice versa
        retracted = {p["id"] for p in own_pages if p["retracted"]}
        disregards = [n for n in notices if n["kind"] == "disregard"]
        assert {n["page_id"] for n in disregards} == retracted
        for n in disregards:
            assert n["recipient"] == pages[n["page_id"]]["responder_id"]
            assert n["created"] >= pages[n["page_id"]]["created"]
        # resolved incidents have their resolution, notice and postmortem; others none
        resolved = inc["status"] == "resolved"
        assert (inc["resolution"] is not None) == resolved == (inc["resolved"] is not None)
        res_notices = [n for n in notices if n["kind"] == "resolution"]
        assert bool(res_notices) == resolved
        assert any(c["kind"] == "postmortem" for c in comments) == resolved
        if resolved:
            assert all(n["created"] >= inc["resolved"] for n in res_notices)
            assert all(p["created"] <= inc["resolved"] for p in own_pages)
        # an acknowledged or resolved incident was acknowledged by its assignee
        assignee = next(r["name"] for r in fx["responders"] if r["id"] == inc["assignee_id"])
        acked = any(c["kind"] == "status" and c["author"] == assignee for c in comments)
        assert acked == (inc["status"] != "open")
    for p in fx["pages"]:
        assert p["responder_id"] in responders
        if p["escalation_id"]:
            assert escalations[p["escalation_id"]]["incident_id"] == p["incident_id"]
    # the shapes the workflows rely on
    assert incidents[fx["incidents"][0]["id"]]["escalation_level"] == 1
    assert fx["incidents"][2]["escalation_level"] == 2  # escalated before it was fixed
    assert any(p["retracted"] for p in fx["pages"])


def test_reset_state_is_the_fixture(svc: ServiceClient) -> None:
    tables = [
        ("incidents", "tk_incidents"),
        ("escalations", "tk_escalations"),
        ("pages", "tk_pages"),
        ("comments", "tk_comments"),
        ("notices", "tk_notices"),
    ]
    assert_service_seeds_fixture(svc, SEED, build_fixture(SEED), tables)


def test_a_scoped_read_back_tells_history_from_the_new_effect(svc: ServiceClient) -> None:
    """Before the task: stakeholders were told about another incident and the incident
    has comments, so an unscoped read-back would say "done"; the scoped one does not."""
    wf = svc.workflow("tix-resolve-and-notify")
    params = params_for(wf)
    everything = svc.ok("list_notices")
    assert any(n["kind"] == "resolution" and n["recipient"] == "stakeholders" for n in everything)
    assert svc.ok("list_notices", {"incident_id": params["incident_id"]}) == []
    view = svc.ok("get_incident", {"incident_id": params["incident_id"]})
    assert view["comments"] and not [c for c in view["comments"] if c["kind"] == "postmortem"]
    run_gold_plan(svc, wf, params)
    mine = svc.ok("list_notices", {"incident_id": params["incident_id"]})
    assert [(n["recipient"], n["message"]) for n in mine] == [("stakeholders", params["notice"])]


def test_escalation_read_back_sees_only_the_new_escalation(svc: ServiceClient) -> None:
    wf = svc.workflow("tix-escalate-incident")
    params = params_for(wf)
    assert svc.ok("list_escalations")  # another incident was escalated before
    assert svc.ok("list_escalations", {"incident_id": params["incident_id"]}) == []
    run_gold_plan(svc, wf, params)
    (esc,) = svc.ok("list_escalations", {"incident_id": params["incident_id"]})
    assert esc["status"] == "completed" and esc["not_yet_paged"] == []
