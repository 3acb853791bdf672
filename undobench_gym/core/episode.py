"""The running episode, typed: what `reset` sets up and `step` accumulates."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from undobench_gym.contract import CommitRow, WireLog
from undobench_gym.contract.specs import FaultScenario, FaultTarget, Verdict, WorkflowSpec
from undobench_gym.core.actions import ToolCall, call_identity
from undobench_gym.core.catalog import ToolSpec
from undobench_gym.core.oracles import content_identity
from undobench_gym.core.writer import WriterRun


@dataclass
class CallRecord:
    """One tool call the env made, as the oracles see it."""

    tool: str
    read_only: bool
    identity: str | None  # semantic identity of a mutating call (for re-issue counts)
    status: int | None = None  # HTTP status; None when the transport failed
    timed_out: bool = False  # the env's HTTP client gave up waiting for the answer
    #: The Idempotency-Key it carried, where the service honours one (else None).
    key: str | None = None
    #: It carried a precondition (expected_head, if_match, ...): conditional on the state.
    guarded: bool = False


@dataclass
class WorkerCrash:
    """POST_ACK_PRE_CHECKPOINT: the worker dies right after the target's acknowledgement."""

    target: FaultTarget
    #: Set when the crash happened (the fault record), or the target was refused (missed).
    fired: dict[str, Any] | None = None
    missed: dict[str, Any] | None = None
    #: The step that crashed the worker has not been reported in `info` yet.
    pending: bool = False


@dataclass
class Outcome:
    """What the env read from the stack when the episode ended."""

    verdict: Verdict
    state_hash: str
    wire: WireLog
    commit_log: list[CommitRow]
    wall_ms: float
    fault_outcome: dict[str, Any] | None


@dataclass
class Episode:
    public_id: str  # opaque, pair-level: the same in the control and the fault episode
    wire_id: str  # the proxy's episode id: differs between the two
    seed: int
    workflow: WorkflowSpec
    scenario: FaultScenario | None
    #: The hidden coin of an ambiguous scenario (None otherwise).
    coin: bool | None
    worker_crash: WorkerCrash | None
    params: dict[str, Any]
    tools: dict[str, ToolSpec]
    #: The hidden coins of a cascade's later faults (None where not ambiguous).
    coins: tuple[bool | None, ...] = ()
    #: The task's concurrent writer (None: the task has none).
    writer: WriterRun | None = None
    steps: int = 0
    transcript: list[dict[str, Any]] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    tool_counts: dict[str, int] = field(default_factory=dict)
    finish_status: str | None = None
    truncated_reason: str | None = None
    done: bool = False
    outcome: Outcome | None = None
    t0: float = field(default_factory=time.monotonic)

    def record_call(self, call: ToolCall, spec: ToolSpec, *, keys_honoured: bool) -> CallRecord:
        """How the oracles will see `call`: its identity by content, the key it carried
        where the service honours keys (natively, or on every route: `keys_honoured`) and
        whether a precondition guarded it."""
        identity = None
        if not spec.read_only:
            identity = call_identity(
                call,
                spec,
                lambda op, ident: content_identity(
                    op, ident, call.arguments, self.workflow, self.params
                ),
            )
        key = call.arguments.get("idempotency_key") if spec.accepts_key else None
        honoured = spec.idempotency == "native" or keys_honoured
        return CallRecord(
            tool=call.tool,
            read_only=spec.read_only,
            identity=identity,
            key=str(key) if key is not None and honoured else None,
            guarded=any(call.arguments.get(p) is not None for p in spec.preconditions),
        )

    def count_call(self, record: CallRecord) -> int:
        """Log a call; returns how many calls of its tool this episode has made so far."""
        self.calls.append(record)
        self.tool_counts[record.tool] = self.tool_counts.get(record.tool, 0) + 1
        return self.tool_counts[record.tool]
