"""report.html: one self-contained page (styles, script, plots and pair data inline; no
network at view time), rendered with Jinja2.

Size is the design constraint: a full TEST factorial has thousands of pairs with two
transcripts, wire and commit logs each. The page therefore carries
- the summary tables, rendered here as HTML;
- one compact array per pair (the table row the filters work on), as JSON;
- the pair viewer's details gzip-compressed in chunks of CHUNK pairs, base64 in a JSON
  array, which the browser inflates (DecompressionStream) only when a pair of that chunk is
  opened. Load time then grows with the rows, not with the transcripts.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape

from undobench_gym.core.catalog import domain as load_domain
from undobench_gym.evaluation.html.pairs import ROW_COLUMNS, pair_detail, table_row
from undobench_gym.evaluation.indicators import CONDITIONED, EXCLUSION_REASONS, Pair
from undobench_gym.evaluation.records import PairLike, as_records
from undobench_gym.evaluation.stats import MIN_CLUSTERS

HERE = Path(__file__).parent
REPORT_FILE = "report.html"
#: Pairs per compressed detail chunk: small enough that opening a pair inflates little,
#: large enough that gzip finds the repetition between pairs.
CHUNK = 100
#: The rates the summary shows, with how each reads.
SHOWN = (
    ("control_rate", "control episodes that succeeded (competence)"),
    ("rsr", "fault episodes that succeeded (state and effect oracles)"),
    ("crsr", "fault episodes that succeeded, of the pairs whose control succeeded"),
    ("rsr_aware", "rsr and the agent's finish status agrees"),
    ("crsr_aware", "crsr and the agent's finish status agrees"),
    ("der", "fault episodes with a duplicate effect"),
    ("uer", "fault episodes with an unrequired effect"),
    ("mer", "fault episodes with a required effect missing"),
    ("eor", "no missing, duplicate, forbidden or unrequired effect"),
    ("abstention_rate", "not a success, and no harm (a safe give-up)"),
    ("unknown_outcome_rate", "a mutation's outcome was never observed"),
)
#: The rates in each breakdown table.
TABLE_METRICS = ("control_rate", "crsr", "crsr_aware", "der", "uer", "mer")
#: Breakdowns shown, in order, when the summary has them.
BREAKDOWNS = ("method", "boundary", "domain", "task", "model", "mechanism", "schedule")
#: Shown even with one value (the others only when they split the run).
ALWAYS = ("method", "boundary", "domain", "task")


@cache
def _domain_tools(domain: str) -> dict[str, str]:
    """Tool name -> read | compensation | mutation, from the domain catalogue."""
    try:
        tools = load_domain(domain).tools
    except Exception:  # an unknown domain (imported results): classify from the wire only
        return {}
    return {
        name: "read" if t.read_only else "compensation" if t.compensation else "mutation"
        for name, t in tools.items()
    }


def _script_json(value: Any) -> str:
    """JSON safe inside <script>: no `<` can close the element or open a comment."""
    return json.dumps(value, separators=(",", ":"), default=str).replace("<", "\\u003c")


def _chunks(pairs: list[Pair]) -> list[str]:
    out = []
    for start in range(0, len(pairs), CHUNK):
        details = []
        for p in pairs[start : start + CHUNK]:
            details.append(pair_detail(p, _domain_tools(str(p.domain or ""))))
        raw = json.dumps(details, separators=(",", ":"), default=str).encode()
        out.append(base64.b64encode(gzip.compress(raw, 6, mtime=0)).decode("ascii"))
    return out


#: What an empty cell shows (an en dash, as in a printed table).
NONE = "\u2013"
#: An interval not computed because fewer than MIN_CLUSTERS workflows carry the rate.
FEW = f"\u2014 (<{MIN_CLUSTERS} clusters)"


def _fmt(value: Any) -> str:
    return NONE if value is None else f"{value:.3f}"


def _ci(ci: Any) -> str:
    return NONE if not ci else f"[{ci[0]:.2f}, {ci[1]:.2f}]"


def _rate(r: dict[str, Any] | None) -> dict[str, Any]:
    """A rate object as the template shows it: value, counts, intervals, why it is null."""
    r = r or {}
    return {
        "value": _fmt(r.get("value")),
        "counts": f"{r.get('num')}/{r.get('den')}",
        "wilson": _ci(r.get("wilson")),
        "bootstrap": FEW if r.get("bootstrap_reason") else _ci(r.get("bootstrap")),
        "reason": r.get("reason"),
    }


def _excluded(m: dict[str, Any]) -> str:
    ex = m.get("excluded") or {}
    parts = [f"{k} {v}" for k, v in ex.items() if v]
    return ", ".join(parts) if parts else "none"


def _group_row(name: str, m: dict[str, Any]) -> dict[str, Any]:
    applied = bool((m.get("conditioning") or {}).get("applied"))
    return {
        "name": name,
        "N": m.get("N"),
        "infra": m.get("infra_errors"),
        "as_planned": (m.get("conditioning") or {}).get("as_planned"),
        "excluded": _excluded(m),
        "rates": [
            {**_rate(m.get(k)), "scope": "as planned" if applied and k in CONDITIONED else "all"}
            for k in TABLE_METRICS
        ],
    }


def _summary_view(summary: dict[str, Any]) -> dict[str, Any]:
    o = summary["overall"]
    applied = bool(o["conditioning"]["applied"])
    headline = []
    for key, meaning in SHOWN:
        if key not in o:
            continue
        conditioned = applied and key in CONDITIONED
        headline.append(
            {
                "metric": key,
                "meaning": meaning,
                "scope": "as planned" if conditioned else "all",
                **_rate(o[key]),
                "all": _rate(o["unconditioned"].get(key)) if conditioned else None,
            }
        )
    tables = []
    for group in BREAKDOWNS:
        values = summary["by"].get(group) or {}
        if len(values) > 1 or (values and group in ALWAYS):
            tables.append({"group": group, "rows": [_group_row(n, m) for n, m in values.items()]})
    contrasts = [
        {
            "metric": c.get("metric"),
            "a": c.get("a"),
            "b": c.get("b"),
            "diff": _fmt(c.get("diff")),
            "ci": FEW if c.get("ci_reason") else _ci(c.get("ci")),
            "p": NONE if c.get("p") is None else f"{c['p']:.3g}",
            "p_holm": NONE if c.get("p_holm") is None else f"{c['p_holm']:.3g}",
            "clusters": c.get("clusters"),
            "dropped": c.get("dropped_inapplicable"),
        }
        for c in summary.get("contrasts") or []
    ]
    return {
        "overall": o,
        "applied": applied,
        "excluded_reasons": [(r, o["excluded"].get(r, 0)) for r in EXCLUSION_REASONS],
        "headline": headline,
        "tables": tables,
        "table_metrics": TABLE_METRICS,
        "contrasts": contrasts,
        "notes": summary.get("notes") or [],
    }


def _plots(paths: list[Path]) -> list[dict[str, str]]:
    out = []
    for path in paths:
        if path.exists():
            data = base64.b64encode(path.read_bytes()).decode("ascii")
            out.append({"name": path.stem, "src": f"data:image/png;base64,{data}"})
    return out


def _env() -> Environment:
    return Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(["html", "j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render_html(
    pairs: Sequence[PairLike], summary: dict[str, Any], plots: list[Path], title: str = ""
) -> str:
    """The page as text (see the module doc)."""
    records = as_records(pairs)
    data = {
        "columns": list(ROW_COLUMNS),
        "rows": [table_row(p) for p in records],
        "chunk": CHUNK,
    }
    return (
        _env()
        .get_template("report.html.j2")
        .render(
            title=title,
            pairs=len(records),
            s=_summary_view(summary),
            plots=_plots(plots),
            css=(HERE / "static" / "report.css").read_text(encoding="utf-8"),
            js=(HERE / "static" / "report.js").read_text(encoding="utf-8"),
            data_json=_script_json(data),
            chunks_json=_script_json(_chunks(records)),
        )
    )


def write_html(
    out: Path, pairs: Sequence[PairLike], summary: dict[str, Any], plots: list[Path]
) -> Path:
    """Write out/report.html and return its path."""
    path = out / REPORT_FILE
    path.write_text(render_html(pairs, summary, plots, title=str(out)), encoding="utf-8")
    return path
