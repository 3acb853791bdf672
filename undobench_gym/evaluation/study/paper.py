"""The paper's published figures, for the study's side-by-side tables.

Two kinds: the raw paired-trial rows the reference published (four studies with hosted
models M3/M4, frameworks F1/F2), recomputed here with our own metric code and intervals
(their point estimates are plain counts, so they reproduce exactly), and the headline
study's own summary (models M1/M2; its raw rows were never published), whose per-method
point estimates are taken as printed, without intervals.

Each raw figure comes as published and **adjusted**: without the rows of the data's two
known defects (reference.py: RB-CLOUD-004 where its fault never fired, RB-STOR-005's failed
controls), computed from the same rows. The headline's per-method figures cannot be
adjusted (its per-task counts are not split by method); its pooled figures can
(`reference.headline`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from undobench_gym.evaluation.indicators import Pair
from undobench_gym.evaluation.metrics import rate
from undobench_gym.evaluation.reference import adjusted, reference_records

LOST_ACK = "POST_MUTATION_PRE_ACK"
#: study -> (declared boundary, what the reference says of it)
STUDIES = {
    "contemporary_models": (LOST_ACK, "M3, M4 x F1, F2; lost acknowledgement"),
    "rb7n10_pre_mutation": ("PRE_MUTATION", "M3, M4 x F1, F2; fault before the mutation"),
    "rb7n10_during_mutation": ("DURING_MUTATION", "M3, M4 x F1, F2; 4 composite tasks"),
    "rb7n10_keys_everywhere": (
        LOST_ACK,
        "M3, M4 x F1, F2; server keys everywhere (boundary not stated: the same design as "
        "contemporary_models is assumed)",
    ),
}
#: the reference's method codes that ours name otherwise
METHODS = {"B2-K-REAL": "B2-K"}
METRICS = ("control_rate", "crsr", "der", "mer")
HEADLINE = "rb3c_test_summary.json"


@dataclass(frozen=True)
class PaperFigure:
    source: str
    boundary: str
    method: str
    metric: str
    value: float | None
    num: int | None
    den: int | None
    ci: tuple[float, float] | None  # task-clustered bootstrap (recomputed), or None
    note: str
    #: the same figure without the known defects' rows (None: cannot be computed)
    adjusted: dict[str, Any] | None = None
    dropped: int = 0
    #: why `ci` is None although the rows were published (fewer than 5 tasks)
    ci_reason: str | None = None


def _ci(r: dict[str, Any]) -> tuple[float, float] | None:
    b = r.get("bootstrap")
    return (float(b[0]), float(b[1])) if b else None


def _raw_figures(root: Path) -> list[PaperFigure]:
    out: list[PaperFigure] = []
    for study, (boundary, note) in STUDIES.items():
        path = root / study / "raw" / "matrix.csv"
        if not path.is_file():
            continue
        records = reference_records(path)
        kept = {id(k) for k in adjusted(records)[0]}  # the same objects: models already
        by_method: dict[str, list[Pair]] = {}
        for record in records:
            by_method.setdefault(METHODS.get(record.method, record.method), []).append(record)
        for method, pairs in sorted(by_method.items()):
            clean = [p for p in pairs if id(p) in kept]
            for metric in METRICS:
                r = rate(pairs, metric, condition=False)
                fixed = rate(clean, metric, condition=False)
                out.append(
                    PaperFigure(
                        study,
                        boundary,
                        method,
                        metric,
                        r["value"],
                        r["num"],
                        r["den"],
                        _ci(r),
                        note,
                        fixed,
                        len(pairs) - len(clean),
                        r["bootstrap_reason"],
                    )
                )
    return out


def _headline(root: Path) -> list[PaperFigure]:
    path = root / HEADLINE
    if not path.is_file():
        return []
    summary = json.loads(path.read_text(encoding="utf-8"))
    by_method = summary["observability_stratification"]["UNKNOWN_OUTCOME"]["by_method"]
    note = "M1, M2 x F1, F2; lost acknowledgement; per-method point estimates as published"
    return [
        PaperFigure("rb3c (headline)", LOST_ACK, method, metric, float(v), None, None, None, note)
        for method, figures in sorted(by_method.items())
        for metric, v in sorted(figures.items())
        if metric in METRICS
    ]


def paper_figures(root: Path) -> list[PaperFigure]:
    """Every published figure the study can set beside its own, headline first."""
    return [*_headline(root), *_raw_figures(root)]
