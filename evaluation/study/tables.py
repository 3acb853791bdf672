"""The study's own tables, computed with the same code as `undobench report` (`rate`,
`summarize`) so that every number in docs/study.md is one that the report prints too."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from typing import Any

from statsmodels.stats.multitest import multipletests

from ..indicators import Pair, is_infra_error
from ..metrics import rate
from .paper import PaperFigure

#: the method x boundary table's columns (as planned where conditioning applies)
CELL_METRICS = ("control_rate", "crsr", "crsr_aware", "der", "uer", "mer", "urr")
#: the paper's pre-registered contrasts on CRSR (rb3c_test_summary.json, H1-H3)
PAPER_HYPOTHESES = (("H1", "B2", "B0"), ("H2", "B5", "B0"), ("H3", "B2", "B5"))


def num(value: float | None) -> str:
    return "null" if value is None else f"{value:.3f}"


def ci(interval: Iterable[float] | None) -> str:
    return "-" if interval is None else "[{:.3f}, {:.3f}]".format(*interval)


def p_text(p: float | None) -> str:
    return "-" if p is None else f"{p:.4g}"


def rate_text(r: dict[str, Any]) -> str:
    """0.512 [0.401, 0.630]: the point estimate and its task-clustered bootstrap interval."""
    return f"{num(r['value'])} {ci(r['bootstrap'])}"


def cells(pairs: list[Pair], *keys: Callable[[Pair], Any]) -> dict[tuple[str, ...], list[Pair]]:
    out: dict[tuple[str, ...], list[Pair]] = {}
    for p in pairs:
        values = tuple(k(p) for k in keys)
        if None not in values:
            out.setdefault(tuple(str(v) for v in values), []).append(p)
    return dict(sorted(out.items()))


def method_boundary(pairs: list[Pair], applied: bool) -> list[str]:
    """Method x declared boundary: competence, recovery and harm with intervals."""
    lines = [
        "| method | boundary | N | as planned | " + " | ".join(CELL_METRICS) + " |",
        "|---|---|---|---|" + "---|" * len(CELL_METRICS),
    ]
    grid = cells(pairs, lambda p: p.get("method"), lambda p: p.get("boundary"))
    for (method, boundary), cell in grid.items():
        valid = [p for p in cell if not is_infra_error(p)]
        planned = sum(1 for p in valid if (p["fault"].get("fault_outcome") or {}).get("as_planned"))
        row = [rate_text(rate(valid, m, condition=applied)) for m in CELL_METRICS]
        lines.append(
            f"| {method} | {boundary} | {len(valid)} | {planned} | " + " | ".join(row) + " |"
        )
    return lines


def grid_values(pairs: list[Pair], applied: bool, metric: str) -> dict[tuple[str, str], Any]:
    """(method, boundary) -> the rate object of `metric` (for the paper table and plots)."""
    grid = cells(pairs, lambda p: p.get("method"), lambda p: p.get("boundary"))
    return {
        (m, b): rate([p for p in c if not is_infra_error(p)], metric, condition=applied)
        for (m, b), c in grid.items()
    }


def paper_hypotheses(contrasts: list[dict[str, Any]], paper: dict[str, Any]) -> list[str]:
    """The paper's three CRSR contrasts on our data, Holm over those three (the paper's
    family), beside the difference it published."""
    found = {(c["a"], c["b"]): c for c in contrasts if c["metric"] == "crsr"}
    rows: list[tuple[str, str, str, dict[str, Any] | None, int]] = []
    for name, a, b in PAPER_HYPOTHESES:
        c, sign = found.get((a, b)), 1
        if c is None and (b, a) in found:
            c, sign = found[(b, a)], -1
        rows.append((name, a, b, c, sign))
    ps = [c["p"] for _, _, _, c, _ in rows if c is not None and c["p"] is not None]
    holm = iter(multipletests(ps, method="holm")[1]) if ps else iter(())
    lines = [
        "| hypothesis | contrast | ours: diff | 95% CI | p | p (Holm, these 3) | p (Holm, "
        "all contrasts) | paper: diff | paper: 95% CI | paper: p (Holm) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, a, b, c, sign in rows:
        pub: dict[str, Any] = next(
            (v for k, v in paper.items() if k.split(":")[0].strip() == name), {}
        )
        pub_diff = f"{pub['observed_diff']:+.3f}" if "observed_diff" in pub else "-"
        pub_ci = ci(pub.get("ci_95"))
        pub_p = p_text(pub.get("p_adj"))
        if c is None:
            lines.append(
                f"| {name} | {a} - {b} | - | - | - | - | - | {pub_diff} | {pub_ci} | {pub_p} |"
            )
            continue
        lo, hi = (sign * x for x in c["ci"]) if c["ci"] else (None, None)
        interval = "-" if lo is None or hi is None else ci(sorted((lo, hi)))
        h = p_text(float(next(holm))) if c["p"] is not None else "-"
        lines.append(
            f"| {name} | {a} - {b} | {sign * c['diff']:+.3f} | {interval} | {p_text(c['p'])} "
            f"| {h} | {p_text(c['p_holm'])} | {pub_diff} | {pub_ci} | {pub_p} |"
        )
    return lines


def _covers(interval: tuple[float, float] | list[float] | None, value: float | None) -> str:
    if interval is None or value is None:
        return "-"
    return "yes" if interval[0] - 1e-9 <= value <= interval[1] + 1e-9 else "**no**"


def paper_side_by_side(
    figures: list[PaperFigure], ours: Callable[[str, str, str], dict[str, Any] | None]
) -> list[str]:
    """Every published figure beside ours for the same boundary, method and metric."""
    lines = [
        "| source | boundary | method | metric | ours (95% CI) | paper (95% CI) | ours - paper "
        "| our CI covers paper | paper's CI covers ours |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for f in figures:
        r = ours(f.boundary, f.method, f.metric)
        if r is None:
            continue
        mine = r["value"]
        diff = "-" if mine is None or f.value is None else f"{mine - f.value:+.3f}"
        lines.append(
            f"| {f.source} | {f.boundary} | {f.method} | {f.metric} | {rate_text(r)} "
            f"| {num(f.value)} {ci(f.ci) if f.ci else ''} | {diff} "
            f"| {_covers(r['bootstrap'], f.value)} | {_covers(f.ci, mine)} |"
        )
    return lines


def by_group(summary: dict[str, Any], group: str, metrics: Iterable[str]) -> list[str]:
    """One row per value of a summary.json breakdown (`by.method`, `by.mechanism`...)."""
    metrics = list(metrics)
    lines = [
        f"| {group} | N | as planned | " + " | ".join(metrics) + " |",
        "|---|---|---|" + "---|" * len(metrics),
    ]
    for name, m in summary["by"].get(group, {}).items():
        row = [rate_text(m[k]) for k in metrics]
        planned = m["conditioning"]["as_planned"]
        lines.append(f"| {name} | {m['N']} | {planned} | " + " | ".join(row) + " |")
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
