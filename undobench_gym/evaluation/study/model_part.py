"""A real language model's part of the study: competence per workflow first, then recovery
by method and by boundary beside the scripted agent and the paper, and the competence-
recovery gap with a paired, task-clustered interval.

Every rate comes from `metrics.rate` (the report's own code). A sampled model's pairs are
replicates only across seeds *and* tasks, so intervals resample workflows (clusters); with
fewer than MIN_CLUSTERS workflows in a cell no bootstrap is shown, only Wilson's interval
over pairs, marked as such. The paper's headline beside it comes from the reference data
(`reference.headline`), as published and adjusted for the data's known defects.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from undobench_gym.evaluation.indicators import Pair, control_ok, exclusion, is_infra_error
from undobench_gym.evaluation.metrics import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, rate
from undobench_gym.evaluation.records import PairLike, as_records, field_of
from undobench_gym.evaluation.stats import MIN_CLUSTERS, cluster_bootstrap, ratio_diff, wilson
from undobench_gym.evaluation.study.tables import ci, num

RECOVERY = ("control_rate", "crsr", "crsr_aware", "der", "uer")


def scored(p: PairLike) -> bool:
    """Counted by the recovery metrics: no infrastructure error, the fault happened as
    planned and both episodes agreed up to it."""
    return not is_infra_error(p) and exclusion(p) is None


def _rate(pairs: list[Pair], metric: str) -> str:
    r = rate(pairs, metric, condition=True)
    if r["value"] is None:
        return "-"
    if r["bootstrap"] is not None:  # only from MIN_CLUSTERS workflows up (metrics.rate)
        return f"{num(r['value'])} {ci(r['bootstrap'])}"
    units = (r.get("effective") or {}).get("wilson") or r["wilson"]  # cells when seeds copy
    return f"{num(r['value'])} {ci(units)}w"


def gap(pairs: Sequence[PairLike]) -> dict[str, Any]:
    """control_rate - crsr over the scored pairs, with a task-clustered bootstrap of the
    paired difference (both rates from the same pairs, resampled by workflow together)."""
    use = [p for p in as_records(pairs) if scored(p)]
    by: dict[str, list[int]] = {}
    for p in use:
        row = by.setdefault(p.workflow, [0, 0, 0, 0])
        ok = control_ok(p)
        row[0] += ok
        row[1] += 1
        row[2] += ok and p.fault.success
        row[3] += ok
    values = np.array(list(by.values()), dtype=float).reshape(-1, 4)
    if not len(values) or values[:, 3].sum() == 0:
        return {"value": None, "interval": None, "clusters": len(by), "pairs": len(use)}
    sums = values.sum(axis=0)
    value = float(ratio_diff(sums))
    interval = None
    if len(by) >= MIN_CLUSTERS:
        boot = cluster_bootstrap(
            values, ratio_diff, resamples=BOOTSTRAP_RESAMPLES, seed=BOOTSTRAP_SEED
        )
        interval = boot.percentile
    return {"value": round(value, 6), "interval": interval, "clusters": len(by), "pairs": len(use)}


def _gap_text(pairs: list[Pair]) -> str:
    g = gap(pairs)
    if g["value"] is None:
        return "-"
    if g["interval"] is None:
        return f"{num(g['value'])} (under {MIN_CLUSTERS} workflows: no interval)"
    return f"{num(g['value'])} {ci(g['interval'])}"


def competence(pairs: Sequence[PairLike]) -> list[str]:
    """Control success per workflow and framework: what the model can do on a healthy
    system (Wilson intervals over that workflow's pairs)."""
    valid = [p for p in as_records(pairs) if not is_infra_error(p)]
    frameworks = sorted({str(p.framework) for p in valid})
    head = "| split | workflow | kind | " + " | ".join(frameworks) + " |"
    lines = [head, "|---|---|---|" + "---|" * len(frameworks)]
    rows: dict[tuple[str, str, str], dict[str, list[Pair]]] = {}
    for p in valid:
        key = (str(p.split), p.workflow, str(p.kind))
        rows.setdefault(key, {}).setdefault(str(p.framework), []).append(p)
    for (split, workflow, kind), cells in sorted(rows.items()):
        texts = []
        for f in frameworks:
            cell = cells.get(f, [])
            ok = sum(control_ok(p) for p in cell)
            texts.append(f"{ok}/{len(cell)}" if cell else "-")
        lines.append(f"| {split} | {workflow} | {kind} | " + " | ".join(texts) + " |")
    totals = []
    for f in frameworks:
        cell = [p for p in valid if str(p.framework) == f]
        ok = sum(control_ok(p) for p in cell)
        totals.append(f"**{ok}/{len(cell)}** {ci(wilson(ok, len(cell)))}w")
    lines.append("| all | | | " + " | ".join(totals) + " |")
    return lines


def able_workflows(pairs: Sequence[PairLike]) -> list[str]:
    """Workflows whose control succeeded at least once (any framework)."""
    return sorted(
        {p.workflow for p in as_records(pairs) if not is_infra_error(p) and control_ok(p)}
    )


def recovery_by(pairs: Sequence[PairLike], key: str) -> list[str]:
    """The recovery metrics by one factor (method, boundary, framework: a record field's
    name), with the gap."""
    valid = [p for p in as_records(pairs) if not is_infra_error(p)]
    factor = field_of(key)
    lines = [
        f"| {key} | N | scored | control successes | " + " | ".join(RECOVERY) + " | gap |",
        "|---|---|---|---|" + "---|" * (len(RECOVERY) + 1),
    ]
    groups: dict[str, list[Pair]] = {}
    for p in valid:
        groups.setdefault(str(factor(p)), []).append(p)
    for name, cell in [*sorted(groups.items()), ("all", valid)]:
        n_scored = sum(scored(p) for p in cell)
        ok = sum(control_ok(p) for p in cell)
        row = [_rate(cell, m) for m in RECOVERY]
        lines.append(
            f"| {name} | {len(cell)} | {n_scored} | {ok} | "
            + " | ".join(row)
            + f" | {_gap_text(cell)} |"
        )
    return lines


def beside_scripted(
    pairs: Sequence[PairLike],
    scripted: Sequence[PairLike],
    methods: Iterable[str],
    paper: dict[str, Any] | None = None,
) -> list[str]:
    """The model's figures beside the scripted agent's on the same workflows and methods,
    and the paper's headline (`reference.headline`: as published and adjusted)."""
    records, scripted_records = as_records(pairs), as_records(scripted)
    workflows = {p.workflow for p in records}
    lines = [
        "| who | control_rate | crsr | crsr_aware | der | gap |",
        "|---|---|---|---|---|---|",
    ]
    for label, group in (
        ("Qwen2.5-Coder-1.5B (this part)", [p for p in records if not is_infra_error(p)]),
        (
            "scripted agent, same workflows and methods",
            [
                p
                for p in scripted_records
                if p.workflow in workflows and p.method in set(methods) and not is_infra_error(p)
            ],
        ),
    ):
        if not group:
            lines.append(f"| {label} | - | - | - | - | - |")
            continue
        row = [_rate(group, m) for m in ("control_rate", "crsr", "crsr_aware", "der")]
        lines.append(f"| {label} | " + " | ".join(row) + f" | {_gap_text(group)} |")
    if paper is None:
        return lines
    for label, h in (("published", paper["published"]), ("adjusted", paper["adjusted"])):
        ctrl, crsr = h["control_rate"]["value"], h["crsr"]["value"]
        gap_text = "-" if ctrl is None or crsr is None else num(ctrl - crsr)
        lines.append(
            f"| the paper ({label}; TEST, methods pooled) | {num(ctrl)} | {num(crsr)} "
            f"| - | - | {gap_text} |"
        )
    out = ", ".join(f"{k} ({v} pairs)" for k, v in paper["dropped"].items())
    return [*lines, "", f"The paper adjusted: without {out}."]


def section(
    title: str,
    pairs: Sequence[PairLike],
    scripted: Sequence[PairLike] | None,
    notes: str,
    *,
    paper: dict[str, Any] | None = None,
) -> list[str]:
    """The markdown of one model part; `paper` the headline from `reference.headline`."""
    pairs = as_records(pairs)
    valid = [p for p in pairs if not is_infra_error(p)]
    infra = len(pairs) - len(valid)
    n_scored = sum(scored(p) for p in valid)
    ok = sum(control_ok(p) for p in valid)
    prefix_diverged = sum(1 for p in valid if p.prefix_equivalent is False)
    methods = sorted({str(p.method) for p in valid})
    lines = [
        "",
        f"## A real model: {title}",
        "",
        f"{len(pairs)} pairs ({infra} infrastructure errors), {n_scored} scored (the fault "
        f"happened as planned and both episodes agreed up to it), {ok} control successes; "
        f"{prefix_diverged} pairs whose control and fault episodes diverged before the fault "
        "(sampling on a server that batches and caches prompts is not bit-reproducible: "
        "docs/agents.md). Rates: value [95 % task-clustered bootstrap]; `w` marks a Wilson "
        f"interval where fewer than {MIN_CLUSTERS} workflows make a cell, over the "
        "independent units (pairs; cells when every cell's seeds end alike). Gap = "
        "control_rate - crsr over the scored pairs, bootstrapped as a paired difference.",
        "",
        "### Competence: control successes per workflow",
        "",
        *competence(pairs),
        "",
        "### Recovery by method",
        "",
        *recovery_by(pairs, "method"),
        "",
        "### Recovery by boundary",
        "",
        *recovery_by(pairs, "boundary"),
        "",
        "### Recovery by framework",
        "",
        *recovery_by(pairs, "framework"),
    ]
    if scripted is not None:
        lines += [
            "",
            "### Beside the scripted agent and the paper",
            "",
            *beside_scripted(pairs, scripted, methods, paper),
        ]
    if notes:
        lines += ["", notes.strip()]
    return lines
