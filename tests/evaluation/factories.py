"""Synthetic trial records for the evaluation tests (no services, no env)."""

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
    "reissued_after_commit",
)


def episode(
    success: bool = True,
    *,
    error: str | None = None,
    fault_fired: bool | None = True,
    transcript: list[dict[str, Any]] | None = None,
    **effects: int | None,
) -> dict[str, Any]:
    """An episode; `fault_fired` defaults to True (it is read on fault episodes only) and
    the transcript to empty (no call, so no unobserved outcome)."""
    unknown = set(effects) - set(EFFECT_KEYS)
    assert not unknown, unknown
    fx = {"physical": 1, "committed": 1, "semantic": 1}
    fx.update({k: 0 for k in EFFECT_KEYS if k not in fx})
    fx.update(effects)
    return {
        "success": success,
        "error": error,
        "fault_fired": fault_fired,
        "effects": fx,
        "transcript": [] if transcript is None else transcript,
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
) -> dict[str, Any]:
    """A pair; `control`/`fault` are an episode dict or just its success flag."""
    ctrl = control if isinstance(control, dict) else episode(control)
    flt = fault if isinstance(fault, dict) else episode(fault, fault_fired=True)
    return {
        "pair_id": pair_id or f"pair-{next(_ids)}",
        "workflow": workflow,
        "domain": domain,
        "method": method,
        "model": model,
        "framework": framework,
        "boundary": boundary,
        "scenario": scenario,
        "seed": seed,
        "control": ctrl,
        "fault": flt,
    }


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
