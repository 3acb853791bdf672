"""The study's own plot: every published figure beside ours (matplotlib, Agg)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from undobench_gym.evaluation.plots import _pyplot
from undobench_gym.evaluation.study.paper import PaperFigure


def paper_plot(
    figures: list[PaperFigure],
    ours: Callable[[str, str, str], dict[str, Any] | None],
    path: Path,
) -> Path:
    """One panel per metric: per (source, boundary, method), the paper's value and ours,
    each with its 95 % interval where it has one."""
    plt = _pyplot()
    metrics = sorted({f.metric for f in figures})
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 7), sharey=True)
    axes = list(axes) if len(metrics) > 1 else [axes]
    labels = sorted(
        {(f.source, f.boundary, f.method) for f in figures},
        key=lambda k: (k[1], k[2], k[0]),
    )
    y = {k: i for i, k in enumerate(labels)}
    for ax, metric in zip(axes, metrics, strict=True):
        for f in (f for f in figures if f.metric == metric):
            row = y[(f.source, f.boundary, f.method)]
            if f.value is not None:
                err = None
                if f.ci:
                    err = [[f.value - f.ci[0]], [f.ci[1] - f.value]]
                ax.errorbar(f.value, row + 0.15, xerr=err, fmt="s", color="tab:gray", ms=4)
            r = ours(f.boundary, f.method, f.metric)
            if r and r["value"] is not None:
                # no bootstrap from fewer than 5 workflows: the Wilson interval over the
                # independent units (cells when seeds copy), never a zero-width bar
                units = (r.get("effective") or {}).get("wilson") or r["wilson"]
                lo, hi = r["bootstrap"] or units
                ax.errorbar(
                    r["value"],
                    row - 0.15,
                    xerr=[[r["value"] - lo], [hi - r["value"]]],
                    fmt="o",
                    color="tab:blue",
                    ms=4,
                )
        ax.set_title(metric)
        ax.set_xlim(-0.05, 1.05)
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(range(len(labels)))
    axes[0].set_yticklabels([f"{m} {b[:12]} ({s[:14]})" for s, b, m in labels], fontsize=7)
    fig.suptitle(
        "paper (grey squares) vs ours (blue dots), 95 % intervals "
        "(task-clustered bootstrap; Wilson under 5 workflows)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=90, metadata={"Software": None})
    plt.close(fig)
    return path
