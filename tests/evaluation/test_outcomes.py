"""unknown_outcome_rate (from transcripts) and pass^k over seeds."""

from __future__ import annotations

import json
from typing import Any

import pytest

from undobench_gym.evaluation.metrics import metrics, pass_k
from undobench_gym.evaluation.outcomes import unobserved_mutations

from .factories import episode, trial

RESET = {"type": "transport", "kind": "connection_reset", "message": "reset"}


def call(tool: str, obs: dict[str, Any] | None = None, **args: Any) -> dict[str, Any]:
    """One transcript entry: a tool call and what came back (default 200)."""
    observation = {"tool": tool, **(obs if obs is not None else {"status": 200, "body": {}})}
    return {"action": {"tool": tool, "arguments": args}, "observation": observation}


FINISH = {"action": {"tool": "finish", "arguments": {}}, "observation": {"finished": True}}
WIRE = [
    {"tool": "get_charge", "read_only": True},
    {"tool": "list_charges", "read_only": True},
    {"tool": "create_charge", "read_only": False},
]


def ep(*entries: dict[str, Any]) -> dict[str, Any]:
    e = episode(False, transcript=[*entries, FINISH])
    e["wire"] = WIRE
    return e


@pytest.mark.parametrize(
    ("transcript", "unknown"),
    [
        # Lost response, then the agent gave up: outcome never observed.
        ([call("create_charge", {"error": RESET}, amount=5)], True),
        # A 5xx is no answer either.
        ([call("create_charge", {"status": 503, "body": {}}, amount=5)], True),
        # A definite repeat of the same call resolves it (whatever it did to the world).
        (
            [call("create_charge", {"error": RESET}, amount=5), call("create_charge", amount=5)],
            False,
        ),
        # An idempotency key added on the repeat is still the same call.
        (
            [
                call("create_charge", {"error": RESET}, amount=5),
                call("create_charge", amount=5, idempotency_key="k"),
            ],
            False,
        ),
        # A repeat with other arguments is another call: the first stays unknown.
        (
            [call("create_charge", {"error": RESET}, amount=5), call("create_charge", amount=6)],
            True,
        ),
        # A 409 is a definite answer.
        (
            [
                call("create_charge", {"error": RESET}, amount=5),
                call("create_charge", {"status": 409, "body": {}}, amount=5),
            ],
            False,
        ),
        # A later successful read verifies (we cannot tell what it checked: credited).
        ([call("create_charge", {"error": RESET}, amount=5), call("list_charges")], False),
        # A read before the failure does not verify it; a failed read does not either.
        ([call("get_charge"), call("create_charge", {"error": RESET}, amount=5)], True),
        (
            [
                call("create_charge", {"error": RESET}, amount=5),
                call("list_charges", {"error": RESET}),
            ],
            True,
        ),
        # A failed read is not a mutation with an unknown outcome.
        ([call("list_charges", {"error": RESET})], False),
        # Nothing failed.
        ([call("create_charge", amount=5)], False),
    ],
)
def test_unobserved_mutations(transcript: list[dict[str, Any]], unknown: bool) -> None:
    assert bool(unobserved_mutations(ep(*transcript), "payments")) is unknown


def test_read_only_tools_the_wire_never_saw_come_from_the_catalogue() -> None:
    e = episode(False, transcript=[call("create_charge", {"error": RESET}), call("get_customer")])
    e["wire"] = []
    assert unobserved_mutations(e, "payments") == []  # get_customer is read-only
    # With no catalogue to ask, an unknown tool is taken as mutating, so it verifies nothing.
    assert len(unobserved_mutations(e, "no-such-domain")) == 1


def test_a_resuming_call_learns_the_outcome_of_the_call_it_resumes() -> None:
    """A resume (`resumingHint`) changes nothing on a finished record and answers with it:
    like a read, its definite answer tells the agent where the lost call stands."""
    lost = call("convert_lead", {"error": RESET}, lead_id="l1")
    resumed = call("resume_lead_conversion", lead_id="l1")
    e = episode(False, transcript=[lost, resumed])
    e["wire"] = []
    assert unobserved_mutations(e, "crm") == []
    e["transcript"] = [lost, call("resume_lead_conversion", {"error": RESET}, lead_id="l1")]
    # no answer: nothing learnt, and the resume, a mutation, has an unknown outcome too
    assert [json.loads(i)[0] for i in unobserved_mutations(e, "crm")] == [
        "convert_lead",
        "resume_lead_conversion",
    ]


def test_a_done_said_over_an_unknown_outcome_is_no_aware_success() -> None:
    """Seen from Qwen2.5-Coder-1.5B: a 502 after the dividend committed, then `finish`
    done, "completed successfully", with no read. The state is right by luck: crsr counts
    it, crsr_aware must not; the same `done` after a read does count."""
    bad_gateway = call("create_charge", {"status": 502, "body": "upstream reset"}, amount=5)
    blind = episode(True, transcript=[bad_gateway, FINISH])
    checked = episode(True, transcript=[bad_gateway, call("list_charges"), FINISH])
    for e in (blind, checked):
        e["wire"] = WIRE
    r = metrics([trial(True, blind), trial(True, checked)])
    assert blind["finish_status"] == checked["finish_status"] == "done"
    assert (r["crsr"]["num"], r["crsr"]["den"]) == (2, 2)
    assert (r["crsr_aware"]["num"], r["crsr_aware"]["den"]) == (1, 2)


def test_unknown_outcome_rate_counts_fault_runs() -> None:
    lost = [call("create_charge", {"error": RESET}, amount=5)]
    pairs = [
        trial(True, ep(*lost)),
        trial(True, ep(*lost, call("list_charges"))),
        trial(True, ep(call("create_charge", amount=5))),
        trial(True, ep()),
    ]
    r = metrics(pairs)["unknown_outcome_rate"]
    assert (r["num"], r["den"], r["value"]) == (1, 4, 0.25)


def test_unknown_outcome_rate_is_null_without_transcripts() -> None:
    no_transcript = episode(False)
    no_transcript["transcript"] = None
    r = metrics([trial(True, no_transcript), trial(True, ep())])["unknown_outcome_rate"]
    assert r["value"] is None and r["unsupported"] == 1 and "transcript" in r["reason"]


# --- pass^k -------------------------------------------------------------------------------


def _cells(method: str, pattern: dict[str, list[bool]]) -> list[dict[str, Any]]:
    return [
        trial(True, ok, method=method, workflow=wf, seed=s, pair_id=f"{method}-{wf}-{s}")
        for wf, flags in pattern.items()
        for s, ok in enumerate(flags)
    ]


def test_pass_k_is_the_unbiased_all_k_seeds_estimator() -> None:
    pairs = _cells("B0", {"a": [True] * 4, "b": [True, True, False, False], "c": [False] * 4})
    out = pass_k(pairs)["by_method"]["B0"]
    assert (out["tasks"], out["max_k"]) == (3, 4)
    # Task b: C(2,k)/C(4,k) = 1/2, 1/6, 0, 0.
    expected = {1: (1 + 0.5) / 3, 2: (1 + 1 / 6) / 3, 3: 1 / 3, 4: 1 / 3}
    for k, v in expected.items():
        assert out["k"][str(k)]["fault"] == pytest.approx(v, abs=1e-6)
        assert out["k"][str(k)]["control"] == 1.0
        assert out["k"][str(k)]["cells"] == 3
    # k = n: the fraction of tasks where all seeds succeeded.
    assert out["k"]["4"]["fault"] == pytest.approx(1 / 3, abs=1e-6)


def test_pass_k_per_method_and_uneven_seed_counts() -> None:
    pairs = _cells("B0", {"a": [True, True, True]}) + _cells(
        "B2", {"a": [True, False], "b": [True, True, True]}
    )
    by = pass_k(pairs)["by_method"]
    assert by["B0"]["k"]["3"] == {"cells": 1, "fault": 1.0, "control": 1.0}
    # Only cell b has 3 seeds: k = 3 averages over it alone.
    assert by["B2"]["k"]["3"]["cells"] == 1 and by["B2"]["k"]["3"]["fault"] == 1.0
    assert by["B2"]["k"]["2"]["fault"] == pytest.approx(0.5)


def test_pass_k_leaves_out_infra_errors() -> None:
    pairs = _cells("B0", {"a": [True, True]})
    pairs.append(trial(episode(False, error="stack down"), False, workflow="a", seed=9))
    assert pass_k(pairs)["by_method"]["B0"]["max_k"] == 2
