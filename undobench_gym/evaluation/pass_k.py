"""pass^k over seeds: how reliably a method succeeds on the same task, seed after seed."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from undobench_gym.core.schema import EpisodeRecord
from undobench_gym.evaluation.indicators import Pair, is_infra_error
from undobench_gym.evaluation.records import PairLike, as_records

CELL_KEYS = ("workflow", "scenario", "model", "framework", "agent")
#: The episode each pass^k is over, in the order the summary lists them.
SIDES: tuple[tuple[str, Callable[[Pair], EpisodeRecord]], ...] = (
    ("fault", lambda p: p.fault),
    ("control", lambda p: p.control),
)


def _cell(p: Pair) -> tuple[str, str, str | None, str | None, str]:
    """CELL_KEYS' values."""
    return (p.workflow, p.scenario, p.model, p.framework, p.agent)


def pass_k(pairs: Iterable[PairLike]) -> dict[str, Any]:
    """pass^k per method: the chance that k seeds of one task all succeed, averaged over
    tasks. A task is one (workflow, scenario, model, framework, agent) cell repeated over
    seeds; with c successes in n seeds its pass^k is C(c, k) / C(n, k), the unbiased
    estimator (tau-bench), which for k = n is 1 exactly when every seed succeeded, so the
    average is then the fraction of tasks where all seeds succeed. For each k only cells
    with at least k seeds count; `cells` says how many."""
    cells: dict[str, dict[tuple[Any, ...], list[Pair]]] = {}
    for p in as_records(pairs):
        if is_infra_error(p):
            continue
        cells.setdefault(str(p.method), {}).setdefault(_cell(p), []).append(p)
    by_method: dict[str, Any] = {}
    for method, groups in sorted(cells.items()):
        sizes = [len(g) for g in groups.values()]
        ks: dict[str, Any] = {}
        for k in range(1, max(sizes) + 1):
            chosen = [g for g in groups.values() if len(g) >= k]
            ks[str(k)] = {"cells": len(chosen)}
            for side, episode in SIDES:
                vals = [
                    math.comb(sum(episode(p).success for p in g), k) / math.comb(len(g), k)
                    for g in chosen
                ]
                ks[str(k)][side] = round(sum(vals) / len(vals), 6)
        by_method[method] = {"tasks": len(groups), "max_k": max(sizes), "k": ks}
    return {"unit": list(CELL_KEYS), "by_method": by_method}
