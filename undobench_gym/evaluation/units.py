"""Independent units: which pairs replicate an observation and which only copy it.

A pair is not an independent observation, and N (pairs) overstates what a run knows:

- a **cluster** is a workflow (task): its pairs share the task's plan, services and
  difficulty. Intervals resample clusters, and a rate over fewer than `MIN_CLUSTERS`
  clusters gets no bootstrap interval (stats.py);
- a **cell** is one (workflow, scenario, method, model, framework, agent), plus the coin
  of an ambiguous scenario (a seeded coin decides whether the lost call committed, so it is
  part of what happened): the thing that seeds repeat;
- seeds **replicate** a cell only when its outcome can differ between them. A
  deterministic agent (the scripted one) gives every seed of a cell the same outcome: its
  seeds are copies, and 20 of them are one observation. This is read from the data: when
  every cell with two or more pairs has a single outcome, the unit is the cell, else the
  pair. Tests on matched units (McNemar, the one-workflow permutation test, the TOST's
  exact bound) use one unit per cell in that case.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from undobench_gym.evaluation.indicators import Pair
from undobench_gym.evaluation.records import PairLike, as_record, as_records
from undobench_gym.evaluation.stats import wilson

#: What a seed repeats (with the ambiguous scenario's coin, see `cell`).
CELL_KEYS = ("workflow", "scenario", "method", "model", "framework", "agent")
Cell = tuple[Any, ...]
_CELLS: ContextVar[dict[int, tuple[PairLike, Cell]] | None]
_CELLS = ContextVar("undobench_cell_memo", default=None)
#: id(list of pairs) -> (the list, its pairs' cells): a summary computes every rate of a
#: group over the same list (the entry keeps it alive, so its id is not reused)
_LISTS: ContextVar[dict[int, tuple[Sequence[PairLike], list[Cell]]] | None]
_LISTS = ContextVar("undobench_cell_list_memo", default=None)


@contextmanager
def shared_cells() -> Iterator[None]:
    """Compute each pair's cell once inside the block (a summary asks for it per rate)."""
    token, lists = _CELLS.set({}), _LISTS.set({})
    try:
        yield
    finally:
        _CELLS.reset(token)
        _LISTS.reset(lists)


def coin(p: PairLike) -> bool | None:
    """The ambiguous scenario's coin (`fault_outcome.coin`, else `hidden_commit_coin`)."""
    fault = as_record(p).fault
    value = fault.fault_outcome.coin if fault.fault_outcome is not None else None
    if value is None:
        value = fault.hidden_commit_coin
    return None if value is None else bool(value)


def _cell_key(p: Pair) -> Cell:
    """CELL_KEYS' values, as text, and the coin."""
    return (
        str(p.workflow),
        str(p.scenario),
        str(p.method),
        str(p.model),
        str(p.framework),
        str(p.agent),
        coin(p),
    )


def cell(p: PairLike) -> Cell:
    """The pair's cell: CELL_KEYS and the coin (None outside ambiguous scenarios)."""
    memo = _CELLS.get()
    hit = memo.get(id(p)) if memo is not None else None
    if hit is not None:
        return hit[1]
    key = _cell_key(as_record(p))
    if memo is not None:
        memo[id(p)] = (p, key)
    return key


def cells_of(pairs: Sequence[PairLike]) -> list[Cell]:
    """The cells of a list of pairs (memoized per list inside `shared_cells`)."""
    memo = _LISTS.get()
    hit = memo.get(id(pairs)) if memo is not None else None
    if hit is not None and len(hit[1]) == len(pairs):
        return hit[1]
    out = [cell(p) for p in pairs]
    if memo is not None:
        memo[id(pairs)] = (pairs, out)
    return out


def deterministic(groups: Sequence[Sequence[Hashable]]) -> bool | None:
    """True when every group (a cell's outcomes) with two or more members has one value;
    None when no group has two members (nothing to tell)."""
    repeated = [g for g in groups if len(g) > 1]
    if not repeated:
        return None
    return all(len(set(g)) == 1 for g in repeated)


def collapse(cells: Sequence[Hashable], outcomes: Sequence[Hashable]) -> tuple[str, list[int]]:
    """The unit and the indices of the independent units among items with these cells and
    outcomes: one item per cell when every cell's items agree ("cell"), else every item
    ("pair")."""
    groups: dict[Hashable, list[int]] = {}
    for i, c in enumerate(cells):
        groups.setdefault(c, []).append(i)
    if deterministic([[outcomes[i] for i in ix] for ix in groups.values()]):
        return "cell", [ix[0] for ix in groups.values()]
    return "pair", list(range(len(cells)))


def effective(pairs: Sequence[PairLike], flags: Sequence[tuple[int, int]]) -> dict[str, Any]:
    """`effective_n` of records given as models or dicts."""
    return effective_n(as_records(pairs), flags)


def effective_n(pairs: Sequence[Pair], flags: Sequence[tuple[int, int]]) -> dict[str, Any]:
    """Effective N of one rate, beside its N (`pairs`, the denominator): the clusters and
    cells with a pair in the denominator, the distinct (cell, outcome) combinations among
    those pairs, whether the seeds only copy each other (`deterministic`), the unit that
    follows and how many there are, and the Wilson interval over those units."""
    by_cell: dict[Cell, list[tuple[int, int]]] = {}
    num = den = 0
    for c, f in zip(cells_of(pairs), flags, strict=True):
        by_cell.setdefault(c, []).append(f)
        if f[1]:
            num, den = num + f[0], den + 1
    counted = {c: fs for c, fs in by_cell.items() if any(d for _, d in fs)}
    det = deterministic(list(by_cell.values()))
    if det:
        unit, units, hits = "cell", len(counted), sum(1 for fs in counted.values() if fs[0][0])
    else:
        unit, units, hits = "pair", den, num
    return {
        "pairs": den,
        "clusters": len({c[0] for c in counted}),
        "cells": len(counted),
        "distinct_outcomes": sum(len({n for n, d in fs if d}) for fs in counted.values()),
        "deterministic": det,
        "unit": unit,
        "units": units,
        "wilson": wilson(hits, units),
    }


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def effective_text(e: dict[str, Any] | None) -> str:
    """'12 workflows, 33 cells; seeds copy: 33 units' for a table cell."""
    if not e:
        return "-"
    head = f"{_n(e['clusters'], 'workflow')}, {_n(e['cells'], 'cell')}"
    if e["deterministic"]:
        return f"{head}; seeds copy: {_n(e['units'], 'unit')}"
    return f"{head}; {e['distinct_outcomes']} distinct; {_n(e['units'], 'pair')}"
