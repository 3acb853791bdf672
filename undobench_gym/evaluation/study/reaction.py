"""What a model does by itself right after a fault's error: the next action of its fault
episodes under `bare`, where no recovery wrapper acts, so every step after the error is
the model's own. The recovery rates cannot say this: a `bare` pair whose lost
acknowledgement hid a committed effect scores as recovered whether the model re-sent,
read, moved on or stopped. The paper's models retried by themselves under every method;
whether a model does is the first thing its recovery figures rest on.

Only pairs that count in CRSR are read (scored, control succeeded) and only faults the
agent could see (a worker crash after the acknowledgement shows it nothing)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from undobench_gym.core.catalog import domain
from undobench_gym.evaluation.indicators import control_ok, exclusion, is_infra_error
from undobench_gym.evaluation.outcomes import action_identity
from undobench_gym.evaluation.records import (
    PairLike,
    as_record,
    as_records,
    injected,
    steps,
)

#: The next action after the error, in the table's column order.
REACTIONS = (
    "same call",
    "read",
    "resume",
    "undo",
    "other call",
    "done",
    "gave_up",
    "escalated",
    "nothing",
)
METHOD = "bare"


def _is_error(observation: Any) -> bool:
    if not isinstance(observation, dict):
        return False
    status = observation.get("status")
    return observation.get("error") is not None or (isinstance(status, int) and status >= 400)


def reaction(p: PairLike) -> tuple[str, bool] | None:
    """(the model's next action after it first saw the fault's error, whether it sent the
    faulted call again at any later point); None where the pair does not tell."""
    r = as_record(p)
    if r.method != METHOD or is_infra_error(r) or exclusion(r) is not None:
        return None
    if not control_ok(r):
        return None
    fault = injected(r.fault)
    if fault is None or fault.visible_error is None:
        return None
    taken = steps(r.fault)
    seen = next(
        (
            i
            for i, s in enumerate(taken)
            if s.action.get("tool") == fault.tool and _is_error(s.observation)
        ),
        None,
    )
    if seen is None:
        return None
    # The same call is the same tool with the same arguments (a fresh idempotency key
    # aside): a reworded one is another call, whatever its tool.
    failed = action_identity(taken[seen].action)
    resent = any(
        action_identity(s.action) == failed
        and isinstance(s.observation, dict)
        and "tool" in s.observation  # it went out as an HTTP call
        for s in taken[seen + 1 :]
    )
    if seen + 1 >= len(taken):
        return "nothing", resent
    action = taken[seen + 1].action
    tool = action.get("tool")
    if tool == "finish":
        status = (action.get("arguments") or {}).get("status")
        return (str(status) if status in REACTIONS else "other call"), resent
    if action_identity(action) == failed:
        return "same call", resent
    return _kind(r.domain, str(tool)), resent


def _kind(domain_name: str, tool: str) -> str:
    """A call's kind by the tool's public annotations (a tool the domain lacks: other)."""
    spec = domain(domain_name).tools.get(tool)
    if spec is None:
        return "other call"
    if spec.read_only:
        return "read"
    if spec.resumption:  # resumingHint: finishes what a crash left half-done
        return "resume"
    if spec.compensation:  # compensatingHint: undoes an earlier effect
        return "undo"
    return "other call"


def counts(pairs: Sequence[PairLike]) -> dict[str, Counter[str]]:
    """Per boundary (and "all"): how many episodes took each next action, and `resent`."""
    out: dict[str, Counter[str]] = {}
    for r in as_records(pairs):
        found = reaction(r)
        if found is None:
            continue
        kind, resent = found
        for key in (str(r.boundary), "all"):
            c = out.setdefault(key, Counter())
            c[kind] += 1
            c["episodes"] += 1
            c["resent"] += resent
    return out


def table(pairs: Sequence[PairLike]) -> list[str]:
    """The markdown table: per boundary, what the model did next after the error."""
    by = counts(pairs)
    if not by:
        return [f"(no `{METHOD}` fault episode that counts in CRSR showed its fault's error)"]
    lines = [
        "| boundary | episodes | " + " | ".join(REACTIONS) + " | re-sent the call at all |",
        "|---|---|" + "---|" * (len(REACTIONS) + 1),
    ]
    for name in [*sorted(k for k in by if k != "all"), "all"]:
        c = by[name]
        lines.append(
            f"| {name} | {c['episodes']} | "
            + " | ".join(str(c[k]) for k in REACTIONS)
            + f" | {c['resent']} |"
        )
    return lines
