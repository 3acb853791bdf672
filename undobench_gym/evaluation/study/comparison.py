"""The study beside the paper, honestly: which tasks differ and how, the paper's figures as
published and adjusted for its data's known defects, its three CRSR hypotheses on our data
over every cell and over the cells where both methods apply, and the methods that end
identically on every pair (so that a zero contrast between them is read as construction,
not evidence). Every number comes from the runs or the reference data.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from undobench_gym.evaluation.indicators import Pair, is_infra_error
from undobench_gym.evaluation.matching import index
from undobench_gym.evaluation.records import PairLike, as_records, as_written
from undobench_gym.evaluation.reference import reference_records
from undobench_gym.evaluation.report_sections import FEW, boot_text
from undobench_gym.evaluation.study.paper import STUDIES, PaperFigure
from undobench_gym.evaluation.study.tables import ci, num, p_text, rate_text
from undobench_gym.evaluation.summary import contrasts

#: the paper's pre-registered contrasts on CRSR (rb3c_test_summary.json, H1-H3)
PAPER_HYPOTHESES = (("H1", "B2", "B0"), ("H2", "B5", "B0"), ("H3", "B2", "B5"))
SCOPES = (("all", "every cell", False), ("applicable", "cells where both apply", True))


def _signature(p: Pair) -> str:
    """What a pair's verdicts say: both outcomes, the finish status, the effect counts."""
    c, f = p.control, p.fault
    return json.dumps(
        [c.success, f.success, f.finish_status, as_written(f.effects)],
        sort_keys=True,
    )


def identical_on_every_pair(pairs: Sequence[PairLike]) -> list[tuple[str, str, int]]:
    """Method pairs that match one to one on every pair (same workflow, scenario, seed, ...)
    and end identically on each: (a, b, pairs). Such methods are one method here."""
    by: dict[str, list[Pair]] = {}
    for p in as_records(pairs):
        if not is_infra_error(p):
            by.setdefault(str(p.method), []).append(p)
    out = []
    for a, b in itertools.combinations(sorted(by), 2):
        ia, ib = index(by[a], _signature), index(by[b], _signature)
        same = len(ia) == len(by[a]) == len(ib) == len(by[b]) and ia.keys() == ib.keys()
        if same and ia and all(ia[k] == ib[k] for k in ia):
            out.append((a, b, len(ia)))
    return out


def _paper_tasks(root: Path) -> dict[str, tuple[str, str]]:
    """RB task -> (domain, name) from the headline's per-task table and the raw rows."""
    tasks: dict[str, tuple[str, str]] = {}
    head = root / "rb3c_test_summary.json"
    if head.is_file():
        for task, t in json.loads(head.read_text(encoding="utf-8"))["by_task"].items():
            tasks[task] = (str(t.get("domain")), str(t.get("name") or ""))
    for study in STUDIES:
        path = root / study / "raw" / "matrix.csv"
        if path.is_file():
            for r in reference_records(path):
                tasks.setdefault(r.workflow, (str(r.domain), ""))
    return tasks


def tasks_lines(
    pairs: Sequence[PairLike], summary: dict[str, Any], root: Path, head: dict[str, Any] | None
) -> list[str]:
    """Our workflows beside the paper's tasks, by domain, and how the two differ."""
    records = as_records(pairs)
    ours: dict[str, set[str]] = {}
    for p in records:
        ours.setdefault(str(p.domain), set()).add(str(p.workflow))
    theirs: dict[str, list[str]] = {}
    for task, (domain, name) in sorted(_paper_tasks(root).items()):
        theirs.setdefault(domain, []).append(f"{task}{f' ({name})' if name else ''}")
    lines = ["| domain | ours (this run) | the paper's |", "|---|---|---|"]
    for d in sorted(set(ours) | set(theirs)):
        mine = ", ".join(f"`{w}`" for w in sorted(ours.get(d, ()))) or "-"
        lines.append(f"| {d} | {mine} | {', '.join(theirs.get(d, [])) or '-'} |")
    o = summary["overall"]
    off: dict[str, int] = {}
    for p in records:
        if p.method_applicable is False:
            off[str(p.method)] = off.get(str(p.method), 0) + 1
    theirs_ctrl = "-"
    if head is not None:
        pub, adj = head["published"]["control_rate"], head["adjusted"]["control_rate"]
        theirs_ctrl = f"{num(pub['value'])} ({num(adj['value'])} adjusted)"
    inapplicable = ", ".join(f"{m} {n}" for m, n in sorted(off.items())) or "none"
    lines += [
        "",
        f"- **Not the same tasks.** Our {len({p.workflow for p in records})} workflows are "
        "this project's own, written against real services; some share a domain, or even a "
        "name, with an RB task, but none is the paper's task: tools, services, oracles and "
        "the call a fault hits all differ. A row of the side-by-side table compares a "
        "method at a boundary, not a task.",
        f"- **Not the same pairs.** Our recovery metrics count only the pairs whose fault "
        f"happened as planned ({o['conditioning']['as_planned']} of {o['N']} here); the "
        "paper's count every pair, including RB-CLOUD-004, whose fault never fired (every "
        "pair counted as recovered), and RB-STOR-005, whose control never succeeded. Its "
        "figures are shown as published and adjusted without those rows (below).",
        f"- **Not the same agent.** The scripted agent's control rate is "
        f"{num(o['control_rate']['value'])}; the paper's hosted models' was {theirs_ctrl} "
        "in its headline study, so the two CRSRs condition on different sets.",
        "- **Not the same methods everywhere.** Pairs in cells where their method cannot act "
        f"(`method_applicable` false: B2 on a call that takes no key behaves as B0): "
        f"{inapplicable}. The paper's methods are recorded as applied on every task.",
    ]
    return lines


def headline_lines(h: dict[str, Any]) -> list[str]:
    """The headline's pooled figures as published and adjusted."""
    lines = [
        "| figure (B0, B2, B5 pooled) | published | adjusted |",
        "|---|---|---|",
    ]
    for metric in ("control_rate", "rsr", "crsr"):
        pub, adj = h["published"][metric], h["adjusted"][metric]
        lines.append(
            f"| {metric} | {num(pub['value'])} ({pub['num']}/{pub['den']}) "
            f"| {num(adj['value'])} ({adj['num']}/{adj['den']}) |"
        )
    out = ", ".join(f"{k} ({v} pairs)" for k, v in h["dropped"].items())
    facts = "; ".join(f"{task}: {text}" for task, text in h["detail"].items())
    return [
        *lines,
        "",
        f"Left out of the adjusted figures: {out or 'nothing'}. In the published counts, {facts}."
        if facts
        else f"Left out of the adjusted figures: {out or 'nothing'}.",
    ]


def hypotheses(
    pairs: Sequence[PairLike], applied: bool
) -> dict[tuple[str, str], tuple[dict[str, Any], int]]:
    """(hypothesis, scope) -> (our CRSR contrast of the two methods, sign that makes it
    the hypothesis' a - b); scope `all` (every cell) or `applicable`. Holm within each
    scope's three contrasts."""
    arms = [
        p for p in as_records(pairs) if p.method in {"B0", "B2", "B5"} and not is_infra_error(p)
    ]
    out: dict[tuple[str, str], tuple[dict[str, Any], int]] = {}
    for scope, _, only in SCOPES:
        found = {
            (c["a"], c["b"]): c
            for c in contrasts(arms, condition=applied, metrics=("crsr",), only_applicable=only)
        }
        for name, a, b in PAPER_HYPOTHESES:
            if (a, b) in found:
                out[(name, scope)] = (found[(a, b)], 1)
            elif (b, a) in found:
                out[(name, scope)] = (found[(b, a)], -1)
    return out


def hypothesis_text(c: dict[str, Any], sign: int) -> str:
    return f"{sign * c['diff']:+.3f}"


def hypotheses_lines(
    found: dict[tuple[str, str], tuple[dict[str, Any], int]],
    paper: dict[str, Any],
    same: list[tuple[str, str, int]],
) -> list[str]:
    lines = [
        "| hypothesis | contrast | cells | pairs left out (a/b) | ours: diff | 95% CI "
        "| p (over) | p (Holm, these 3) | paper: diff | paper: 95% CI | paper: p (Holm) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, a, b in PAPER_HYPOTHESES:
        pub: dict[str, Any] = next(
            (v for k, v in paper.items() if k.split(":")[0].strip() == name), {}
        )
        pub_diff = f"{pub['observed_diff']:+.3f}" if "observed_diff" in pub else "-"
        theirs = f"{pub_diff} | {ci(pub.get('ci_95'))} | {p_text(pub.get('p_adj'))}"
        for scope, label, _ in SCOPES:
            if (name, scope) not in found:
                lines.append(f"| {name} | {a} - {b} | {label} | - | - | - | - | - | {theirs} |")
                continue
            c, sign = found[(name, scope)]
            dr = c["dropped_inapplicable"]
            left = f"{dr['a']}/{dr['b']}" if sign > 0 else f"{dr['b']}/{dr['a']}"
            interval = boot_text(c, "ci", "ci_reason")
            if c["ci"] is not None:
                interval = ci(sorted(sign * x for x in c["ci"]))
            lines.append(
                f"| {name} | {a} - {b} | {label} | {left} | {hypothesis_text(c, sign)} "
                f"| {interval} | {p_text(c['p'])} ({c['p_units']} {c['p_unit']}s) "
                f"| {p_text(c['p_holm'])} | {theirs} |"
            )
    for a, b, n in same:
        zero = [h for h, x, y in PAPER_HYPOTHESES if {x, y} == {a, b}]
        if not zero:
            continue
        alike = [h for h, x, y in PAPER_HYPOTHESES if len({x, y} & {a, b}) == 1]
        tail = f", and over every cell {' and '.join(alike)} are the same contrast" * bool(alike)
        lines += [
            "",
            f"{a} and {b} end identically on every one of their {n} matched pairs (both "
            "outcomes, finish status, effect counts): on these tasks they are one method by "
            f"construction, so {' and '.join(zero)} ({a} - {b}) is 0 by construction, not a "
            f"finding{tail}.",
        ]
    return lines


def _covers(interval: tuple[float, float] | list[float] | None, value: float | None) -> str:
    if interval is None or value is None:
        return "-"
    return "yes" if interval[0] - 1e-9 <= value <= interval[1] + 1e-9 else "**no**"


def side_by_side(
    figures: list[PaperFigure], ours: Callable[[str, str, str], dict[str, Any] | None]
) -> list[str]:
    """Every published figure beside ours for the same boundary, method and metric, with
    the paper's figure adjusted for its data's known defects."""
    lines = [
        "| source | boundary | method | metric | ours (95% CI) | paper (95% CI) "
        "| paper adjusted (rows out) | ours - paper | our CI covers paper "
        "| paper's CI covers ours |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for f in figures:
        r = ours(f.boundary, f.method, f.metric)
        if r is None:
            continue
        mine = r["value"]
        diff = "-" if mine is None or f.value is None else f"{mine - f.value:+.3f}"
        fixed = "-" if f.adjusted is None else f"{num(f.adjusted['value'])} ({f.dropped})"
        theirs = ci(f.ci) if f.ci else (FEW if f.ci_reason else "")
        lines.append(
            f"| {f.source} | {f.boundary} | {f.method} | {f.metric} | {rate_text(r)} "
            f"| {num(f.value)} {theirs} | {fixed} | {diff} "
            f"| {_covers(r['bootstrap'], f.value)} | {_covers(f.ci, mine)} |"
        )
    return lines


def facts(
    h: dict[str, Any] | None,
    figures: list[PaperFigure],
    found: dict[tuple[str, str], tuple[dict[str, Any], int]],
) -> dict[str, str]:
    """The reading's paper placeholders: `{{crsr:paper}}`, `{{crsr:paper-adjusted}}`,
    `{{der:paper-keys}}`, `{{h1:all}}`, `{{h1:applicable}}`, ..."""
    out: dict[str, str] = {}
    for metric in ("control_rate", "rsr", "crsr"):
        if h is not None:
            out[f"{metric}:paper"] = num(h["published"][metric]["value"])
            out[f"{metric}:paper-adjusted"] = num(h["adjusted"][metric]["value"])
    for f in figures:
        if f.source == "rb7n10_keys_everywhere" and f.adjusted is not None:
            out[f"{f.metric}:paper-keys"] = num(f.value)
            out[f"{f.metric}:paper-keys-adjusted"] = num(f.adjusted["value"])
    for (name, scope), (c, sign) in found.items():
        out[f"{name.lower()}:{scope}"] = hypothesis_text(c, sign)
    return out
