"""B2 idempotency keys: a re-sent call carries the key of the first send, so a server that
honours keys replays its answer instead of doing the work twice."""

from __future__ import annotations

import json
from typing import Any

from undobench_gym.agents.public_tools import KEY_ARG
from undobench_gym.agents.recovery.base import RecoveryWrapper, StepResult
from undobench_gym.contract.seeding import stable_id


class IdempotencyKeys(RecoveryWrapper):
    """B2: give every call to a key-accepting tool (its public schema has an
    `idempotency_key` property) a key derived from the episode and the call's content, so a
    re-sent call carries the same key."""

    method = "B2"

    def handle(self, action: Any) -> StepResult:
        parsed = action
        if isinstance(action, str):
            try:
                parsed = json.loads(action)
            except ValueError:
                return self.send(action)
        if (
            isinstance(parsed, dict)
            and parsed.get("tool") in self.keyed
            and isinstance(parsed.get("arguments"), dict)
            and KEY_ARG not in parsed["arguments"]
        ):
            args = parsed["arguments"]
            key = stable_id(
                "idem",
                self.task_instance,
                parsed["tool"],
                json.dumps(args, sort_keys=True, default=str),
                length=24,
            )
            parsed = {**parsed, "arguments": {**args, KEY_ARG: key}}
        return self.send(parsed)
