"""The study's own tables, computed with the same code as `undobench report` (`rate`,
`summarize`) so that every number in docs/study.md is one that the report prints too."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from undobench_gym.evaluation.indicators import Pair, is_infra_error
from undobench_gym.evaluation.metrics import rate
from undobench_gym.evaluation.records import PairLike, as_records
from undobench_gym.evaluation.report_sections import FEW
from undobench_gym.evaluation.units import effective_text

#: the method x boundary table's columns (as planned where conditioning applies)
CELL_METRICS = ("control_rate", "crsr", "crsr_aware", "der", "uer", "mer", "urr")


def num(value: float | None) -> str:
    return "null" if value is None else f"{value:.3f}"


def ci(interval: Iterable[float] | None) -> str:
    return "-" if interval is None else "[{:.3f}, {:.3f}]".format(*interval)


def p_text(p: float | None) -> str:
    return "-" if p is None else f"{p:.4g}"


def rate_text(r: dict[str, Any]) -> str:
    """0.512 [0.401, 0.630]: the point estimate and its task-clustered bootstrap interval;
    from fewer than 5 workflows `— (<5 clusters)` and the Wilson interval beside it, over
    the independent units (cells when the seeds only copy each other, else pairs)."""
    if r["bootstrap"] is None and r.get("bootstrap_reason"):
        e = r.get("effective") or {}
        if e.get("unit") == "cell":
            n = e["units"]
            return f"{num(r['value'])} {FEW}, Wilson {ci(e['wilson'])} ({n} cell{'s' * (n != 1)})"
        return f"{num(r['value'])} {FEW}, Wilson {ci(r['wilson'])}"
    return f"{num(r['value'])} {ci(r['bootstrap'])}"


def effective_note(summary: dict[str, Any], metrics: Iterable[str]) -> str:
    """One sentence on the main part's effective N: how many cells its N pairs are, and
    whether the seeds replicate or copy each other."""
    o = summary["overall"]
    cells = (o["control_rate"].get("effective") or {}).get("cells")
    flags = [(o[m].get("effective") or {}).get("deterministic") for m in metrics]
    methods = max(len(summary["by"].get("method", {})), 1)
    if cells is None:
        return ""
    head = (
        f"Effective N: the {o['N']} pairs are {cells} cells (workflow x scenario x method, "
        "and the coin of an ambiguous scenario)"
    )
    if all(flags):
        return (
            f"{head}, and every cell's seeds end alike on every metric above: the seeds copy "
            f"each other, so the independent units are the {cells} cells, about "
            f"{cells // methods} per method, and the tests use them."
        )
    return f"{head}; the seeds' outcomes differ within some cells, so pairs replicate."


def cells(
    pairs: Sequence[PairLike], *keys: Callable[[Pair], Any]
) -> dict[tuple[str, ...], list[Pair]]:
    out: dict[tuple[str, ...], list[Pair]] = {}
    for p in as_records(pairs):
        values = tuple(k(p) for k in keys)
        if None not in values:
            out.setdefault(tuple(str(v) for v in values), []).append(p)
    return dict(sorted(out.items()))


def _method_boundary(pairs: Sequence[PairLike]) -> dict[tuple[str, ...], list[Pair]]:
    return cells(pairs, lambda p: p.method, lambda p: p.boundary)


def _as_planned(p: Pair) -> bool:
    outcome = p.fault.fault_outcome
    return outcome is not None and outcome.as_planned


def method_boundary(pairs: Sequence[PairLike], applied: bool) -> list[str]:
    """Method x declared boundary: competence, recovery and harm with intervals."""
    lines = [
        "| method | boundary | N | as planned | effective N (crsr) | "
        + " | ".join(CELL_METRICS)
        + " |",
        "|---|---|---|---|---|" + "---|" * len(CELL_METRICS),
    ]
    grid = _method_boundary(pairs)
    for (method, boundary), cell in grid.items():
        valid = [p for p in cell if not is_infra_error(p)]
        planned = sum(1 for p in valid if _as_planned(p))
        rates = {m: rate(valid, m, condition=applied) for m in CELL_METRICS}
        eff = effective_text(rates["crsr"].get("effective"))
        row = [rate_text(rates[m]) for m in CELL_METRICS]
        lines.append(
            f"| {method} | {boundary} | {len(valid)} | {planned} | {eff} | "
            + " | ".join(row)
            + " |"
        )
    return lines


def grid_values(
    pairs: Sequence[PairLike], applied: bool, metric: str
) -> dict[tuple[str, str], Any]:
    """(method, boundary) -> the rate object of `metric` (for the paper table and plots)."""
    grid = _method_boundary(pairs)
    return {
        (m, b): rate([p for p in c if not is_infra_error(p)], metric, condition=applied)
        for (m, b), c in grid.items()
    }


def by_group(
    summary: dict[str, Any], group: str, metrics: Iterable[str], effective_of: str = "crsr"
) -> list[str]:
    """One row per value of a summary.json breakdown (`by.method`, `by.mechanism`...), with
    the effective N of `effective_of` beside N."""
    metrics = list(metrics)
    lines = [
        f"| {group} | N | as planned | effective N ({effective_of}) | "
        + " | ".join(metrics)
        + " |",
        "|---|---|---|---|" + "---|" * len(metrics),
    ]
    for name, m in summary["by"].get(group, {}).items():
        row = [rate_text(m[k]) for k in metrics]
        planned = m["conditioning"]["as_planned"]
        eff = effective_text(m[effective_of].get("effective"))
        lines.append(f"| {name} | {m['N']} | {planned} | {eff} | " + " | ".join(row) + " |")
    return lines


def excluded(summary: dict[str, Any]) -> list[str]:
    """Pairs left out of the recovery denominators, by reason, overall and per method."""
    rows = [("all", summary["overall"]), *summary["by"]["method"].items()]
    reasons = sorted({k for _, m in rows for k in m["excluded"]})
    lines = [
        "| method | N | as planned | " + " | ".join(reasons) + " |",
        "|---|---|---|" + "---|" * len(reasons),
    ]
    for name, m in rows:
        ex = m["excluded"]
        values = " | ".join("null" if ex.get(r) is None else str(ex.get(r, 0)) for r in reasons)
        lines.append(f"| {name} | {m['N']} | {m['conditioning']['as_planned']} | {values} |")
    return lines


def identical_methods(summary: dict[str, Any], metrics: Iterable[str]) -> list[tuple[str, str]]:
    """Method pairs whose figures agree on every metric (num and den): indistinguishable."""
    by = summary["by"]["method"]
    metrics = list(metrics)

    def key(m: dict[str, Any]) -> tuple[Any, ...]:
        return tuple((m[k]["num"], m[k]["den"]) for k in metrics)

    return [(a, b) for a, b in itertools.combinations(by, 2) if key(by[a]) == key(by[b])]
