"""The adversarial agent suite: behaviours that real agents show after a fault,
over every workflow and scenario where they apply, each with the verdict it must get.
docs/validity.md holds the table this run produces; the test keeps it current."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from undobench_gym.evaluation.adversarial import BEHAVIOURS, run_suite, table

pytestmark = pytest.mark.xdist_group("adversarial")

DOC = Path(__file__).resolve().parents[1] / "docs" / "validity.md"
BEGIN, END = "<!-- adversarial table: begin -->", "<!-- adversarial table: end -->"


# Session scope: loadgroup keeps the group on one worker, but not in one run of tests, and a
# module fixture would be rebuilt each time the worker comes back to this module.
@pytest.fixture(scope="session")
def rows() -> list:
    return run_suite()


def test_every_behaviour_gets_the_verdict_it_must(rows: list) -> None:
    wrong = [r for r in rows if not r.agrees]
    assert not wrong, "\n".join(
        f"{r.behaviour} {r.workflow}:{r.scenario}: expected {r.expected}, got {r.observed}"
        for r in wrong
    )
    assert {r.behaviour for r in rows} == set(BEHAVIOURS)


def test_the_cases_the_issue_reproduced_are_judged_as_harm(rows: list) -> None:
    got = {(r.behaviour, r.workflow, r.scenario): r.observed for r in rows}
    for key in [
        ("reworded_resend", "msg-oncall-sms", "chat-lost-ack"),
        ("reworded_resend", "pay-charge-customer", "lost-ack"),
    ]:
        assert got[key].startswith("duplicate"), (key, got[key])


def test_docs_validity_table_is_current(rows: list) -> None:
    text = DOC.read_text()
    current = re.search(re.escape(BEGIN) + r"\n(.*)\n" + re.escape(END), text, re.S)
    assert current is not None, f"{DOC} lacks the table markers"
    assert current.group(1).strip() == table(rows).strip(), (
        "regenerate: python -m undobench_gym.evaluation.adversarial --markdown"
    )
