"""Boundary semantics, in one place: what each fault boundary does to the targeted call,
whether it happened as planned, and by which mechanism.

Five boundaries, two mechanisms. Four are wire faults: the env resolves the scenario (and
the hidden coin of ambiguous mode) to a `FaultPlan` that the proxy carries out at the
n-th call of the targeted mutating tool: the request is never forwarded (PRE_MUTATION);
the reply of a 2xx commit is lost (POST_MUTATION_PRE_ACK); a crash point armed in the
service exits it mid-operation, or a step of a multi-call composite loses its reply
(DURING_MUTATION); a compensating call is lost before or after its commit
(DURING_COMPENSATION). The fifth, POST_ACK_PRE_CHECKPOINT, is not on the wire: the call
commits and is acknowledged, then the agent's worker "crashes" (`WorkerCrash`); the env
marks that step and the harness (`pairing.run_episode`) rolls the agent back to its last
checkpoint (B1, `undobench_gym/agents/recovery/checkpoint.py`, keeps harness-side checkpoints).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from undobench_gym.contract import FaultAction, FaultPlan, WireLog
from undobench_gym.contract.seeding import derive_seed
from undobench_gym.contract.specs import Boundary, FaultScenario, LaterFault
from undobench_gym.core.episode import WorkerCrash

#: Ambiguous faults are shown no earlier than this after the request arrived, whichever way
#: the hidden coin fell: a forwarded (committed) call takes longer than a dropped one, and
#: the difference must not tell an agent the coin. Above the slowest mutating call's
#: latency measured here (benchmarks/bench_ambiguous_latency.py).
AMBIGUOUS_PAD_S = 0.25
#: How much longer than the client's own timeout a `timeout` fault holds the flow.
HOLD_MARGIN_S = 0.5

#: The fault record's stage -> the mechanism by which the fault happened as planned.
MECHANISMS = {
    "request": "request_dropped",
    "response": "reply_dropped_after_commit",
    "crash": "crash_mid_mutation",
    "post_ack": "worker_crash_after_ack",
}


def wire_action(
    scenario: FaultScenario | LaterFault, committed_coin: bool | None = None
) -> FaultAction:
    """The proxy's action for a wire fault; `committed_coin` is ambiguous mode's hidden
    coin (heads: the call commits and its reply is lost; tails: it is never forwarded)."""
    if scenario.ambiguous:
        return "drop_response" if committed_coin else "drop_request"
    match scenario.boundary:
        case Boundary.PRE_MUTATION:
            return "drop_request"
        case Boundary.DURING_MUTATION:
            crash = isinstance(scenario, FaultScenario) and scenario.crash_point
            return "crash" if crash else "drop_response"
        case Boundary.DURING_COMPENSATION:
            return "drop_response" if scenario.compensation_commits else "drop_request"
        case _:
            return "drop_response"


@dataclass(frozen=True)
class FaultSetup:
    """An episode's fault, resolved: a wire plan for the proxy, or a worker crash."""

    plan: FaultPlan | None = None
    worker_crash: WorkerCrash | None = None
    #: The hidden coin, recorded only for ambiguous scenarios.
    coin: bool | None = None
    #: A cascade's later faults, resolved, and their hidden coins (None: not ambiguous).
    then: tuple[FaultPlan, ...] = ()
    coins: tuple[bool | None, ...] = ()


def _later(
    scenario: FaultScenario, seed: int, workflow_id: str, http_timeout: float
) -> tuple[tuple[FaultPlan, ...], tuple[bool | None, ...]]:
    """The later faults' plans; each has its own coin, a pure function of the seed."""
    plans, coins = [], []
    for k, later in enumerate(scenario.then, start=1):
        coin = bool(derive_seed(seed, workflow_id, scenario.id, "coin", k) & 1)
        plans.append(
            FaultPlan(
                scenario=scenario.id,
                action=wire_action(later, coin),
                tool=later.target.tool if later.target else None,
                nth=later.target.nth if later.target else 1,
                after=later.after,
                visible_error=later.visible_error,
                timeout_s=http_timeout + HOLD_MARGIN_S,
                pad_s=AMBIGUOUS_PAD_S if later.ambiguous else 0.0,
            )
        )
        coins.append(coin if later.ambiguous else None)
    return tuple(plans), tuple(coins)


def resolve(
    scenario: FaultScenario | None, seed: int, workflow_id: str, http_timeout: float
) -> FaultSetup:
    """The concrete faults of one episode; each coin is a pure function of the seed."""
    if scenario is None:
        return FaultSetup()
    then, coins = _later(scenario, seed, workflow_id, http_timeout)
    if scenario.boundary is Boundary.POST_ACK_PRE_CHECKPOINT:
        crash = WorkerCrash(target=scenario.target)
        if not then:
            return FaultSetup(worker_crash=crash)
        # The proxy notes the acknowledgement the worker dies on, so later faults follow it.
        mark = FaultPlan(
            scenario=scenario.id,
            action="mark_ack",
            tool=scenario.target.tool,
            nth=scenario.target.nth,
        )
        return FaultSetup(plan=mark, worker_crash=crash, then=then, coins=coins)
    coin = bool(derive_seed(seed, workflow_id, scenario.id, "coin") & 1)
    plan = FaultPlan(
        scenario=scenario.id,
        action=wire_action(scenario, coin),
        tool=scenario.target.tool,
        nth=scenario.target.nth,
        visible_error=scenario.visible_error,
        crash_point=scenario.crash_point,
        timeout_s=http_timeout + HOLD_MARGIN_S,
        pad_s=AMBIGUOUS_PAD_S if scenario.ambiguous else 0.0,
    )
    return FaultSetup(plan=plan, coin=coin if scenario.ambiguous else None, then=then, coins=coins)


def observe_call(
    crash: WorkerCrash, scenario_id: str, *, tool: str, nth: int, index: int, status: int
) -> None:
    """After an answered call: crash the worker if it was the target and was acknowledged."""
    if crash.fired is not None or tool != crash.target.tool or nth != crash.target.nth:
        return
    if not 200 <= status < 300:
        # Refused: nothing was acknowledged, so there is no progress to lose.
        if crash.missed is None:
            crash.missed = {
                "reason": "refused",
                "index": index,
                "tool": tool,
                "upstream_status": status,
            }
        return
    crash.fired = {
        "scenario": scenario_id,
        "action": "worker_crash",
        "stage": "post_ack",
        "index": index,
        "tool": tool,
        "upstream_status": status,
        "committed": True,
    }
    crash.pending = True


def fault_record(crash: WorkerCrash | None, wire: WireLog) -> dict[str, Any] | None:
    """The fault as it fired (the proxy's record, or the worker crash), if it did."""
    if crash is not None and crash.fired is not None:
        return crash.fired
    return wire.fault


def fault_fired(
    scenario: FaultScenario | None, crash: WorkerCrash | None, wire: WireLog
) -> bool | None:
    """None in a control episode."""
    if scenario is None:
        return None
    return bool(wire.fault_fired) or (crash is not None and crash.fired is not None)


def fault_outcome(
    scenario: FaultScenario | None,
    crash: WorkerCrash | None,
    wire: WireLog,
    coin: bool | None,
    coins: tuple[bool | None, ...] = (),
) -> dict[str, Any] | None:
    """Whether the fault happened as planned, and by which mechanism.

    As planned: it fired on the targeted call of the named mutating tool with the planned
    outcome: a dropped request; a reply lost after a 2xx commit; a crash at the crash
    point; a worker crash after a 2xx acknowledgement. A refused target call has no commit
    to lose, and a composite that answered never reached its crash point."""
    if scenario is None:
        return None
    if crash is not None and crash.fired is not None:
        fired: dict[str, Any] | None = crash.fired
    elif crash is not None:
        fired = None  # a cascade's proxy only noted the acknowledgement; the env crashes
    else:
        fired = wire.fault if wire.fault_fired else None
    missed = (crash.missed if crash is not None else None) or wire.target
    mechanism = MECHANISMS.get(str(fired.get("stage"))) if fired is not None else None
    reason = None
    if mechanism is None:
        reason = missed["reason"] if missed else "not_reached"
    out: dict[str, Any] = {
        "as_planned": mechanism is not None,
        "reason": reason,
        "mechanism": mechanism,
        "coin": coin,
        "tool": scenario.target.tool,
        "nth": scenario.target.nth,
    }
    if scenario.then:
        out["schedule"] = scenario.schedule_kind
        first = {**out, "index": fired.get("index") if fired else None}
        out["faults"] = schedule_outcomes(scenario, wire, first, coins)
    return out


def schedule_outcomes(
    scenario: FaultScenario,
    wire: WireLog,
    first: dict[str, Any],
    coins: tuple[bool | None, ...],
) -> list[dict[str, Any]]:
    """Per fault of a schedule: whether it happened as planned, by which mechanism, on
    which call (the first fault's outcome is `first`, judged as for one fault)."""
    out = [{"fault": 0, "boundary": scenario.boundary.value, **first}]
    for k, later in enumerate(scenario.then, start=1):
        fired = wire.faults[k] if k < len(wire.faults) else None
        missed = wire.targets[k] if k < len(wire.targets) else None
        mechanism = MECHANISMS.get(str(fired.get("stage"))) if fired else None
        out.append(
            {
                "fault": k,
                "boundary": later.boundary.value,
                "as_planned": mechanism is not None,
                "reason": None if mechanism else (missed or {}).get("reason", "not_reached"),
                "mechanism": mechanism,
                "coin": coins[k - 1] if k - 1 < len(coins) else None,
                "index": fired.get("index") if fired else None,
                "tool": fired.get("tool") if fired else None,
                "after": later.after,
            }
        )
    return out


def target_commits(scenario: FaultScenario, coin: bool | None = None) -> bool | None:
    """Whether the targeted call commits when the fault happens as planned (None: it
    depends on the call: a crash point leaves part of a composite, and a worker crash
    comes after a commit whatever the call)."""
    if scenario.ambiguous:
        return bool(coin)
    return {
        Boundary.PRE_MUTATION: False,
        Boundary.POST_MUTATION_PRE_ACK: True,
        Boundary.DURING_COMPENSATION: scenario.compensation_commits,
    }.get(scenario.boundary)
