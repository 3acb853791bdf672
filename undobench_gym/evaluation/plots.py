"""PNG plots of a run (matplotlib, Agg backend: no display needed).

- crsr_by_method_boundary.png: CRSR per method and fault boundary, with the task-clustered
  bootstrap interval (Wilson, over the independent units, under 5 workflows);
- competence_vs_recovery.png: per task and method, control rate (competence) against
  CRSR (recovery given competence);
- effect_layers.png: mean physical / committed / semantic effects per fault run, per method;
- recovery_as_planned.png: per method, CRSR over all pairs and over the pairs whose fault
  happened as planned, CRSR_aware, DER and UER (as planned), with the excluded counts.

Recovery metrics are conditioned as in the summary (decided once for the run).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from undobench_gym.evaluation.errors import Unsupported
from undobench_gym.evaluation.indicators import (
    Pair,
    conditioning_applies,
    indicator,
    is_infra_error,
)
from undobench_gym.evaluation.metrics import conditioning, rate
from undobench_gym.evaluation.records import PairLike, as_records, recorded

PLOTS = (
    "crsr_by_method_boundary.png",
    "competence_vs_recovery.png",
    "effect_layers.png",
    "recovery_as_planned.png",
)
#: (label, metric, conditioned) bars of recovery_as_planned.png.
BARS = (
    ("crsr (all pairs)", "crsr", False),
    ("crsr (as planned)", "crsr", True),
    ("crsr_aware (as planned)", "crsr_aware", True),
    ("der (as planned)", "der", True),
    ("uer (as planned)", "uer", True),
)
LAYERS = ("physical", "committed", "semantic")


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _method(p: Pair) -> object:
    return p.method


def _group(pairs: list[Pair], *keys: Callable[[Pair], object]) -> dict[tuple[str, ...], list[Pair]]:
    """The pairs by the text of each key's value."""
    out: dict[tuple[str, ...], list[Pair]] = {}
    for p in pairs:
        out.setdefault(tuple(str(k(p)) for k in keys), []).append(p)
    return dict(sorted(out.items()))


def _point(pairs: list[Pair], metric: str, condition: bool) -> float | None:
    """The point estimate, or None when undefined or unsupported by the records."""
    ind = indicator(metric, condition)
    num = den = 0
    for p in pairs:
        try:
            n, d = ind(p)
        except Unsupported:
            return None
        num, den = num + int(n and d), den + int(d)
    return num / den if den else None


def _empty(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def _crsr(plt: Any, pairs: list[Pair], path: Path, condition: bool) -> None:
    cells = _group(pairs, _method, lambda p: p.boundary)
    methods = sorted({m for m, _ in cells})
    boundaries = sorted({b for _, b in cells})
    fig, ax = plt.subplots(figsize=(max(6.0, 1.4 * len(methods) * max(1, len(boundaries))), 4.5))
    width = 0.8 / max(1, len(boundaries))
    drawn = False
    for j, boundary in enumerate(boundaries):
        xs, ys, lo, hi = [], [], [], []
        for i, method in enumerate(methods):
            if (method, boundary) not in cells:
                continue
            r = rate(cells[(method, boundary)], "crsr", condition=condition)
            if r["value"] is None:
                continue
            # under 5 workflows there is no bootstrap: the Wilson interval over the
            # independent units (cells when every cell's seeds end alike)
            ci = r["bootstrap"] or (r.get("effective") or {}).get("wilson") or r["wilson"]
            xs.append(i + (j - (len(boundaries) - 1) / 2) * width)
            ys.append(r["value"])
            lo.append(max(0.0, r["value"] - ci[0]))
            hi.append(max(0.0, ci[1] - r["value"]))
        if xs:
            drawn = True
            ax.bar(xs, ys, width * 0.9, yerr=[lo, hi], capsize=3, label=boundary)
            for x, y in zip(xs, ys, strict=True):  # a zero-height bar is still a result
                ax.annotate(
                    f"{y:.2f}",
                    (x, y),
                    ha="left",
                    va="bottom",
                    fontsize=7,
                    xytext=(3, 2),
                    textcoords="offset points",
                )
    if drawn:
        ax.set_xticks(range(len(methods)), methods)
        ax.set_ylim(0, 1.05)
        scope = "faults as planned" if condition else "all pairs"
        ax.set_ylabel(f"CRSR = C / D, {scope} (95% cluster bootstrap; Wilson <5 workflows)")
        ax.legend(title="boundary", fontsize="small")
    else:
        _empty(ax, "CRSR undefined: no control succeeded")
    ax.set_title("Conditional recovery success by method and boundary")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _competence(plt: Any, pairs: list[Pair], path: Path, condition: bool) -> None:
    fig, ax = plt.subplots(figsize=(6.5, 5.5))
    by_method = _group(pairs, _method)
    markers = "os^DvP*X"
    for m, ((method,), group) in enumerate(by_method.items()):
        dx = 0.012 * (m - (len(by_method) - 1) / 2)  # methods often coincide: spread them
        pts = []
        for (task,), cell in _group(group, lambda p: p.workflow).items():
            x, y = _point(cell, "control_rate", condition), _point(cell, "crsr", condition)
            if x is not None and y is not None:
                pts.append((x + dx, y, task))
        if pts:
            ax.scatter(
                [p[0] for p in pts],
                [p[1] for p in pts],
                label=method,
                alpha=0.75,
                marker=markers[m % len(markers)],
            )
            if len(by_method) == 1:
                for x, y, task in pts:
                    ax.annotate(task, (x, y), fontsize=6, alpha=0.7)
    ax.plot([0, 1], [0, 1], color="grey", lw=0.8, ls="--")
    ax.set_xlim(-0.03, 1.03)
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel("competence: control success rate")
    ax.set_ylabel("recovery: CRSR")
    ax.set_title("Competence vs recovery, one point per task and method")
    if by_method:
        ax.legend(title="method", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _layers(plt: Any, pairs: list[Pair], path: Path) -> None:
    by_method = _group(pairs, _method)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(by_method)), 4.5))
    width = 0.8 / len(LAYERS)
    drawn = False
    for j, layer in enumerate(LAYERS):
        xs, ys = [], []
        for i, group in enumerate(by_method.values()):
            values = [recorded(p.fault.effects, layer) for p in group]
            if values and all(v is not None for v in values):
                xs.append(i + (j - 1) * width)
                ys.append(sum(values) / len(values))
        if xs:
            drawn = True
            ax.bar(xs, ys, width * 0.9, label=layer)
    if drawn:
        ax.set_xticks(range(len(by_method)), [m for (m,) in by_method])
        ax.set_ylabel("mean per fault run")
        ax.legend(title="effect layer", fontsize="small")
    else:
        _empty(ax, "effect layers not recorded (imported rows)")
    ax.set_title("Physical invocations, committed mutations, semantic effects")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _as_planned(plt: Any, pairs: list[Pair], path: Path, applied: bool) -> None:
    valid = [p for p in pairs if not is_infra_error(p)]
    by_method = _group(valid, _method)
    fig, ax = plt.subplots(figsize=(max(6.5, 1.6 * len(by_method)), 4.8))
    width = 0.8 / len(BARS)
    drawn = False
    for j, (label, metric, conditioned) in enumerate(BARS):
        xs, ys = [], []
        for i, group in enumerate(by_method.values()):
            y = _point(group, metric, applied and conditioned)
            if y is not None:
                xs.append(i + (j - (len(BARS) - 1) / 2) * width)
                ys.append(y)
        if xs:
            drawn = True
            ax.bar(xs, ys, width * 0.9, label=label)
    block, excluded = conditioning(pairs, applied)
    if block["applied"]:
        shown = ", ".join(f"{k} {v}" for k, v in excluded.items() if v)
        note = (
            f"as planned: {block['as_planned']} of {len(pairs)} pairs; excluded: {shown or 'none'}"
        )
    else:
        note = "conditioning not applied: fault_outcome not recorded"
    if drawn:
        ax.set_xticks(range(len(by_method)), [m for (m,) in by_method])
        ax.set_ylim(0, 1.3)
        ax.set_ylabel("rate")
        ax.legend(fontsize="small", ncol=3, loc="upper center")
    else:
        _empty(ax, "no recovery metric defined")
    ax.set_title(f"Recovery where the fault happened as planned\n{note}", fontsize="medium")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_plots(pairs: Sequence[PairLike], out: Path) -> list[Path]:
    plt = _pyplot()
    records = as_records(pairs)
    valid = [p for p in records if not is_infra_error(p)]
    applied = conditioning_applies(valid)
    paths = [out / name for name in PLOTS]
    _crsr(plt, valid, paths[0], applied)
    _competence(plt, valid, paths[1], applied)
    _layers(plt, valid, paths[2])
    _as_planned(plt, records, paths[3], applied)
    return paths
