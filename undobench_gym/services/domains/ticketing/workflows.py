"""Ticketing workflows: task, parameters from the seed, oracles, gold plan, fault scenarios.

Every page, notice and comment is counted by its structured fields (incident, responder,
audience, kind; never its text) on top of what the fixture's history already holds, so a
page or a notice sent twice makes an invariant false however it was worded.
"""

from __future__ import annotations

from undobench_gym.services.domains.ticketing.workflows_followup import RESOLVE, RETRACT
from undobench_gym.services.domains.ticketing.workflows_response import ESCALATE, OPEN_AND_PAGE
from undobench_gym.services.domains.ticketing.workflows_writer import OPEN_AND_PAGE_WRITER
from undobench_gym.services.domains.workflows_stress import (
    crash_then_lost_ack,
    lost_ack_twice,
    retries_dropped,
    stress,
)

WORKFLOWS = [OPEN_AND_PAGE, RESOLVE, RETRACT, ESCALATE]
#: The stress split: the same tasks under fault schedules.
STRESS = [
    stress(RESOLVE, crash_then_lost_ack("resolve_incident")),
    stress(RETRACT, retries_dropped("retract_page"), lost_ack_twice("page_responder")),
    OPEN_AND_PAGE_WRITER,
]
WORKFLOWS += STRESS
