"""Cloud workflows: task, parameters from the seed, oracles, gold plan, fault scenarios.

Every oracle is a value computed from the fixture (revision numbers, images, restart
counts, weights; counts of history rows plus what the task adds), so a deploy, restart or
rollback applied twice makes an invariant false and history never passes for the effect.
"""

from __future__ import annotations

from undobench_gym.services.domains.cloud.workflows_ops import RESTART, ROLLBACK
from undobench_gym.services.domains.cloud.workflows_release import CANARY, CUTOVER
from undobench_gym.services.domains.cloud.workflows_writer import RESTART_WRITER
from undobench_gym.services.domains.workflows_stress import (
    crash_then_lost_ack,
    lost_ack_twice,
    retries_dropped,
    stress,
)

WORKFLOWS = [CANARY, RESTART, ROLLBACK, CUTOVER]
#: The stress split: the same tasks under fault schedules.
STRESS = [
    stress(RESTART, crash_then_lost_ack("scale_deployment")),
    stress(CANARY, retries_dropped("register_endpoint"), lost_ack_twice("create_deployment")),
    RESTART_WRITER,
]
WORKFLOWS += STRESS
