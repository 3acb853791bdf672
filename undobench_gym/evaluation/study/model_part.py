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

import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from undobench_gym.agents.llm.parsing import parse_text_tool_calls
from undobench_gym.contract.errors import UndoBenchError
from undobench_gym.core.schema import EpisodeRecord
from undobench_gym.evaluation.indicators import Pair, control_ok, exclusion, is_infra_error
from undobench_gym.evaluation.metrics import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, rate
from undobench_gym.evaluation.records import PairLike, as_records, field_of
from undobench_gym.evaluation.stats import MIN_CLUSTERS, cluster_bootstrap, ratio_diff, wilson
from undobench_gym.evaluation.study import reaction
from undobench_gym.evaluation.study.tables import ci, num

RECOVERY = ("control_rate", "crsr", "crsr_aware", "der", "uer")
#: A part's notes name its figures: `{{crsr:B6}}` (a value), `{{crsr_ci:all}}` (value and
#: interval, as in the tables), `{{gap:POST_MUTATION_PRE_ACK}}`, `{{crsr:bare+PRE_MUTATION}}`
#: (the pairs in both groups), `{{count:scored}}`.
NOTE_FIGURE = re.compile(r"\{\{\s*([a-z_]+):([A-Za-z0-9_+-]+)\s*\}\}")
GROUPS = ("method", "boundary", "framework")


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


def replay_label(p: Pair) -> str:
    """Whether the pair's fault episode took the control's replies (`LLMConfig.replay`; a
    record of a build before it has no `replay` and sampled every turn again)."""
    return "replayed" if (p.agent_config or {}).get("replay") else "sampled again"


def recovery_by(
    pairs: Sequence[PairLike], key: str, factor: Callable[[Pair], Any] | None = None
) -> list[str]:
    """The recovery metrics by one factor (method, boundary, framework: a record field's
    name; or `factor`, named `key`), with the gap."""
    valid = [p for p in as_records(pairs) if not is_infra_error(p)]
    factor = factor or field_of(key)
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
    if len({replay_label(p) for p in valid}) > 1:
        lines += [
            "",
            "### By harness build: the control's replies replayed, or sampled again",
            "",
            "Part of this part ran before the fault episode replayed the control episode's "
            "replies (docs/agents.md); those pairs sampled every turn again, and the ones "
            "whose episodes parted before the fault are left out. Both are pooled above.",
            "",
            *recovery_by(pairs, "harness", replay_label),
        ]
    lines += [
        "",
        f"### What the model did by itself after the error (`{reaction.METHOD}`)",
        "",
        "The fault episodes under `bare` that count in CRSR and showed the model an error: "
        "its next action (a read, a resume or an undo by the tools' public annotations), "
        "and whether it sent the failed call again at any point.",
        "",
        *reaction.table(pairs),
    ]
    if notes:
        lines += ["", fill_notes(notes, pairs).strip()]
    return lines


def _unread_finish(ep: EpisodeRecord) -> str | None:
    """The status of a `finish` call the agent wrote as text but an earlier build's reader
    missed, so that the agent escalated after its text replies (the summary holds the
    reply); None where the episode did not end that way."""
    last = (ep.transcript or [{}])[-1]
    action = last.get("action") if isinstance(last, dict) else None
    if not isinstance(action, dict) or action.get("tool") != "finish":
        return None
    args = action.get("arguments") or {}
    if args.get("status") != "escalated":
        return None
    _, calls = parse_text_tool_calls(str(args.get("summary") or ""))
    for call in calls:
        if call.name == "finish":
            try:
                status = json.loads(call.arguments).get("status")
            except (ValueError, AttributeError):
                status = None
            return str(status)
    return None


def counts(pairs: Sequence[PairLike]) -> Counter[str]:
    """The part's counts its notes may name (`{{count:NAME}}`)."""
    valid = [p for p in as_records(pairs) if not is_infra_error(p)]
    c: Counter[str] = Counter(
        pairs=len(valid),
        scored=sum(scored(p) for p in valid),
        control_successes=sum(control_ok(p) for p in valid),
        workflows=len({p.workflow for p in valid}),
        seeds=len({p.seed for p in valid}),
        # the header's count: episodes parted before the fault, reached or not
        parted=sum(p.prefix_equivalent is False for p in valid),
        escalated_on_text=sum(
            _unread_finish(ep) is not None for p in valid for ep in (p.control, p.fault)
        ),
        # counted in CRSR, recovered, and meant as done: crsr_aware's loss to the reader
        aware_lost_to_reader=sum(
            scored(p) and control_ok(p) and p.fault.success and _unread_finish(p.fault) == "done"
            for p in valid
        ),
    )
    # named in notes whether or not they occur
    c.update(dict.fromkeys(("replayed", "sampled_again", "prefix_diverged", "not_reached"), 0))
    kinds = (*reaction.REACTIONS, "episodes", "resent")
    c.update({f"bare_{k.replace(' ', '_')}": 0 for k in kinds})
    for p in valid:
        why = exclusion(p)
        if why is not None:
            c[why] += 1
        c[replay_label(p).replace(" ", "_")] += 1
    for kind, n in reaction.counts(valid).get("all", Counter()).items():
        c[f"bare_{kind.replace(' ', '_')}"] = n
    return c


def fill_notes(text: str, pairs: Sequence[PairLike]) -> str:
    """The part's notes with their figures filled in from its pairs, so that the prose
    cannot drift from the data as the part grows; an unknown name is an error."""
    valid = [p for p in as_records(pairs) if not is_infra_error(p)]
    known = counts(valid)

    def one(name: str) -> set[int]:
        if name == "all":
            return set(range(len(valid)))
        for key in GROUPS:
            factor = field_of(key)
            cell = {i for i, p in enumerate(valid) if str(factor(p)) == name}
            if cell:
                return cell
        raise UndoBenchError(f"notes: no method, boundary or framework {name!r}")

    def group(names: str) -> list[Pair]:
        chosen = set.intersection(*(one(n) for n in names.split("+")))
        return [valid[i] for i in sorted(chosen)]

    def value(m: re.Match[str]) -> str:
        what, name = m.group(1), m.group(2)
        if what == "count":
            if name not in known:
                raise UndoBenchError(f"notes: no count {m.group(0)}")
            return str(known[name])
        metric, with_ci = (what[:-3], True) if what.endswith("_ci") else (what, False)
        cell = group(name)
        if metric == "gap":
            return _gap_text(cell) if with_ci else num(gap(cell)["value"])
        if metric not in RECOVERY:
            raise UndoBenchError(f"notes: no figure {m.group(0)}")
        return _rate(cell, metric) if with_ci else num(rate(cell, metric, condition=True)["value"])

    return NOTE_FIGURE.sub(value, text)
