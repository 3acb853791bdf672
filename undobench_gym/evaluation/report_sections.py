"""Sections of report.md that docs/study.md shows too: the infra-as-failure sensitivity,
method contrasts, the TOST and pass^k; and how an interval is written when there is none.

Every interval that is absent for a reason says so: a rate or contrast over fewer than
MIN_CLUSTERS workflows reads `— (<5 clusters)`, never a blank or an interval over pairs.
"""

from __future__ import annotations

from typing import Any

from undobench_gym.evaluation.metrics import SENSITIVITY_METRICS
from undobench_gym.evaluation.stats import MIN_CLUSTERS

PASS_K_SHOWN = (1, 2, 3, 5, 10, 20)
FEW = f"— (<{MIN_CLUSTERS} clusters)"


def num_text(value: Any) -> str:
    return "null" if value is None else f"{value:.3f}"


def cell_text(value: Any) -> str:
    if isinstance(value, dict):
        return num_text(value["value"])
    return "null" if value is None else str(value)


def ci_text(ci: list[float] | None) -> str:
    return "-" if ci is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def p_text(p: float | None) -> str:
    return "-" if p is None else f"{p:.4g}"


def boot_text(r: dict[str, Any], key: str = "bootstrap", reason: str = "bootstrap_reason") -> str:
    """A bootstrap interval, or why there is none (fewer than MIN_CLUSTERS clusters)."""
    if r.get(key) is None and r.get(reason):
        return FEW
    return ci_text(r.get(key))


def sensitivity_lines(summary: dict[str, Any]) -> list[str]:
    sens = summary["sensitivity"]["infra_as_failure"]
    o = sens["overall"]
    lines = [
        "",
        "## Sensitivity: infrastructure errors counted as fault failures",
        "",
        f"{o['infra_errors_counted']} pairs were excluded as infrastructure errors; here they "
        "count as fault failures in every denominator (control as recorded).",
        "",
        "| method | N | "
        + " | ".join(f"{m} (main → sensitivity)" for m in SENSITIVITY_METRICS)
        + " |",
        "|---|---|" + "---|" * len(SENSITIVITY_METRICS),
    ]
    main = {"all": summary["overall"], **summary["by"]["method"]}
    for name, s in [("all", o), *sens["method"].items()]:
        cells = [f"{cell_text(main[name][k])} → {cell_text(s[k])}" for k in SENSITIVITY_METRICS]
        lines.append(f"| {name} | {s['N']} | " + " | ".join(cells) + " |")
    return lines


def _units(n: int, unit: str) -> str:
    return f"{n} {unit}{'' if n == 1 else 's'}"


def contrast_lines(summary: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "## Method contrasts",
        "",
        "Paired over tasks: `p` swaps the methods within each task (exact when few tasks",
        "differ; with a single task, within its independent units), Holm-adjusted over all",
        "contrasts; McNemar on matched units, one per cell when the seeds only copy each",
        f"other (a deterministic agent). No interval from fewer than {MIN_CLUSTERS} tasks. Only",
        "the cells where both methods are applicable; `dropped` counts the pairs left out",
        "(a / b).",
        "",
        "| metric | a | b | diff | 95% CI | BCa | p (over) | p (Holm) | p (McNemar) "
        "| discordant (a/b of units) | dropped |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in summary["contrasts"]:
        mc, dr = c["mcnemar"], c["dropped_inapplicable"]
        over = _units(c["p_units"], c["p_unit"])
        units = f"{mc['unit_a_only']}/{mc['unit_b_only']} of {_units(mc['units'], mc['unit'])}"
        lines.append(
            f"| {c['metric']} | {c['a']} | {c['b']} | {c['diff']:+.3f} "
            f"| {boot_text(c, 'ci', 'ci_reason')} | {boot_text(c, 'ci_bca', 'ci_reason')} "
            f"| {p_text(c['p'])} ({over}) | {p_text(c['p_holm'])} "
            f"| {p_text(c['p_mcnemar'])} | {units} | {dr['a']}/{dr['b']} |"
        )
    return lines


def tost_lines(t: dict[str, Any]) -> list[str]:
    lines = [
        "",
        f"## Equivalence of competence (TOST, margin ±{t['margin']:.2f})",
        "",
        "Paired over matched units (one per cell when the seeds only copy each other),",
        "clustered by task (see assumptions).",
        "",
        "| a | b | diff | 90% CI | p | equivalent | test | matched pairs (units) | clusters "
        "| unmatched | dropped |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in t["comparisons"]:
        diff = "-" if c["diff"] is None else f"{c['diff']:+.3f}"
        dr = c["dropped_inapplicable"]
        lines.append(
            f"| {c['a']} | {c['b']} | {diff} | {ci_text(c['ci90'])} | {p_text(c['p'])} "
            f"| {c['equivalent']} | {c['test']} | {c['matched']} "
            f"({_units(c['units'], c['unit'])}) | {c['clusters']} "
            f"| {c['unmatched']} | {dr['a']}/{dr['b']} |"
        )
    return lines


def pass_k_lines(summary: dict[str, Any]) -> list[str]:
    pk = summary["pass_k"]["by_method"]
    if not pk:
        return []
    top = max(v["max_k"] for v in pk.values())
    ks = [k for k in PASS_K_SHOWN if k < top] + [top]
    lines = ["", "## pass^k over seeds (fault runs; control in parentheses)", ""]
    lines += ["| method | tasks | " + " | ".join(f"k={k}" for k in ks) + " |"]
    lines += ["|---|---|" + "---|" * len(ks)]
    for method, v in pk.items():
        cells = []
        for k in ks:
            e = v["k"].get(str(k))
            cells.append("-" if e is None else f"{e['fault']:.3f} ({e['control']:.3f})")
        lines.append(f"| {method} | {v['tasks']} | " + " | ".join(cells) + " |")
    return lines
