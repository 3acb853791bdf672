"""Database workflows: task, parameters from the seed, oracles, gold plan, fault scenarios.

Every balance oracle is an exact value computed from the fixture, so an additive effect
applied twice (a retried adjustment, a dividend paid again) makes an invariant false.
Counts start from the fixture's history (earlier adjustments, credits, dividends,
migrations) and match semantic fields (account, amount), never a memo the agent writes:
a retry with a reworded memo is counted like any other.
"""

from __future__ import annotations

from undobench_gym.services.domains.database.workflows_accounts import ORDER, TRANSFER, UPGRADE
from undobench_gym.services.domains.database.workflows_composites import DIVIDEND, MIGRATION
from undobench_gym.services.domains.database.workflows_writer import TRANSFER_WRITER
from undobench_gym.services.domains.workflows_stress import (
    crash_then_lost_ack,
    lost_ack_twice,
    retries_dropped,
    stress,
)

WORKFLOWS = [TRANSFER, DIVIDEND, ORDER, MIGRATION, UPGRADE]
#: The stress split: the same tasks under fault schedules.
STRESS = [
    stress(TRANSFER, crash_then_lost_ack("adjust_balance")),
    stress(UPGRADE, retries_dropped("adjust_balance"), lost_ack_twice("adjust_balance")),
    TRANSFER_WRITER,
]
WORKFLOWS += STRESS
