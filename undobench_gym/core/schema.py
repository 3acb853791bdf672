"""The schema of a trial record: what one line of `trials.jsonl` holds, typed and versioned.

`trials.jsonl` is the project's main output, so its shape is stated here once, as Pydantic
models: the pair record (`PairRecord`), the record of each of its two episodes
(`EpisodeRecord`), their effect counts (`EffectCounts`), the fault outcome
(`FaultOutcome`) and the verdict (`contract.specs.Verdict`). `core.trials` validates every
record against them when it writes it and when it reads it back, and reports a line that
does not fit (another schema version, a broken line) with its number. The JSON Schema in
docs/trials.schema.json is generated from these models
(`python -m undobench_gym.core.schema > docs/trials.schema.json`; a test keeps it current).

Records written before the schema had a version carry none and read as version 1: the
fields are the same. Fields a record does not have keep their defaults, so a record of an
older build (no `compensated` count, say) still validates. What is validated is the shape;
the dict written is the one the harness built, so the bytes on disk do not depend on the
models (a field's order or a float's text is never rewritten).
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from undobench_gym.contract.specs import Verdict

#: The version this build writes and reads. A record of another version is refused on read
#: with its line number (convert it, or read it with the build that wrote it).
SCHEMA_VERSION: Final = 1
#: The record key that holds the version.
VERSION_KEY = "schema_version"


class _Strict(BaseModel):
    # A field this build does not know is a record of another build (or a typo): refused.
    model_config = ConfigDict(extra="forbid")


class EffectCounts(_Strict):
    """How many effects of each kind the episode's oracles found (docs/evaluation.md); None
    where the source does not record it (rows imported from the reference's tables)."""

    physical: int | None = 0
    committed: int | None = 0
    semantic: int | None = 0
    duplicates: int | None = 0
    missing: int | None = 0
    forbidden: int | None = 0
    unrequired: int | None = 0
    partial: int | None = 0
    compensated: int | None = 0
    reissued_after_commit: int | None = 0
    safe_reissues: int | None = 0


class FaultOutcome(_Strict):
    """Whether the fault happened as planned, and how (`core.boundaries.fault_outcome`).
    A cascade's record adds `schedule` and `faults` (one outcome per fault)."""

    as_planned: bool
    reason: str | None = None
    mechanism: str | None = None
    coin: bool | None = None
    tool: str | None = None
    nth: int | None = None
    schedule: str | None = None
    faults: list[dict[str, Any]] | None = None


class EpisodeRecord(_Strict):
    """One episode of a pair (`core.records.episode_record`, or `error_episode` when an
    infrastructure error kept it from running: then `error` says why)."""

    episode_id: str | None = None
    success: bool
    verdict: Verdict | None = None
    steps: int | None = 0
    transcript: list[dict[str, Any]] | None = None
    state_hash: str | None = None
    effects: EffectCounts
    fault_fired: bool | None = None
    fault: dict[str, Any] | None = None
    fault_outcome: FaultOutcome | None = None
    finish_status: Literal["done", "gave_up", "escalated"] | None = None
    truncated: bool = False
    truncated_reason: str | None = None
    wire: list[dict[str, Any]] | None = None
    commit_log: list[dict[str, Any]] | None = None
    hidden_commit_coin: bool | None = None
    wall_ms: float = 0
    error: str | None = None
    #: the concurrent writer's calls, on tasks that have one
    writer: list[dict[str, Any]] | None = None
    #: what the agent saw where a recovery wrapper answered some of its steps
    agent_transcript: list[dict[str, Any]] | None = None


class PairRecord(_Strict):
    """One line of `trials.jsonl`: a control and a fault episode of the same seed."""

    schema_version: Literal[1] = SCHEMA_VERSION
    pair_id: str
    workflow: str
    domain: str
    split: str | None = None
    kind: str | None = None
    seed: int
    method: str
    agent: str
    model: str | None = None
    framework: str | None = None
    runtime: str | None = None
    scenario: str
    boundary: str | None = None
    ambiguous: bool | None = None
    #: a cascade's or a concurrent writer's pairs only
    schedule: str | None = None
    faults: int | None = None
    prefix_equivalent: bool | None = None
    control: EpisodeRecord
    fault: EpisodeRecord
    wall_ms: float | None = None
    #: set by the runner: attempts made, the failed ones, exceptions the agent raised
    attempts: int | None = None
    infra_errors: list[dict[str, Any]] = Field(default_factory=list)
    agent_exceptions: int = 0
    #: whether the method can act on the call the fault hits (`agents.methods.applicable`)
    method_applicable: bool | None = None
    #: the pair whose control episode this pair shares (a deterministic agent)
    control_from: str | None = None
    #: a model agent's settings and its token and call counts for this pair
    agent_config: dict[str, Any] | None = None
    agent_stats: dict[str, Any] | None = None
    #: a row imported from the reference implementation's published tables
    reference: dict[str, Any] | None = None


def json_schema() -> dict[str, Any]:
    """The JSON Schema of one `trials.jsonl` line."""
    schema = PairRecord.model_json_schema()
    schema["title"] = f"UndoBench trial record, schema version {SCHEMA_VERSION}"
    return schema


if __name__ == "__main__":
    import json

    print(json.dumps(json_schema(), indent=2, sort_keys=True))
