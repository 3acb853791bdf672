"""B3 saga: bounded retries, and when a step still fails, real compensating calls for the
steps already committed, newest first.

The wrapper keeps a stack of the committed mutating steps that have a compensation derivable
from the public schemas (`derive.compensation_for`: a tool with `compensatingHint`
that deletes the created entry, or offsets the record by its id: a charge is refunded, an
enrollment unenrolled, a page retracted). A step fails definitively when it
still has an unknown outcome after the retries (B3 wraps B0's `NaiveRetry`), or when the
service refuses it outright (400, 403, 404, 410, 412; not 409, which after a lost
acknowledgement usually means the effect already exists, and not 422, a malformed call the
agent can fix). Then every stacked step is compensated, through the proxy, and the agent
gets the failure with a `recovery` note listing the compensations. A committed step with no
derivable compensation stays as it is: B3 does nothing extra for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from undobench_gym.agents.recovery.base import (
    Call,
    RecoveryWrapper,
    StepResult,
    annotate,
    is_ack,
    is_over,
    is_transient,
    load_obs,
    parse_call,
    status_of,
)
from undobench_gym.agents.recovery.derive import Compensation, compensations

DEFINITIVE_REFUSALS = (400, 403, 404, 410, 412)


@dataclass(frozen=True)
class Committed:
    call: Call
    compensation: Compensation
    arguments: dict[str, Any]


class Saga(RecoveryWrapper):
    """B3 (wrap it around `NaiveRetry` for the bounded retries of forward and undo calls)."""

    method = "B3"

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self.plan: dict[str, Compensation] = {}
        self.stack: list[Committed] = []
        self.compensated: list[dict[str, Any]] = []

    def on_reset(self) -> None:
        self.plan = compensations(self.tools)
        self.stack, self.compensated = [], []

    def handle(self, action: Any) -> StepResult:
        call = parse_call(action)
        spec = self.mutating(call)
        result = self.send(action)
        if call is None or spec is None or is_over(result):
            return result
        obs = load_obs(result[0])
        if is_ack(obs):
            comp = self.plan.get(call.tool)
            args = comp.arguments(call.arguments, obs.get("body")) if comp else None
            if comp is not None and args is not None:
                self.stack.append(Committed(call, comp, args))
            return result
        if not self.stack or not (is_transient(obs) or status_of(obs) in DEFINITIVE_REFUSALS):
            return result
        return self._compensate(result, call)

    def _compensate(self, failure: StepResult, failed: Call) -> StepResult:
        done = []
        while self.stack:
            entry = self.stack.pop()
            undo = {"tool": entry.compensation.tool, "arguments": entry.arguments}
            result = self.send(undo)
            obs = load_obs(result[0])
            done.append(
                {
                    "undid": entry.call.tool,
                    "with": entry.compensation.tool,
                    "arguments": entry.arguments,
                    "status": status_of(obs),
                    "ok": is_ack(obs),
                }
            )
            if is_over(result):
                self.compensated.extend(done)
                return result
        self.compensated.extend(done)
        text = annotate(
            failure[0],
            method=self.method,
            failed=failed.tool,
            compensated=done,
            note="this step failed for good, so the committed earlier steps were undone",
        )
        return text, failure[1], failure[2], failure[3], failure[4]
