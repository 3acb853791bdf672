"""B6 verify-before-retry, and the probe it shares with B5-P.

After a mutating call fails with an unknown outcome (transport error or gateway 5xx), read
the effect back with the read-only tools derived for that call (`verifiers_for`), through
the proxy like any call, and look for a row that carries the call's identity values. Found:
the call committed and its acknowledgement was lost, so it is not sent again and the agent
gets the row. Absent (every verifier answered and none shows it): re-send. Inconclusive (a
verifier failed too) or no verifier derivable: do not re-send; an unknown outcome is left
unknown rather than risk a duplicate.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from undobench_gym.catalog import ToolSpec

from .recovery_common import (
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
from .recovery_derive import find_effect, intent_values, required_params, verifiers_for


@dataclass
class Probe:
    """What reading the effect back said."""

    verdict: Literal["present", "absent", "inconclusive", "unverifiable", "over"]
    tools: list[str] = field(default_factory=list)
    row: dict[str, Any] | None = None
    status: int | None = None
    result: StepResult | None = None  # the episode ended during the probe


def probe_effect(
    step: Callable[[Any], StepResult],
    call: Call,
    spec: ToolSpec,
    tools: dict[str, ToolSpec],
) -> Probe:
    """Read `call`'s effect back through the derived read-only tools (stop at the first hit)."""
    values = intent_values(spec, call.arguments)
    plans = []
    for verifier in verifiers_for(spec, tools):
        args = verifier.arguments(call.arguments, required_params(tools[verifier.tool]))
        if args is not None and values:
            plans.append((verifier.tool, args))
    if not plans:
        return Probe("unverifiable")
    probe = Probe("absent")
    for tool, args in plans:
        result = step({"tool": tool, "arguments": args})
        probe.tools.append(tool)
        if is_over(result):
            return Probe("over", probe.tools, result=result)
        obs = load_obs(result[0])
        if not is_ack(obs):
            probe.verdict = "inconclusive"
            continue
        row = find_effect(obs.get("body"), values)
        if row is not None:
            return Probe("present", probe.tools, row, status_of(obs))
    return probe


def found_observation(call: Call, probe: Probe, method: str) -> str:
    """What the agent gets when the probe found the effect: the row that shows it, under the
    read's status, with a note saying the call was not sent again."""
    return json.dumps(
        {
            "tool": call.tool,
            "status": probe.status,
            "body": probe.row,
            "recovery": {
                "method": method,
                "committed": True,
                "verified_by": probe.tools[-1],
                "note": (
                    "the response to this call was lost; reading it back showed the effect "
                    "exists, so the call was not sent again"
                ),
            },
        },
        default=str,
    )


def annotate_unknown(text: str, probe: Probe, method: str) -> str:
    why = {
        "unverifiable": "no read-only tool can show this call's effect",
        "inconclusive": "reading the effect back failed too",
    }[probe.verdict]
    return annotate(
        text, method=method, committed=None, note=f"outcome unknown and not re-sent: {why}"
    )


class VerifyBeforeRetry(RecoveryWrapper):
    """B6: re-send a failed mutating call only once reading back shows its effect is absent;
    with no derivable verifier, do not re-send (safe). Failed reads are re-sent blindly."""

    method = "B6"

    def __init__(self, env: Any, retries: int = 2) -> None:
        super().__init__(env)
        self.retries = retries
        self.probes: list[dict[str, Any]] = []

    def on_reset(self) -> None:
        self.probes = []

    def step(self, action: Any) -> StepResult:
        call = parse_call(action)
        spec = self.mutating(call)
        if call is None or spec is None:
            return self.send_bounded(action, self.retries if call else 0)[0]
        result = self.send(action)
        tries = 0
        while not is_over(result) and is_transient(load_obs(result[0])):
            if tries >= self.retries:
                return result
            probe = probe_effect(self.send, call, spec, self.tools)
            self.probes.append({"tool": call.tool, "verdict": probe.verdict, "by": probe.tools})
            if probe.result is not None:
                return probe.result
            if probe.verdict == "present":
                return self.answer(found_observation(call, probe, self.method))
            if probe.verdict != "absent":
                text = annotate_unknown(result[0], probe, self.method)
                return text, result[1], result[2], result[3], result[4]
            tries += 1
            result = self.send(action)
        return result
