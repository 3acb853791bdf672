"""Several faults per episode in the metrics and reports: fired counts per fault,
the breakdown by schedule, and nothing new for a run of single faults."""

from __future__ import annotations

from typing import Any

from undobench_gym.evaluation.schedules import fault_counts, fault_lines, schedule
from undobench_gym.evaluation.summary import summarize

from .factories import outcome, trial


def _cascade(method: str, second_fired: bool, **kw: Any) -> dict[str, Any]:
    first = outcome(boundary="PRE_MUTATION")
    second = outcome(as_planned=second_fired, boundary="PRE_MUTATION")
    fo = {
        **first,
        "schedule": "cascade",
        "faults": [
            {"fault": 0, "boundary": "PRE_MUTATION", **first},
            {"fault": 1, "boundary": "PRE_MUTATION", **second},
        ],
    }
    p = trial(method=method, scenario="retries-dropped", fault_outcome=fo, **kw)
    p["schedule"], p["faults"] = "cascade", 2
    return p


def test_fired_counts_per_fault_and_method() -> None:
    pairs = [
        _cascade("B0", True),
        _cascade("B0", True, workflow="wf2"),
        _cascade("bare", False),
        trial(method="B0"),  # a single fault: not in the schedule counts
    ]
    counts = fault_counts(pairs)
    assert list(counts) == ["cascade/retries-dropped"]
    b0, bare = counts["cascade/retries-dropped"]["B0"], counts["cascade/retries-dropped"]["bare"]
    assert [(r["fault"], r["fired"], r["of"]) for r in b0] == [(0, 2, 2), (1, 2, 2)]
    assert bare[1]["fired"] == 0 and bare[1]["missed"] == {"not_reached": 1}
    text = "\n".join(fault_lines({"faults": counts}))
    assert (
        "| cascade/retries-dropped | bare | 0 PRE_MUTATION: 1/1<br>"
        "1 PRE_MUTATION: 0/1 (not_reached 1) |" in text
    )


def test_summary_breaks_down_by_schedule_only_with_cascades() -> None:
    single = [trial(method=m) for m in ("bare", "B0") for _ in range(3)]
    assert "schedule" not in summarize(single)["by"] and "faults" not in summarize(single)
    assert fault_lines(summarize(single)) == []
    mixed = [*single, _cascade("B0", True), _cascade("bare", False)]
    s = summarize(mixed)
    assert set(s["by"]["schedule"]) == {"single", "cascade/retries-dropped"}
    assert s["by"]["schedule"]["single"]["N"] == 6
    assert s["faults"]["cascade/retries-dropped"]["B0"][1]["fired"] == 1
    assert schedule(trial(scenario="x")) == "single"  # records written before schedules
