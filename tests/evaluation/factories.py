"""Synthetic trial records for the evaluation tests (no services, no env).

The records follow the trial-record contract, new fields included (`effects.unrequired`,
`effects.partial`, `finish_status`, `truncated`, `fault_outcome`, `method_applicable`);
`legacy()` strips those fields again, to build records written before they existed."""

from __future__ import annotations

import itertools
from typing import Any

_ids = itertools.count()

EFFECT_KEYS = (
    "physical",
    "committed",
    "semantic",
    "duplicates",
    "missing",
    "forbidden",
    "unrequired",
    "partial",
    "reissued_after_commit",
    "safe_reissues",
)
NEW_EFFECT_KEYS = ("unrequired", "partial", "safe_reissues")
NEW_EPISODE_KEYS = ("finish_status", "truncated", "truncated_reason", "fault_outcome")
#: What a fault of each declared boundary does when it happens as planned (as the env says).
MECHANISMS = {
    "PRE_MUTATION": "request_dropped",
    "POST_MUTATION_PRE_ACK": "reply_dropped_after_commit",
    "DURING_MUTATION": "crash_mid_mutation",
    "POST_ACK_PRE_CHECKPOINT": "worker_crash_after_ack",
    "DURING_COMPENSATION": "reply_dropped_after_commit",
}
_AUTO: Any = object()


def episode(
    success: bool = True,
    *,
    error: str | None = None,
    fault_fired: bool | None = True,
    transcript: list[dict[str, Any]] | None = None,
    finish_status: str | None = _AUTO,
    truncated: bool = False,
    truncated_reason: str | None = None,
    **effects: int | None,
) -> dict[str, Any]:
    """An episode; `fault_fired` defaults to True (it is read on fault episodes only), the
    transcript to empty (no call, so no unobserved outcome) and the finish status to the
    one that agrees with the outcome ("done" on success, "gave_up" otherwise; None when
    truncated)."""
    unknown = set(effects) - set(EFFECT_KEYS)
    assert not unknown, unknown
    fx = {"physical": 1, "committed": 1, "semantic": 1}
    fx.update({k: 0 for k in EFFECT_KEYS if k not in fx})
    fx.update(effects)
    if finish_status is _AUTO:
        finish_status = None if truncated else ("done" if success else "gave_up")
    if truncated and truncated_reason is None:
        truncated_reason = "max_steps"
    return {
        "success": success,
        "error": error,
        "fault_fired": fault_fired,
        "effects": fx,
        "transcript": [] if transcript is None else transcript,
        "finish_status": finish_status,
        "truncated": truncated,
        "truncated_reason": truncated_reason,
    }


def outcome(
    as_planned: bool = True,
    reason: str | None = None,
    *,
    mechanism: str | None = _AUTO,
    coin: bool | None = None,
    boundary: str = "POST_MUTATION_PRE_ACK",
    tool: str = "create_charge",
    nth: int = 1,
) -> dict[str, Any]:
    """A fault episode's `fault_outcome`; the mechanism follows the boundary (and the coin
    of an ambiguous scenario) when the fault happened as planned, else it is null."""
    if mechanism is _AUTO:
        if not as_planned:
            mechanism = None
        elif coin is not None:
            mechanism = "reply_dropped_after_commit" if coin else "request_dropped"
        else:
            mechanism = MECHANISMS[boundary]
    if not as_planned and reason is None:
        reason = "not_reached"
    return {
        "as_planned": as_planned,
        "reason": reason,
        "mechanism": mechanism,
        "coin": coin,
        "tool": tool,
        "nth": nth,
    }


def trial(
    control: bool | dict[str, Any] = True,
    fault: bool | dict[str, Any] = True,
    *,
    pair_id: str | None = None,
    workflow: str = "payments.refund",
    domain: str = "payments",
    method: str = "bare",
    model: str = "scripted",
    framework: str = "F1",
    boundary: str = "POST_MUTATION_PRE_ACK",
    scenario: str = "lost-ack",
    seed: int = 0,
    agent: str = "scripted",
    fault_outcome: dict[str, Any] | None = _AUTO,
    prefix_equivalent: bool | None = True,
    ambiguous: bool = False,
    method_applicable: bool | None = None,
) -> dict[str, Any]:
    """A pair; `control`/`fault` are an episode dict or just its success flag. The fault
    happened as planned unless `fault_outcome` says otherwise (or the fault episode dict
    already carries one); `method_applicable` None leaves the field out."""
    ctrl = control if isinstance(control, dict) else episode(control)
    flt = fault if isinstance(fault, dict) else episode(fault, fault_fired=True)
    ctrl.setdefault("fault_outcome", None)
    if fault_outcome is _AUTO:
        given = "fault_outcome" in flt
        fault_outcome = flt["fault_outcome"] if given else outcome(boundary=boundary)
    flt["fault_outcome"] = fault_outcome
    p: dict[str, Any] = {
        "pair_id": pair_id or f"pair-{next(_ids)}",
        "workflow": workflow,
        "domain": domain,
        "method": method,
        "agent": agent,
        "model": model,
        "framework": framework,
        "boundary": boundary,
        "scenario": scenario,
        "ambiguous": ambiguous,
        "seed": seed,
        "prefix_equivalent": prefix_equivalent,
        "control": ctrl,
        "fault": flt,
    }
    if method_applicable is not None:
        p["method_applicable"] = method_applicable
    return p


def legacy(pair: dict[str, Any]) -> dict[str, Any]:
    """The same pair as a record written before the new fields existed."""
    p = {k: v for k, v in pair.items() if k != "method_applicable"}
    for side in ("control", "fault"):
        e = {k: v for k, v in pair[side].items() if k not in NEW_EPISODE_KEYS}
        e["effects"] = {k: v for k, v in e["effects"].items() if k not in NEW_EFFECT_KEYS}
        p[side] = e
    return p


def method_arm(
    method: str,
    successes_per_workflow: list[int],
    seeds: int,
    *,
    control_successes_per_workflow: list[int] | None = None,
) -> list[dict[str, Any]]:
    """One method's pairs over len(successes_per_workflow) workflows x `seeds` seeds;
    the first k seeds of workflow i succeed in the fault run (k = successes_per_workflow[i])."""
    ctrl = control_successes_per_workflow or [seeds] * len(successes_per_workflow)
    out = []
    for w, (k, kc) in enumerate(zip(successes_per_workflow, ctrl, strict=True)):
        for s in range(seeds):
            out.append(
                trial(
                    control=s < kc,
                    fault=s < k,
                    method=method,
                    workflow=f"wf{w}",
                    seed=s,
                    pair_id=f"{method}-wf{w}-s{s}",
                )
            )
    return out
