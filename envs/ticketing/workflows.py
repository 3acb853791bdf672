"""Ticketing workflows: task, parameters from the seed, oracles, gold plan, fault scenarios.

Every page, notice and comment is counted per person and per incident, so a page or a
notice sent twice makes an invariant false.
"""

from __future__ import annotations

from .followup_workflows import RESOLVE, RETRACT
from .response_workflows import ESCALATE, OPEN_AND_PAGE

WORKFLOWS = [OPEN_AND_PAGE, RESOLVE, RETRACT, ESCALATE]
