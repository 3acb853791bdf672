"""Typed specifications: workflows, fault scenarios, and the verdict of an episode."""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from undobench_gym.contract import VisibleError as VisibleError  # defined with the wire contract


class Boundary(StrEnum):
    PRE_MUTATION = "PRE_MUTATION"
    DURING_MUTATION = "DURING_MUTATION"
    POST_MUTATION_PRE_ACK = "POST_MUTATION_PRE_ACK"
    POST_ACK_PRE_CHECKPOINT = "POST_ACK_PRE_CHECKPOINT"
    DURING_COMPENSATION = "DURING_COMPENSATION"


class EffectClass(StrEnum):
    ADDITIVE = "additive"
    SET = "set"
    CREATE_UNIQUE = "create_unique"
    IRREVERSIBLE_SEND = "irreversible_send"


class FaultTarget(BaseModel):
    """The n-th call (1-based) of a named *mutating* tool.

    Never a global call index: an agent that reads first would move a global index onto
    a read-only call, and a fault on a read is not the fault the scenario plans."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    tool: str
    nth: int = Field(default=1, ge=1)


class LaterFault(BaseModel):
    """A later fault of a schedule (a cascade): on the n-th call of a named mutating tool
    (`target`), or on the next mutating call after fault `after` of the schedule fired
    (0: the scenario's own first fault), e.g. the retry of a lost call. Wire faults only:
    a worker crash is a schedule's first fault, never a later one."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    boundary: Boundary
    target: FaultTarget | None = None
    after: int | None = Field(default=None, ge=0)
    visible_error: VisibleError = VisibleError.CONNECTION_RESET
    ambiguous: bool = False
    compensation_commits: bool = False

    @model_validator(mode="after")
    def _one_target(self) -> LaterFault:
        if (self.target is None) == (self.after is None):
            raise ValueError("a later fault has a target or follows fault `after`, one of them")
        if self.boundary is Boundary.POST_ACK_PRE_CHECKPOINT:
            raise ValueError("a worker crash can only be a schedule's first fault")
        if self.ambiguous and self.boundary not in (
            Boundary.PRE_MUTATION,
            Boundary.POST_MUTATION_PRE_ACK,
        ):
            raise ValueError("ambiguous mode hides PRE_MUTATION vs POST_MUTATION_PRE_ACK")
        return self


class FaultScenario(BaseModel):
    model_config = ConfigDict(frozen=True)
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$")
    boundary: Boundary
    target: FaultTarget
    visible_error: VisibleError = VisibleError.CONNECTION_RESET
    ambiguous: bool = False
    #: DURING_MUTATION: a named crash point inside the service; None = transport fault after
    #: the target call (one step of a multi-call composite) committed.
    crash_point: str | None = None
    #: DURING_COMPENSATION: whether the compensating call is lost before or after it commits.
    compensation_commits: bool = False
    description: str = ""
    #: The later faults of a schedule: fault k + 1 is `then[k]`; empty for one fault.
    then: tuple[LaterFault, ...] = ()

    @property
    def schedule_kind(self) -> Literal["single", "cascade"]:
        """How the scenario's faults are scheduled (reports break metrics down by it)."""
        return "cascade" if self.then else "single"

    @property
    def fault_count(self) -> int:
        return 1 + len(self.then)

    @classmethod
    def on(
        cls, id: str, boundary: Boundary, tool: str, nth: int = 1, **options: Any
    ) -> FaultScenario:
        """Scenario `id` at `boundary` on the n-th call of `tool` (the workflows' short form)."""
        return cls(id=id, boundary=boundary, target=FaultTarget(tool=tool, nth=nth), **options)

    @model_validator(mode="after")
    def _consistent(self) -> FaultScenario:
        if self.crash_point and self.boundary is not Boundary.DURING_MUTATION:
            raise ValueError("crash_point only applies to DURING_MUTATION")
        if self.crash_point and self.visible_error not in (
            VisibleError.CONNECTION_RESET,
            VisibleError.TIMEOUT,
        ):
            raise ValueError("a crashed service shows as connection_reset or timeout")
        if self.ambiguous and self.boundary not in (
            Boundary.PRE_MUTATION,
            Boundary.POST_MUTATION_PRE_ACK,
        ):
            raise ValueError("ambiguous mode hides PRE_MUTATION vs POST_MUTATION_PRE_ACK")
        for k, later in enumerate(self.then, start=1):
            if later.after is not None and later.after >= k:
                raise ValueError(f"fault {k} can only follow an earlier fault, not {later.after}")
        return self


class EffectExpectation(BaseModel):
    """A semantic effect: operation plus identity; identity values may be `{param}` templates.

    The identity is what makes the effect the same effect in its domain (who, what, how
    much, where), never free text. `count` is the task's required multiplicity: two
    charges the task asks for are two, a third is a duplicate. In `allowed_effects` the
    identity may name a subset of the fields (`{}` allows any identity of the operation)."""

    op: str
    identity: dict[str, Any]
    count: int = Field(default=1, ge=1)
    #: Free-text arguments judged by what the task asked them to carry: {argument: facts}.
    #: A committed effect of this op whose identity fields match and whose text carries
    #: every fact (case-insensitive) IS this effect, however worded; one that does not is
    #: another message, identified by its normalised text (docs/validity.md).
    mentions: dict[str, list[str]] = Field(default_factory=dict)


class StatePredicate(BaseModel):
    """A check on the final state, on values: `count` rows matching `where`, or a `field`
    of the one row matching `where` compared to `value`."""

    description: str
    table: str
    where: dict[str, Any] = Field(default_factory=dict)
    field: str | None = None
    op: Literal["eq", "ne", "ge", "le", "count"] = "eq"
    value: Any = None

    @classmethod
    def count(
        cls, description: str, table: str, where: dict[str, Any], value: Any = 1
    ) -> StatePredicate:
        """Exactly `value` rows of `table` match `where` (`value` may be a `{param}`
        template: a fixture baseline plus what the task adds)."""
        return cls(description=description, table=table, where=where, op="count", value=value)

    @classmethod
    def field_is(
        cls, description: str, table: str, where: dict[str, Any], field: str, value: Any
    ) -> StatePredicate:
        """The one row of `table` matching `where` has `field` equal to `value`."""
        return cls(description=description, table=table, where=where, field=field, value=value)


class GoldStep(BaseModel):
    """One tool call of the gold plan. Argument strings may hold `{param}` templates or
    `@N.path` references into the body of the N-th step's response (0-based)."""

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ConcurrentWriter(BaseModel):
    """Another client of the same services: right after the agent's `nth` call
    of `tool` (a read or a write, whatever it answered), it makes its own real calls
    (`actions`: tools and `{param}`-templated arguments, so its values come from the
    seed) through the stack's admin port, never the fault proxy. Part of the task
    instance, not of the fault: the control and the fault episode get the same writer at
    the same point. One that the agent never triggers acts before the verdict (the other
    client does not wait), so the final state the oracles expect always holds its change.
    Its commits are tagged as the writer's and never counted as the agent's effects."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    tool: str
    nth: int = Field(default=1, ge=1)
    actions: tuple[GoldStep, ...] = Field(min_length=1)
    description: str = ""


ParamDraw = Callable[[int, dict[str, Any]], dict[str, Any]]


class WorkflowSpec(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]*$")
    domain: str
    #: `stress`: multi-fault schedules, apart from the paper's DEV/VAL/TEST.
    split: Literal["dev", "val", "test", "stress"]
    kind: Literal["single_effect", "multi_effect", "compensation", "composite"]
    instruction: str
    tools: list[str]
    required_effects: list[EffectExpectation] = Field(default_factory=list)
    forbidden_effects: list[EffectExpectation] = Field(default_factory=list)
    #: Committed mutations that are neither required nor harm: recovery operations that
    #: finish the required effect (resume a half-done batch, repair a lock). Anything
    #: committed that is not required, allowed or forbidden is an *unrequired effect*.
    allowed_effects: list[EffectExpectation] = Field(default_factory=list)
    invariants: list[StatePredicate] = Field(default_factory=list)
    gold_plan: list[GoldStep]
    scenarios: list[FaultScenario]
    #: (seed, fixture) -> task parameters; excluded from dumps.
    draw_params: ParamDraw = Field(exclude=True)
    #: A concurrent writer acting in every episode of this task (control and fault).
    writer: ConcurrentWriter | None = None

    @property
    def schedule_kind(self) -> str | None:
        """`concurrent-writer` when the task has a writer (reports group its pairs), else
        None: the scenario's own kind."""
        return "concurrent-writer" if self.writer is not None else None

    def scenario(self, scenario_id: str) -> FaultScenario:
        for sc in self.scenarios:
            if sc.id == scenario_id:
                return sc
        known = ", ".join(s.id for s in self.scenarios)
        raise KeyError(f"workflow {self.id} has no scenario {scenario_id!r}; known: {known}")


class InvariantResult(BaseModel):
    description: str
    passed: bool
    expected: Any = None
    actual: Any = None


class EffectLayers(BaseModel):
    physical: int = 0
    committed: int = 0
    semantic: int = 0


class Verdict(BaseModel):
    success: bool
    state_ok: bool
    effects_ok: bool
    invariants: list[InvariantResult]
    layers: EffectLayers
    duplicates: list[dict[str, Any]]
    missing: list[dict[str, Any]]
    forbidden: list[dict[str, Any]]
    partial: list[str]
    #: Committed effects the task neither required nor allowed (a re-charge with another
    #: amount, a compensation nobody asked for, a tier set to a wrong value on the way).
    unrequired: list[dict[str, Any]] = Field(default_factory=list)
    #: Excess effects the agent itself undid with the domain's inverse (a repair): out of
    #: `duplicates`/`unrequired`, each with the undoing op; still not a clean success.
    compensated: list[dict[str, Any]] = Field(default_factory=list)
    reissued_after_commit: int = 0
    #: Re-sends after a commit that could not take effect twice (the key of a committed
    #: attempt that the service honours, or a precondition it refused).
    safe_reissues: int = 0
    fault_fired: bool | None = None
    finished: bool = False
    truncated: bool = False
    #: What the agent said when it finished: "done", "gave_up" or "escalated" (handed over
    #: to a human); None when truncated.
    finish_status: Literal["done", "gave_up", "escalated"] | None = None

    @property
    def harmless(self) -> bool:
        """No harm in the final state or the history: what a safe give-up leaves."""
        return not (self.duplicates or self.forbidden or self.partial or self.unrequired)


_TEMPLATE = re.compile(r"\{([a-zA-Z_][a-zA-Z0-9_]*)\}")


def fill(value: Any, params: dict[str, Any]) -> Any:
    """Substitute `{param}` templates; a string that is exactly one template keeps its type."""
    if isinstance(value, str):
        whole = _TEMPLATE.fullmatch(value)
        if whole:
            return params[whole.group(1)]
        return _TEMPLATE.sub(lambda m: str(params[m.group(1)]), value)
    if isinstance(value, dict):
        return {k: fill(v, params) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, params) for v in value]
    return value
