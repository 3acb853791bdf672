"""Payments workflows: task, parameters from the seed, oracles, gold plan, fault scenarios.

Effects are identified by who, what and how much (customer, amount, currency; account;
beneficiary), never by a description or reference the agent writes. Counts start from the
fixture's history (earlier charges, invoices, transfers, wires) and match those semantic
fields, so that neither old rows nor a reworded re-send can pass for the task's effect.
"""

from __future__ import annotations

from undobench_gym.services.domains.payments.workflows_charges import CHARGE, REFUND, RENEW
from undobench_gym.services.domains.payments.workflows_transfers import PAYOUT, WIRE
from undobench_gym.services.domains.payments.workflows_writer import CHARGE_WRITER
from undobench_gym.services.domains.workflows_stress import (
    crash_then_lost_ack,
    lost_ack_twice,
    retries_dropped,
    stress,
)

WORKFLOWS = [CHARGE, RENEW, REFUND, PAYOUT, WIRE]
#: The stress split: the same tasks under fault schedules.
STRESS = [
    stress(RENEW, crash_then_lost_ack("renew_subscription")),
    stress(REFUND, retries_dropped("create_refund"), lost_ack_twice("create_charge")),
    CHARGE_WRITER,
]
WORKFLOWS += STRESS
