"""CRM workflows: task, parameters from the seed, oracles, gold plan, fault scenarios.

Counts are exact (one renewal, one invoice, one welcome email more than the fixture's
history holds), so an additive effect or a send applied twice makes an invariant false;
they are keyed on structured fields (contract and years, contact and sequence), never on
text an agent words, and the new row is told from history by its fields (the renewal of
the current term, the invoice of the new years).
"""

from __future__ import annotations

from undobench_gym.services.domains.crm.workflows_customers import FIX, RENEW
from undobench_gym.services.domains.crm.workflows_sales import CLOSE, CONVERT
from undobench_gym.services.domains.crm.workflows_writer import CLOSE_WRITER
from undobench_gym.services.domains.workflows_stress import (
    crash_then_lost_ack,
    lost_ack_twice,
    retries_dropped,
    stress,
)

WORKFLOWS = [CONVERT, RENEW, FIX, CLOSE]
#: The stress split: the same tasks under fault schedules.
STRESS = [
    stress(CLOSE, crash_then_lost_ack("set_opportunity_amount")),
    stress(FIX, retries_dropped("unenroll_contact"), lost_ack_twice("enroll_contact")),
    CLOSE_WRITER,
]
WORKFLOWS += STRESS
