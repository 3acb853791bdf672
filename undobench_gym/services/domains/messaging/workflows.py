"""Messaging workflows: task, parameters from the seed, oracles, gold plan, fault scenarios.

Counts are exact (one SMS, one chat post, one email per recipient, one webhook received),
so a message sent twice makes an invariant false, however it was worded (see
`workflows_common` for how history and new rows are told apart).
"""

from __future__ import annotations

from undobench_gym.services.domains.messaging.workflows_email import BATCH
from undobench_gym.services.domains.messaging.workflows_oncall import PAGE, SMS
from undobench_gym.services.domains.messaging.workflows_webhooks import STATUSPAGE
from undobench_gym.services.domains.messaging.workflows_writer import SMS_WRITER
from undobench_gym.services.domains.workflows_stress import (
    crash_then_lost_ack,
    lost_ack_twice,
    retries_dropped,
    stress,
)

WORKFLOWS = [BATCH, STATUSPAGE, SMS, PAGE]
#: The stress split: the same tasks under fault schedules.
STRESS = [
    stress(PAGE, crash_then_lost_ack("trigger_page")),
    stress(SMS, retries_dropped("post_chat_message"), lost_ack_twice("send_sms")),
    SMS_WRITER,
]
WORKFLOWS += STRESS
