"""pass^k over seeds: how reliably a method succeeds on the same task, seed after seed."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from undobench_gym.evaluation.indicators import Pair, is_infra_error

CELL_KEYS = ("workflow", "scenario", "model", "framework", "agent")


def pass_k(pairs: Iterable[Pair]) -> dict[str, Any]:
    """pass^k per method: the chance that k seeds of one task all succeed, averaged over
    tasks. A task is one (workflow, scenario, model, framework, agent) cell repeated over
    seeds; with c successes in n seeds its pass^k is C(c, k) / C(n, k), the unbiased
    estimator (tau-bench), which for k = n is 1 exactly when every seed succeeded, so the
    average is then the fraction of tasks where all seeds succeed. For each k only cells
    with at least k seeds count; `cells` says how many."""
    cells: dict[str, dict[tuple[Any, ...], list[Pair]]] = {}
    for p in pairs:
        if is_infra_error(p):
            continue
        key = tuple(p.get(k) for k in CELL_KEYS)
        cells.setdefault(str(p.get("method")), {}).setdefault(key, []).append(p)
    by_method: dict[str, Any] = {}
    for method, groups in sorted(cells.items()):
        sizes = [len(g) for g in groups.values()]
        ks: dict[str, Any] = {}
        for k in range(1, max(sizes) + 1):
            chosen = [g for g in groups.values() if len(g) >= k]
            ks[str(k)] = {"cells": len(chosen)}
            for side in ("fault", "control"):
                vals = [
                    math.comb(sum(bool(p[side]["success"]) for p in g), k) / math.comb(len(g), k)
                    for g in chosen
                ]
                ks[str(k)][side] = round(sum(vals) / len(vals), 6)
        by_method[method] = {"tasks": len(groups), "max_k": max(sizes), "k": ks}
    return {"unit": list(CELL_KEYS), "by_method": by_method}
