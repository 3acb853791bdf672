"""Trial records as the evaluation reads them: typed (`core.schema.PairRecord`), converted
once where they enter the package, then read by attribute.

Records reach the evaluation as dicts (`core.trials.read_trials`, the harness, tests,
`reference.iter_records`) or already as models. Every public function that takes records
accepts either and converts them with `as_records` (or `as_record`, `as_episode`) before
anything else; a list that already holds models is returned as it is, so converting again
costs one `isinstance` per record and keeps the records' identities (the per-pair memos of
`metrics.shared_flags` and `units.shared_cells` are keyed by them).

Two things a dict told that a model's attribute does not, kept here:

- a field the record does not have reads as its default on the model (`effects.compensated`
  0, `finish_status` None), while the metrics must tell "not recorded" apart from the
  default (a record of an older build, an imported reference row): `recorded` is the value
  only where the record carried the field;
- outputs that show or hash a sub-record (the effect counts, the fault outcome) show it as
  the record has it: `as_written` gives the fields the record carried, in the key order
  trials.jsonl stores them (sorted), never the model's defaults.

A few fields are dicts in the schema, each written by one producer with fixed keys; the
ones the evaluation reads have a typed view here (`WriterCall`, `InfraError`,
`AgentStats`), validated where they are read and holding only what is read (other keys
are left out, never refused).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeGuard

from pydantic import BaseModel, ConfigDict

from undobench_gym.contract.specs import Verdict
from undobench_gym.core.schema import EpisodeRecord, PairRecord
from undobench_gym.core.trials import iter_trials

#: A trial record as callers may pass it: the model, or its dict (one trials.jsonl line).
PairLike = PairRecord | Mapping[str, Any]
#: One episode of a record (`control`, `fault`, or an env's `info["episode"]`).
EpisodeLike = EpisodeRecord | Mapping[str, Any]


def as_record(record: PairLike) -> PairRecord:
    """The record as a model (validated when it is a dict)."""
    if isinstance(record, PairRecord):
        return record
    return PairRecord.model_validate(record)


def _all_models(records: list[PairLike]) -> TypeGuard[list[PairRecord]]:
    return all(isinstance(r, PairRecord) for r in records)


def as_records(records: Iterable[PairLike]) -> list[PairRecord]:
    """The records as models: a list of models itself (no copy), else a new list."""
    if isinstance(records, list) and _all_models(records):
        return records
    return [as_record(r) for r in records]


def as_episode(episode: EpisodeLike) -> EpisodeRecord:
    """An episode record as a model (validated when it is a dict)."""
    if isinstance(episode, EpisodeRecord):
        return episode
    return EpisodeRecord.model_validate(episode)


def verdict_of(episode: EpisodeRecord) -> Verdict:
    """The episode's verdict, for code that judges an episode that ran (an error episode
    has none)."""
    if episode.verdict is None:
        raise ValueError(f"episode {episode.episode_id} has no verdict (error: {episode.error})")
    return episode.verdict


def load_records(path: Path) -> list[PairRecord]:
    """The records of a trials.jsonl (`core.trials.iter_trials`: each line checked, a line
    cut short by a crash left out), as models."""
    return [PairRecord.model_validate(r) for r in iter_trials(path)]


class _View(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class WriterCall(_View):
    """One call of a task's concurrent writer (`EpisodeRecord.writer`, `core.writer`)."""

    #: the agent's call count when the writer acted; None: at the end (never triggered)
    after_call: int | None = None
    tool: str
    arguments: dict[str, Any] = {}
    status: int | None = None


def writer_calls(episode: EpisodeRecord) -> list[WriterCall] | None:
    """The episode's concurrent-writer calls; None on a task without a writer."""
    if episode.writer is None:
        return None
    return [WriterCall.model_validate(w) for w in episode.writer]


class Step(_View):
    """One step of an episode's transcript (`EpisodeRecord.transcript`)."""

    #: the call the agent made (`tool`, `arguments`); a malformed action is kept as written
    action: dict[str, Any] = {}
    observation: Any = None


class Injected(_View):
    """The fault the proxy injected (`EpisodeRecord.fault`)."""

    index: int
    tool: str | None = None
    #: what the agent saw (`http_503`, `connection_reset`); None: nothing (a worker crash)
    visible_error: str | None = None


def steps(episode: EpisodeRecord) -> list[Step]:
    return [
        Step.model_validate(s if isinstance(s.get("action"), dict) else {**s, "action": {}})
        for s in episode.transcript or []
    ]


def injected(episode: EpisodeRecord) -> Injected | None:
    """The injected fault; None where none was (control episodes, a fault not reached)."""
    fault = episode.fault
    return None if fault is None or "index" not in fault else Injected.model_validate(fault)


class InfraError(_View):
    """One failed attempt of a pair (`PairRecord.infra_errors`, written by the runner)."""

    kind: str


class AgentStats(_View):
    """A model agent's counts for one pair (`PairRecord.agent_stats`), where it keeps them."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    provider_errors: int = 0
    trimmed_messages: int = 0
    unconstrained_replies: int = 0
    replayed_replies: int = 0


def field_of(name: str) -> Callable[[PairRecord], Any]:
    """The record field `name` as a function of the record, for the few public functions
    whose caller names the field to group by (`summary.contrasts(key=...)`,
    `study.model_part.recovery_by`); a name that is no field gives None, as a dict's
    `get` did."""
    if name not in PairRecord.model_fields:
        return lambda _record: None
    return lambda record: getattr(record, name)


def recorded(model: BaseModel, name: str) -> Any:
    """The field's value where the record carried it (null included); None where it did
    not (the model's default stands in for a field an older record lacks)."""
    return getattr(model, name) if name in model.model_fields_set else None


def as_written(model: BaseModel) -> dict[str, Any]:
    """The fields the record carried, with their values, in trials.jsonl's key order."""
    return dict(sorted(model.model_dump(exclude_unset=True).items()))
