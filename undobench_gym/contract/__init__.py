"""The wire contract between the env, the fault proxy and the services.

They run in three processes (or containers) and agree only on what is here: header names,
exit codes, idempotency modes, fault actions, and the typed shapes of the fault plan, a
wire event, a commit-log row and the admin state. This module imports nothing from the
project, so every layer may import it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: Request header the proxy sets to arm a named crash point in the service.
CRASH_HEADER = "x-undobench-crash-point"
#: Prefix of every harness header; the proxy strips agent-sent ones (no forged faults).
HEADER_PREFIX = "x-undobench-"
#: Prefix of the OpenAPI extension keys that label routes (op, effect class, identity).
LABEL_PREFIX = "x-undobench"
#: The standard header of the IETF httpapi Idempotency-Key draft.
IDEMPOTENCY_HEADER = "Idempotency-Key"
#: A service that exits at an armed crash point exits with this code (EX_TEMPFAIL): the
#: runtime restarts it and does not count the exit as unplanned.
CRASH_EXIT_CODE = 75

#: native: keys on the endpoints that declare them; all: on every mutating endpoint;
#: none: keys are ignored.
IdempotencyMode = Literal["native", "all", "none"]
IDEMPOTENCY_MODES: tuple[IdempotencyMode, ...] = ("native", "all", "none")

#: What the proxy does at the targeted call: never forward it; forward it and lose the
#: 2xx reply; or forward it with a crash point armed. `mark_ack` changes nothing on the
#: wire: it only notes the 2xx answer of the targeted call, where the env crashes the
#: agent's worker (POST_ACK_PRE_CHECKPOINT), so that a later fault of the schedule can
#: follow it.
FaultAction = Literal["drop_request", "drop_response", "crash", "mark_ack"]
FAULT_ACTIONS: tuple[FaultAction, ...] = ("drop_request", "drop_response", "crash", "mark_ack")


class VisibleError(StrEnum):
    """What a real HTTP client sees; nothing says "injected"."""

    CONNECTION_RESET = "connection_reset"
    TIMEOUT = "timeout"
    HTTP_502 = "http_502"
    HTTP_503 = "http_503"
    #: A load balancer's timeout: after the backend committed, as often as before.
    HTTP_504 = "http_504"


class FaultPlan(BaseModel):
    """A concrete plan: the env has already resolved the boundary and the hidden coin to
    an action. It targets the n-th call of one named mutating tool, or (a later fault of
    a schedule, `after` set) the next mutating call after fault `after` of the schedule
    fired (0: the first plan), whatever its tool."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scenario: str
    action: FaultAction
    tool: str | None = Field(default=None, min_length=1)
    nth: int = Field(default=1, ge=1)
    after: int | None = Field(default=None, ge=0)
    visible_error: VisibleError = VisibleError.CONNECTION_RESET
    crash_point: str | None = None
    timeout_s: float = Field(default=5.0, ge=0)
    #: Ambiguous mode: the failure is shown no earlier than this long after the request
    #: arrived, on both sides of the hidden coin, so that latency does not tell whether
    #: the call was forwarded (and committed) or dropped.
    pad_s: float = Field(default=0.0, ge=0)

    @model_validator(mode="after")
    def _crash_needs_a_point(self) -> FaultPlan:
        if self.action == "crash" and not self.crash_point:
            raise ValueError("a crash plan needs a crash_point")
        if (self.tool is None) == (self.after is None):
            raise ValueError("a plan targets a named tool or follows fault `after`, one of them")
        return self

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FaultPlan:
        """Parse a plan as sent over the control API; a bad one raises ValueError."""
        return cls.model_validate(data)

    def matches(self, tool: str | None, nth: int, read_only: bool) -> bool:
        """Only the targeted call of a mutating tool: a fault never lands on a read (a
        follow-up plan, `after` set, is matched by the proxy's schedule instead)."""
        return not read_only and tool == self.tool and nth == self.nth


class EpisodeStart(BaseModel):
    """POST /control/episode: the proxy starts counting calls for a new episode."""

    model_config = ConfigDict(extra="forbid")

    episode_id: str = Field(min_length=1)
    plan: FaultPlan | None = None
    #: The later faults of a schedule (a cascade), in order: plan k + 1 of the schedule.
    then: list[FaultPlan] = Field(default_factory=list)

    @model_validator(mode="after")
    def _follow_earlier_faults(self) -> EpisodeStart:
        if self.then and self.plan is None:
            raise ValueError("later faults need a first one")
        for k, plan in enumerate(self.then, start=1):
            if plan.after is not None and plan.after >= k:
                raise ValueError(f"fault {k} can only follow an earlier fault, not {plan.after}")
        return self


class WireEvent(BaseModel):
    """One call as the proxy saw it (recorded when the call finished)."""

    model_config = ConfigDict(extra="allow")

    index: int | None = None
    tool: str | None = None
    nth: int | None = None
    method: str | None = None
    path: str | None = None
    read_only: bool | None = None
    outcome: str | None = None
    status: int | None = None
    upstream_status: int | None = None
    forwarded: bool | None = None
    #: The fault record, on the call the fault hit.
    fault: dict[str, Any] | None = None
    ms: float | None = None


class WireLog(BaseModel):
    """GET /control/wire: the episode's calls and whether (and how) its fault fired."""

    model_config = ConfigDict(extra="allow")

    episode_id: str | None = None
    calls: int = 0
    fault_fired: bool = False
    fault: dict[str, Any] | None = None
    #: The targeted call when it was made but the fault could not happen as planned.
    target: dict[str, Any] | None = None
    #: Per fault of the schedule (the first one included): its record once it fired,
    #: else None; and the targeted call when it could not happen as planned.
    faults: list[dict[str, Any] | None] = Field(default_factory=list)
    targets: list[dict[str, Any] | None] = Field(default_factory=list)
    in_flight: int = 0
    events: list[WireEvent] = Field(default_factory=list)
    dropped_events: int = 0


class CommitRow(BaseModel):
    """One committed mutation, as GET /admin/commit-log returns it."""

    model_config = ConfigDict(extra="allow")

    seq: int
    op: str
    effect_class: str
    identity: str  # canonical JSON of the identity fields
    args: dict[str, Any] = Field(default_factory=dict)
    at: str = ""
    idempotency_key: str | None = None
    compensation: bool = False
    #: None: the agent's (through the proxy); "writer": the concurrent writer's.
    actor: str | None = None
    #: The id of what it created (a charge, a commit), for an undo to name.
    ref: str | None = None
    #: What it undoes in full: {"op", "ref"} or {"op", "identity"} (the domain's inverse).
    undoes: dict[str, Any] | None = None


class AdminState(BaseModel):
    """GET /admin/state: the final state the state oracle reads, and its hash."""

    model_config = ConfigDict(extra="allow")

    hash: str
    tables: dict[str, list[dict[str, Any]]]
