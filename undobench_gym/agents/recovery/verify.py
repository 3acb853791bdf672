"""B6 verify-before-retry, and the read-back it shares with B5-P.

Before a mutating call is sent, read the collection or resource its effect would show in
(the reads `derive.read_plans` derives from the public schemas), through the proxy
like any call: the *baseline*. The fixtures carry history (a subscription already has
invoices, an account already has audit rows), so a row that matches the call proves
nothing unless it was not there before. After the call fails with an unknown outcome
(transport error or gateway 5xx), read again and look for a row that is new or changed
since the baseline and carries the call's argument values. Found: the call committed and
its acknowledgement was lost, so it is not sent again and the agent gets the row. Absent
(every read answered, none shows it): re-send, with the last read as the new baseline.
A read whose rows carry none of the call's arguments cannot show it either way and is left
out of the verdict. Inconclusive (a read failed, its baseline is missing, or no read could
show the effect) or no read derivable: do not re-send; an unknown outcome is left unknown
rather than risk a duplicate. A 404 is an empty read (nothing there yet), not a failure.

A record that was found may be half-done: a crash during a composite call (a payout paid
to one recipient of three) leaves it so. Where the schemas offer a tool that finishes such
a record (`derive.resumption_for`, `resumingHint`), the found record is resumed with it
before the agent gets the answer; on a finished record the resume changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from undobench_gym.agents.public_tools import PublicTool
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
from undobench_gym.agents.recovery.derive import (
    ReadPlan,
    blind,
    find_effect,
    read_plans,
    resumption_for,
    row_keys,
    sent_values,
)

#: Per read tool: the rows it showed before the call (None: that read failed).
Baseline = dict[str, frozenset[str] | None]


@dataclass
class Probe:
    """What reading the effect back said."""

    verdict: Literal["present", "absent", "inconclusive", "unverifiable", "over"]
    tools: list[str] = field(default_factory=list)
    row: dict[str, Any] | None = None
    status: int | None = None
    result: StepResult | None = None  # the episode ended during the probe
    seen: Baseline = field(default_factory=dict)  # what the reads showed: the next baseline


#: A read that found nothing at the address: an empty read, not a failed one.
NOT_FOUND = 404


def read_rows(obs: dict[str, Any]) -> Any:
    """The body of a read that answered (a 404 reads as empty); None when it failed."""
    if is_ack(obs):
        return obs.get("body")
    return [] if status_of(obs) == NOT_FOUND else None


def take_baseline(
    step: Callable[[Any], StepResult], plans: list[ReadPlan]
) -> tuple[Baseline, StepResult | None]:
    """Read every plan once before the call; the second item is set when the episode ended
    during a read (the call is then not sent)."""
    baseline: Baseline = {}
    for plan in plans:
        result = step({"tool": plan.tool, "arguments": plan.arguments})
        if is_over(result):
            return baseline, result
        body = read_rows(load_obs(result[0]))
        baseline[plan.tool] = None if body is None else row_keys(body)
    return baseline, None


def probe_effect(
    step: Callable[[Any], StepResult], call: Call, plans: list[ReadPlan], baseline: Baseline
) -> Probe:
    """Read `call`'s effect back with `plans` (stop at the first read that shows it).
    Present when a read shows it; else inconclusive when a read failed or had no baseline;
    else absent when at least one read could have shown it; else inconclusive."""
    if not plans:
        return Probe("unverifiable")
    values = sent_values(call.arguments)
    probe = Probe("inconclusive")
    failed = seeing = False
    for plan in plans:
        result = step({"tool": plan.tool, "arguments": plan.arguments})
        probe.tools.append(plan.tool)
        if is_over(result):
            return Probe("over", probe.tools, result=result)
        obs = load_obs(result[0])
        body = read_rows(obs)
        probe.seen[plan.tool] = None if body is None else row_keys(body)
        before = baseline.get(plan.tool)
        if body is None or before is None:
            failed = True
            continue
        if blind(body, values, plan):
            continue
        seeing = True
        row = find_effect(body, values, plan, before)
        if row is not None:
            return Probe("present", probe.tools, row, status_of(obs), seen=probe.seen)
    if seeing and not failed:
        probe.verdict = "absent"
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
                    "(a new or changed record carrying this call's arguments), so the call "
                    "was not sent again"
                ),
            },
        },
        default=str,
    )


def settle_found(
    step: Callable[[Any], StepResult],
    call: Call,
    probe: Probe,
    tools: dict[str, PublicTool],
    method: str,
) -> tuple[str, StepResult | None]:
    """The answer for a call whose effect the probe found, after finishing the found record
    with its resuming tool where one is derivable; the second item is set when the episode
    ended during the resume. A resume that is refused or fails is the answer (annotated):
    the record may be half-done, so the agent must not read the call as a success."""
    found = found_observation(call, probe, method)
    forward = tools.get(call.tool)
    resume = resumption_for(forward, tools) if forward is not None else None
    args = resume.arguments(call.arguments, probe.row) if resume is not None else None
    if resume is None or args is None:
        return found, None
    result = step({"tool": resume.tool, "arguments": args})
    if is_over(result):
        return "", result
    obs = load_obs(result[0])
    if not is_ack(obs):
        note = (
            f"reading back showed this call's record, possibly half-done; finishing it with "
            f"{resume.tool} failed (below), so it is neither done nor sent again"
        )
        text = json.dumps({**obs, "tool": call.tool}, default=str)
        return annotate(
            text, method=method, committed=True, resumed_with=resume.tool, note=note
        ), None
    answer = json.loads(found)
    answer["status"], answer["body"] = status_of(obs), obs.get("body")
    answer["recovery"]["resumed_with"] = resume.tool
    answer["recovery"]["note"] += f"; the record was then finished with {resume.tool}"
    return json.dumps(answer, default=str), None


def annotate_unknown(text: str, probe: Probe, method: str) -> str:
    why = {
        "unverifiable": "no read-only tool can show this call's effect",
        "inconclusive": "reading the effect back did not tell (a read failed or cannot show it)",
    }[probe.verdict]
    return annotate(
        text, method=method, committed=None, note=f"outcome unknown and not re-sent: {why}"
    )


class VerifyBeforeRetry(RecoveryWrapper):
    """B6: read before a mutating call; re-send it after an unknown outcome only once
    reading back shows its effect is absent; with no derivable read, do not re-send (safe).
    Failed reads are re-sent blindly."""

    method = "B6"

    def __init__(self, env: Any, retries: int = 2) -> None:
        super().__init__(env)
        self.retries = retries
        self.probes: list[dict[str, Any]] = []

    def on_reset(self) -> None:
        self.probes = []

    def handle(self, action: Any) -> StepResult:
        call = parse_call(action)
        spec = self.mutating(call)
        if call is None or spec is None:
            return self.send_bounded(action, self.retries if call else 0)[0]
        plans = self.plans(call, spec)
        baseline, ended = take_baseline(self.send, plans)
        if ended is not None:
            return ended
        result = self.send(action)
        tries = 0
        while not is_over(result) and is_transient(load_obs(result[0])):
            if tries >= self.retries:
                return result
            probe = probe_effect(self.send, call, plans, baseline)
            self.probes.append({"tool": call.tool, "verdict": probe.verdict, "by": probe.tools})
            if probe.result is not None:
                return probe.result
            if probe.verdict == "present":
                text, ended = settle_found(self.send, call, probe, self.tools, self.method)
                return ended if ended is not None else self.answer(text)
            if probe.verdict != "absent":
                text = annotate_unknown(result[0], probe, self.method)
                return text, result[1], result[2], result[3], result[4]
            baseline = probe.seen
            tries += 1
            result = self.send(action)
        return result

    def plans(self, call: Call, spec: PublicTool) -> list[ReadPlan]:
        return read_plans(spec, call.arguments, self.tools)
