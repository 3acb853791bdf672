"""Unit tests for undobench_gym/evaluation/metrics.py against the contract's metric definitions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from statsmodels.stats.proportion import proportion_confint

from undobench_gym.evaluation.metrics import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    CONDITIONED,
    bootstrap,
    infra_as_failure,
    metrics,
    rate,
    wilson,
)

from .factories import episode, legacy, outcome, trial

RATES = (
    "control_rate",
    "rsr",
    "crsr",
    "rsr_aware",
    "crsr_aware",
    "der",
    "uer",
    "mer",
    "urr",
    "eor",
    "eor_cond",
    "fired_rate",
    "abstention_rate",
    "unknown_outcome_rate",
)
CONTRACT_KEYS = {"value", "num", "den", "wilson", "bootstrap"}
# Added next to the contract's keys (the contract allows additions).
RATE_KEYS = CONTRACT_KEYS | {
    "bca",
    "empty_resamples",
    "bootstrap_reason",
    "effective",
    "unsupported",
    "reason",
}


def _mixed(workflows: int = 3) -> list[dict]:
    """(control, fault) = TT x3, TF x2, FT x1, FF x4: N=10, D=5, F=4, C=3."""
    combos = [(True, True)] * 3 + [(True, False)] * 2 + [(False, True)] + [(False, False)] * 4
    return [
        trial(c, f, workflow=f"wf{i % workflows}", seed=i, pair_id=f"p{i}")
        for i, (c, f) in enumerate(combos)
    ]


# --- counts and competence/recovery rates -------------------------------------------------


def test_counts_and_basic_rates() -> None:
    m = metrics(_mixed())
    assert (m["N"], m["D"], m["F"], m["C"], m["infra_errors"]) == (10, 5, 4, 3, 0)
    assert (m["control_rate"]["num"], m["control_rate"]["den"]) == (5, 10)
    assert m["control_rate"]["value"] == pytest.approx(0.5)
    assert (m["rsr"]["num"], m["rsr"]["den"]) == (4, 10)
    assert m["rsr"]["value"] == pytest.approx(0.4)
    # crsr is conditioned on control success: C / D.
    assert (m["crsr"]["num"], m["crsr"]["den"]) == (3, 5)
    assert m["crsr"]["value"] == pytest.approx(0.6)


def test_every_rate_has_exactly_the_contract_keys() -> None:
    m = metrics(_mixed(workflows=5))
    assert {"N", "D", "F", "C"} <= set(m)
    for name in RATES:
        assert set(m[name]) == RATE_KEYS, name
        r = m[name]
        assert isinstance(r["num"], int) and isinstance(r["den"], int)
        if r["den"]:
            assert r["value"] == pytest.approx(r["num"] / r["den"])
            assert len(r["wilson"]) == 2 and len(r["bootstrap"]) == 2 and len(r["bca"]) == 2
            assert r["empty_resamples"] == 0 and r["unsupported"] == 0 and r["reason"] is None
            assert r["bootstrap_reason"] is None and r["effective"]["pairs"] == r["den"]


def test_crsr_is_null_not_zero_when_no_control_succeeds() -> None:
    pairs = [trial(False, True, pair_id=f"p{i}", workflow=f"wf{i % 2}") for i in range(6)]
    m = metrics(pairs)
    assert m["D"] == 0
    for name in ("crsr", "eor_cond"):
        r = m[name]
        assert r == {
            "value": None,
            "num": 0,
            "den": 0,
            "wilson": None,
            "bootstrap": None,
            "bca": None,
            "empty_resamples": None,
            "bootstrap_reason": None,
            "effective": None,
            "unsupported": 0,
            "reason": "empty denominator",
        }
    # rsr is still defined over N.
    assert m["rsr"]["value"] == pytest.approx(1.0)


def test_no_pairs_gives_null_rates() -> None:
    m = metrics([])
    assert (m["N"], m["D"], m["F"], m["C"]) == (0, 0, 0, 0)
    for name in RATES:
        assert m[name]["value"] is None
        assert m[name]["den"] == 0
        assert m[name]["wilson"] is None and m[name]["bootstrap"] is None
        assert m[name]["bca"] is None


# --- effect-based rates --------------------------------------------------------------------


def test_der_and_mer_count_runs_not_effects() -> None:
    pairs = [
        trial(True, episode(False, duplicates=3)),
        trial(True, episode(False, missing=2)),
        trial(True, episode(False, duplicates=1, missing=1)),
        trial(True, True),
    ]
    m = metrics(pairs)
    assert (m["der"]["num"], m["der"]["den"]) == (2, 4)
    assert (m["mer"]["num"], m["mer"]["den"]) == (2, 4)
    assert m["der"]["value"] == pytest.approx(0.5)


def test_urr_counts_absorbed_reissues() -> None:
    # The reissue committed first but the service absorbed the repeat: no duplicate.
    pairs = [
        trial(True, episode(True, reissued_after_commit=1)),
        trial(True, episode(True, duplicates=1, reissued_after_commit=1)),
        trial(True, True),
        trial(True, True),
    ]
    m = metrics(pairs)
    assert m["der"]["num"] == 1
    assert m["urr"]["num"] == 2
    assert m["urr"]["value"] == pytest.approx(0.5)


def test_urr_counts_duplicates_even_without_reissue_flag() -> None:
    m = metrics([trial(True, episode(False, duplicates=1, reissued_after_commit=0))])
    assert m["urr"]["num"] == m["der"]["num"] == 1


effects_st = st.fixed_dictionaries(
    {k: st.integers(0, 3) for k in ("duplicates", "missing", "forbidden", "reissued_after_commit")}
)
episode_st = st.builds(
    lambda s, ff, fx: episode(s, fault_fired=ff, **fx),
    st.booleans(),
    st.sampled_from([True, False, None]),
    effects_st,
)
trial_st = st.builds(
    lambda c, f, wf, err: trial(episode(c, error="stack died" if err else None), f, workflow=wf),
    st.booleans(),
    episode_st,
    st.sampled_from(["wf0", "wf1", "wf2"]),
    st.sampled_from([False, False, False, True]),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(trial_st, min_size=0, max_size=15))
def test_property_urr_at_least_der_and_rate_invariants(pairs: list[dict]) -> None:
    m = metrics(pairs)
    assert m["N"] + m["infra_errors"] == len(pairs)
    assert m["urr"]["num"] >= m["der"]["num"]
    assert m["urr"]["den"] == m["der"]["den"] == m["N"]
    if m["N"]:
        assert m["urr"]["value"] >= m["der"]["value"]
    assert m["crsr"]["den"] == m["eor_cond"]["den"] == m["D"]
    assert m["C"] <= min(m["D"], m["F"])
    for name in RATES:
        r = m[name]
        assert set(r) == RATE_KEYS
        assert 0 <= r["num"] <= r["den"]
        assert not r["unsupported"]  # every field is recorded
        if r["den"] == 0:
            assert r["value"] is None and r["wilson"] is None and r["bootstrap"] is None
        else:
            assert 0.0 <= r["value"] <= 1.0
            # at most 3 workflows: never an interval, always the reason
            assert r["bootstrap"] is None and r["bootstrap_reason"].startswith("fewer than 5")
            e = r["effective"]
            assert e["pairs"] == r["den"] and 1 <= e["clusters"] <= e["cells"] <= e["units"]
            lo, hi = r["wilson"]
            assert lo - 1e-6 <= r["value"] <= hi + 1e-6


def test_eor_differs_from_rsr_when_state_wrong_but_effects_right() -> None:
    # Fault run failed the state oracle, yet every effect happened exactly once.
    wrong_state = trial(True, episode(False))
    # Fault run "succeeded" on state but left a duplicate effect.
    dup = trial(True, episode(True, duplicates=1))
    m = metrics([wrong_state, dup])
    assert m["rsr"]["num"] == 1
    assert m["eor"]["num"] == 1
    assert metrics([wrong_state])["rsr"]["num"] == 0
    assert metrics([wrong_state])["eor"]["num"] == 1
    assert metrics([dup])["eor"]["num"] == 0


@pytest.mark.parametrize("effect", ["duplicates", "missing", "forbidden"])
def test_eor_fails_on_any_bad_effect(effect: str) -> None:
    m = metrics([trial(True, episode(True, **{effect: 1}))])
    assert m["eor"]["num"] == 0 and m["eor"]["den"] == 1


def test_eor_cond_denominator_is_d() -> None:
    pairs = [
        trial(True, True),  # counted, eor
        trial(True, episode(False, missing=1)),  # counted, not eor
        trial(False, True),  # control failed: outside eor_cond
        trial(False, episode(False)),  # control failed: outside eor_cond
    ]
    m = metrics(pairs)
    assert m["D"] == 2
    assert (m["eor"]["num"], m["eor"]["den"]) == (3, 4)
    assert (m["eor_cond"]["num"], m["eor_cond"]["den"]) == (1, 2)
    assert m["eor_cond"]["value"] == pytest.approx(0.5)


def test_fired_rate_counts_faults_that_happened_as_planned() -> None:
    # fault_fired no longer decides: a fault that "fired" after a refused call, or whose
    # control and fault prefixes diverged, did not happen as planned.
    pairs = [
        trial(True, True),
        trial(True, True),
        trial(True, True, fault_outcome=outcome(False, "refused")),
        trial(True, True, prefix_equivalent=False),
    ]
    r = metrics(pairs)["fired_rate"]
    assert (r["num"], r["den"]) == (2, 4)
    assert r["value"] == pytest.approx(0.5)


def test_fired_rate_is_null_when_not_recorded() -> None:
    # No fault_outcome means "unknown" (imported rows, older records), not "did not fire".
    pairs = [trial(True, True), legacy(trial(True, episode(True, fault_fired=True)))]
    r = metrics(pairs)["fired_rate"]
    assert r["value"] is None and r["wilson"] is None and r["bootstrap"] is None
    assert r["unsupported"] == 1 and "fault_outcome" in r["reason"]
    assert (r["num"], r["den"]) == (1, 1)  # what the supported pairs say


def test_abstention_rate_is_a_safe_give_up() -> None:
    pairs = [
        trial(True, episode(False)),  # gave up, nothing bad: abstention
        trial(True, episode(False, missing=1)),  # incomplete but safe: abstention
        trial(True, episode(False, duplicates=1)),  # failed with a duplicate: not
        trial(True, episode(False, forbidden=1)),  # failed with a forbidden effect: not
        trial(True, episode(True)),  # completed: not
    ]
    r = metrics(pairs)["abstention_rate"]
    assert (r["num"], r["den"]) == (2, 5)


def test_abstention_needs_no_partial_or_unrequired_effect() -> None:
    # pay-split-payout:crash-mid-batch under `bare`: the service crashed after 1 of 3
    # transfers, the agent gave up; the payout is half-paid (partial). Not a safe stop.
    half_paid = episode(False, missing=2, partial=1)
    assert half_paid["finish_status"] == "gave_up"
    crash = outcome(boundary="DURING_MUTATION", tool="create_payout")
    pairs = [
        trial(True, half_paid, workflow="pay-split-payout", fault_outcome=crash),
        trial(True, episode(False, unrequired=1)),  # re-charged another amount: not
        trial(True, episode(False, missing=1, truncated=True)),  # truncated, safe: abstention
        trial(True, episode(False, finish_status="done")),  # said done, did nothing: abstention
        # the state is right (the lost call had committed) but the agent did not claim
        # it: a safe stop all the same, as a hand-over to a human is
        trial(True, episode(True, finish_status="gave_up")),
        trial(True, episode(True, finish_status="escalated")),
        trial(True, episode(True, finish_status="done")),  # claimed and done: no abstention
    ]
    r = metrics(pairs)["abstention_rate"]
    assert (r["num"], r["den"]) == (4, 7)
    e = metrics(pairs)["escalation_rate"]
    assert (e["num"], e["den"]) == (1, 7)
    assert metrics(pairs[:1])["abstention_rate"]["value"] == 0.0


def test_abstention_is_unsupported_without_the_harm_counts() -> None:
    old = [legacy(trial(True, episode(False))), legacy(trial(True, episode(False, duplicates=1)))]
    r = metrics(old)["abstention_rate"]
    # The duplicate decides its pair (no abstention); the other cannot be judged.
    assert r["value"] is None and r["unsupported"] == 1
    assert r["reason"] == "not recorded: effects.unrequired (1 pairs)"
    assert (r["num"], r["den"]) == (0, 1)


def test_uer_counts_runs_with_unrequired_effects() -> None:
    pairs = [
        trial(True, episode(False, unrequired=2)),
        trial(True, episode(False, unrequired=1, duplicates=1)),
        trial(True, episode(True)),
        trial(True, episode(False, missing=1)),
    ]
    m = metrics(pairs)
    assert (m["uer"]["num"], m["uer"]["den"]) == (2, 4)
    assert m["uer"]["value"] == pytest.approx(0.5)
    # eor needs no unrequired effect either.
    assert (m["eor"]["num"], m["eor"]["den"]) == (1, 4)
    assert metrics([legacy(p) for p in pairs])["uer"]["reason"] == (
        "not recorded: effects.unrequired (4 pairs)"
    )


def test_aware_rates_need_a_finish_status_that_agrees() -> None:
    pairs = [
        # `bare` after a lost ack: gave up at the transport error, the charge had
        # committed, so the state is right by luck. rsr counts it, rsr_aware does not.
        trial(True, episode(True, finish_status="gave_up")),
        trial(True, episode(True, finish_status="done")),  # recovered and said so
        trial(True, episode(True, truncated=True)),  # right state, never finished
        trial(True, episode(False, finish_status="done")),  # claimed done, failed
        trial(False, episode(True, finish_status="done")),  # outside crsr's D
    ]
    m = metrics(pairs)
    assert (m["rsr"]["num"], m["rsr"]["den"]) == (4, 5)
    assert (m["rsr_aware"]["num"], m["rsr_aware"]["den"]) == (2, 5)
    assert (m["crsr"]["num"], m["crsr"]["den"]) == (3, 4)
    assert (m["crsr_aware"]["num"], m["crsr_aware"]["den"]) == (1, 4)
    assert m["crsr_aware"]["value"] == pytest.approx(0.25)


def test_aware_rates_without_finish_status() -> None:
    # A failed run is not an aware success whatever it said; a successful one needs the
    # finish status, which records written before it do not have.
    old = [legacy(trial(True, False)), legacy(trial(True, True))]
    r = metrics(old)["rsr_aware"]
    assert r["value"] is None and r["reason"] == "not recorded: finish_status (1 pairs)"
    assert metrics(old[:1])["rsr_aware"]["value"] == 0.0


# --- conditioning on faults that happened as planned --------------------------------------


def _conditioning_pairs() -> list[dict]:
    """4 pairs as planned, one excluded for each reason, one infrastructure error."""
    return [
        trial(True, True, workflow="wf0"),
        trial(True, True, workflow="wf1"),
        trial(True, episode(False, duplicates=1), workflow="wf2"),
        trial(False, False, workflow="wf0"),
        trial(True, False, workflow="wf1", fault_outcome=outcome(False, "not_reached")),
        trial(True, True, workflow="wf2", fault_outcome=outcome(False, "refused")),
        trial(True, True, workflow="wf0", fault_outcome=outcome(False, "no_crash")),
        trial(True, episode(True, unrequired=1), workflow="wf1", prefix_equivalent=False),
        trial(episode(True, error="stack died"), False, workflow="wf2"),
    ]


def test_recovery_metrics_are_over_faults_that_happened_as_planned() -> None:
    m = metrics(_conditioning_pairs())
    assert (m["N"], m["D"], m["F"], m["C"], m["infra_errors"]) == (8, 7, 5, 5, 1)
    assert m["conditioning"] == {
        "applied": True,
        "as_planned": 4,
        "D": 3,
        "F": 2,
        "C": 2,
        "unknown": 0,
        "reason": None,
    }
    assert m["excluded"] == {
        "not_reached": 1,
        "refused": 1,
        "no_crash": 1,
        "prefix_diverged": 1,
        "infra_error": 1,
    }
    # control_rate stays over every valid pair; fired_rate = as planned / N.
    assert (m["control_rate"]["num"], m["control_rate"]["den"]) == (7, 8)
    assert (m["fired_rate"]["num"], m["fired_rate"]["den"]) == (4, 8)
    # Conditioned beside unconditioned.
    assert (m["rsr"]["num"], m["rsr"]["den"]) == (2, 4)
    assert (m["unconditioned"]["rsr"]["num"], m["unconditioned"]["rsr"]["den"]) == (5, 8)
    assert (m["crsr"]["num"], m["crsr"]["den"]) == (2, 3)
    assert (m["unconditioned"]["crsr"]["num"], m["unconditioned"]["crsr"]["den"]) == (5, 7)
    assert (m["der"]["num"], m["der"]["den"]) == (1, 4)
    assert (m["uer"]["num"], m["uer"]["den"]) == (0, 4)  # the unrequired one diverged
    assert (m["unconditioned"]["uer"]["num"], m["unconditioned"]["uer"]["den"]) == (1, 8)
    assert set(m["unconditioned"]) == set(CONDITIONED)
    for name in CONDITIONED:
        assert m[name]["den"] <= 4, name
        assert m["unconditioned"][name]["den"] >= m[name]["den"], name


def test_an_unexpected_reason_is_counted_under_its_own_name() -> None:
    odd = outcome(False, "not_reached")
    odd["reason"] = None
    m = metrics([trial(True, True), trial(True, True, fault_outcome=odd)])
    assert m["excluded"]["unspecified"] == 1
    assert m["conditioning"]["as_planned"] == 1


def test_conditioning_does_not_apply_to_records_without_fault_outcome() -> None:
    pairs = [legacy(p) for p in _conditioning_pairs()]
    m = metrics(pairs)
    assert m["conditioning"]["applied"] is False
    assert m["conditioning"]["as_planned"] is None and m["conditioning"]["unknown"] == 8
    assert "not applied" in m["conditioning"]["reason"]
    assert m["excluded"] == {
        "not_reached": None,
        "refused": None,
        "no_crash": None,
        "prefix_diverged": None,
        "infra_error": 1,
    }
    # The recovery metrics are the plain counts over all pairs, as published.
    assert (m["rsr"]["num"], m["rsr"]["den"]) == (5, 8)
    assert (m["crsr"]["num"], m["crsr"]["den"]) == (5, 7)
    for name in CONDITIONED:
        assert m["unconditioned"][name] == m[name], name
    assert m["fired_rate"]["value"] is None


def test_a_pair_without_fault_outcome_makes_conditioned_metrics_unsupported() -> None:
    pairs = [trial(True, True), trial(True, False), legacy(trial(True, True))]
    m = metrics(pairs)
    assert m["conditioning"]["applied"] is True and m["conditioning"]["unknown"] == 1
    assert "1 pairs do not record fault_outcome" in m["conditioning"]["reason"]
    r = m["rsr"]
    assert r["value"] is None and r["reason"] == "not recorded: fault_outcome (1 pairs)"
    assert m["unconditioned"]["rsr"]["value"] == pytest.approx(2 / 3)
    assert m["control_rate"]["value"] == pytest.approx(1.0)


def test_a_missing_prefix_flag_is_unknown_not_as_planned() -> None:
    m = metrics([trial(True, True), trial(True, True, prefix_equivalent=None)])
    assert m["conditioning"]["unknown"] == 1
    assert m["rsr"]["reason"] == "not recorded: prefix_equivalent (1 pairs)"


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.booleans(),
            st.booleans(),
            st.sampled_from([None, "not_reached", "refused", "no_crash"]),
            st.sampled_from([True, True, False, None]),
            st.booleans(),
            st.sampled_from([False, False, False, True]),
        ),
        max_size=15,
    )
)
def test_property_conditioning_accounts_for_every_pair(rows: list[tuple]) -> None:
    pairs = []
    for c, f, why, prefix, recorded, err in rows:
        p = trial(
            episode(c, error="stack died" if err else None),
            f,
            fault_outcome=outcome(why is None, why),
            prefix_equivalent=prefix,
        )
        pairs.append(p if recorded else legacy(p))
    m = metrics(pairs)
    cond, excluded = m["conditioning"], m["excluded"]
    assert excluded["infra_error"] == m["infra_errors"]
    if cond["applied"]:
        others = sum(v for k, v in excluded.items() if k != "infra_error")
        assert cond["as_planned"] + others + cond["unknown"] + m["infra_errors"] == len(pairs)
        assert m["fired_rate"]["num"] <= cond["as_planned"]
        for name in CONDITIONED:
            r = m[name]
            if cond["unknown"]:
                assert r["value"] is None and "not recorded" in r["reason"], name
            else:
                assert r["den"] <= cond["as_planned"], name
    else:
        assert cond["unknown"] == m["N"]
        for name in CONDITIONED:
            assert m["unconditioned"][name] == m[name]


# --- truncated episodes and the infra-as-failure sensitivity --------------------------------


def test_truncated_episodes_are_agent_failures_in_n() -> None:
    slow = episode(False, truncated=True, truncated_reason="time_limit")
    m = metrics([trial(True, True), trial(True, slow)])
    assert (m["N"], m["infra_errors"]) == (2, 0)
    assert m["truncated"] == {"control": 0, "fault": 1}
    assert (m["rsr"]["num"], m["rsr"]["den"]) == (1, 2)
    assert (m["crsr"]["num"], m["crsr"]["den"]) == (1, 2)


def test_infra_as_failure_puts_excluded_pairs_back_as_failures() -> None:
    pairs = [trial(True, True, workflow=f"wf{i}") for i in range(3)]
    pairs.append(trial(True, False, workflow="wf3"))
    pairs.append(trial(episode(True, error="stack died"), True, workflow="wf0"))
    pairs.append(trial(True, episode(False, error="model server down"), workflow="wf1"))
    main = metrics(pairs)
    s = infra_as_failure(pairs)
    assert (main["N"], main["infra_errors"]) == (4, 2)
    assert (s["N"], s["infra_errors_counted"]) == (6, 2)
    assert (main["rsr"]["num"], main["rsr"]["den"]) == (3, 4)
    assert (s["rsr"]["num"], s["rsr"]["den"]) == (3, 6)
    assert (s["rsr_aware"]["num"], s["rsr_aware"]["den"]) == (3, 6)
    # The pair whose control errored counts as a control failure: outside D.
    assert (s["control_rate"]["num"], s["control_rate"]["den"]) == (5, 6)
    assert (s["crsr"]["num"], s["crsr"]["den"]) == (3, 5)
    assert (s["eor"]["num"], s["eor"]["den"]) == (4, 6)  # the failed run had its effects right
    # Harm rates say nothing about runs that were never observed.
    assert "der" not in s and "abstention_rate" not in s


# --- infrastructure errors -----------------------------------------------------------------


def test_infra_error_pairs_are_excluded_and_counted() -> None:
    good = [trial(True, True), trial(True, False)]
    broken = [
        trial(episode(False, error="container failed to start"), episode(False)),
        trial(episode(True, error="proxy crashed"), episode(True)),
    ]
    m = metrics(good + broken)
    assert m["N"] == 2
    assert m["infra_errors"] == 2
    assert m["D"] == 2 and m["F"] == 1
    assert m["control_rate"]["den"] == 2
    assert m["rsr"] == metrics(good)["rsr"]


def test_fault_episode_infra_error_also_excludes_pair() -> None:
    m = metrics([trial(True, True), trial(True, episode(False, error="timeout"))])
    assert (m["N"], m["infra_errors"]) == (1, 1)


# --- intervals -----------------------------------------------------------------------------


@pytest.mark.parametrize(("num", "den"), [(0, 5), (3, 10), (7, 7), (1, 1), (45, 120)])
def test_wilson_matches_statsmodels(num: int, den: int) -> None:
    lo, hi = proportion_confint(num, den, alpha=0.05, method="wilson")
    got = wilson(num, den)
    assert got == pytest.approx([lo, hi], abs=1e-6)
    assert got[0] - 1e-6 <= num / den <= got[1] + 1e-6


def test_wilson_in_rate_object() -> None:
    pairs = [trial(True, i < 3, pair_id=f"p{i}") for i in range(10)]
    r = rate(pairs, "rsr")
    lo, hi = proportion_confint(3, 10, alpha=0.05, method="wilson")
    assert r["wilson"] == pytest.approx([lo, hi], abs=1e-6)
    assert r["wilson"][0] <= r["value"] <= r["wilson"][1]
    assert wilson(0, 0) is None


def _pairs_over_workflows(successes: list[int], per: int) -> list[dict]:
    return [
        trial(True, s < k, workflow=f"wf{w}", pair_id=f"wf{w}-{s}")
        for w, k in enumerate(successes)
        for s in range(per)
    ]


def test_bootstrap_is_deterministic() -> None:
    pairs = _pairs_over_workflows([3, 1, 4, 2, 5], 5)
    first = bootstrap(pairs, "rsr")
    assert first == bootstrap(pairs, "rsr")
    assert first == bootstrap([dict(p) for p in pairs], "rsr")
    assert metrics(pairs)["rsr"]["bootstrap"] == first


def test_bootstrap_contains_point_estimate() -> None:
    pairs = _pairs_over_workflows([3, 1, 4, 2, 5, 0], 5)
    r = rate(pairs, "rsr")
    lo, hi = r["bootstrap"]
    assert lo < r["value"] < hi
    assert lo >= 0.0 and hi <= 1.0


def test_no_bootstrap_interval_from_fewer_than_five_workflows() -> None:
    # One workflow: resampling its pairs would call them tasks. None, and why.
    one = rate(_pairs_over_workflows([10], 20), "rsr")
    assert one["bootstrap"] is None and one["bca"] is None
    assert one["bootstrap_reason"] == "fewer than 5 clusters (1)"
    assert one["wilson"] is not None  # beside it, the Wilson interval over pairs
    four = rate(_pairs_over_workflows([3, 1, 4, 2], 5), "rsr")
    assert four["bootstrap"] is None and four["bootstrap_reason"] == "fewer than 5 clusters (4)"
    assert bootstrap(_pairs_over_workflows([3, 1, 4, 2], 5), "rsr") is None
    five = rate(_pairs_over_workflows([3, 1, 4, 2, 5], 5), "rsr")
    assert five["bootstrap"] is not None and five["bootstrap_reason"] is None


def test_clusters_are_workflows_with_a_pair_in_the_denominator() -> None:
    # crsr over 6 workflows, but the control succeeds in 4 of them only: 4 clusters.
    pairs = [
        trial(w < 4, True, workflow=f"wf{w}", seed=s, pair_id=f"wf{w}-{s}")
        for w in range(6)
        for s in range(3)
    ]
    assert rate(pairs, "rsr")["bootstrap"] is not None
    crsr = rate(pairs, "crsr")
    assert crsr["bootstrap"] is None and crsr["effective"]["clusters"] == 4


def test_effective_n_of_a_deterministic_agent() -> None:
    # 2 workflows x 3 scenarios x 20 seeds; every seed of a cell ends alike.
    pairs = [
        trial(True, sc != "c", workflow=f"wf{w}", scenario=sc, seed=s, pair_id=f"{w}{sc}{s}")
        for w in range(2)
        for sc in ("a", "b", "c")
        for s in range(20)
    ]
    e = rate(pairs, "rsr")["effective"]
    assert e == {
        "pairs": 120,
        "clusters": 2,
        "cells": 6,
        "distinct_outcomes": 6,
        "deterministic": True,
        "unit": "cell",
        "units": 6,
        "wilson": wilson(4, 6),  # 4 of 6 cells recover, not 80 of 120 pairs
    }
    # One seed that ends otherwise makes the seeds replicates: the pairs are the units.
    pairs[0]["fault"]["success"] = False
    e = rate(pairs, "rsr")["effective"]
    assert (e["deterministic"], e["unit"], e["units"], e["distinct_outcomes"]) == (
        False,
        "pair",
        120,
        7,
    )
    assert e["wilson"] == wilson(79, 120)
    # One pair per cell: nothing tells whether seeds would agree.
    single = rate(pairs[::20], "rsr")["effective"]
    assert (single["deterministic"], single["unit"], single["units"]) == (None, "pair", 6)


def test_effective_n_counts_only_the_denominators_cells() -> None:
    # crsr: cells whose control never succeeds are not in the denominator.
    pairs = [
        trial(sc != "b", True, workflow="wf0", scenario=sc, seed=s, pair_id=f"{sc}{s}")
        for sc in ("a", "b")
        for s in range(4)
    ]
    e = rate(pairs, "crsr")["effective"]
    assert (e["pairs"], e["cells"], e["units"], e["unit"]) == (4, 1, 1, "cell")


def _pair_level_bootstrap(flags: np.ndarray) -> tuple[float, float]:
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    idx = rng.integers(0, len(flags), size=(BOOTSTRAP_RESAMPLES, len(flags)))
    lo, hi = np.percentile(flags[idx].mean(axis=1), [2.5, 97.5])
    return float(lo), float(hi)


def test_bootstrap_resamples_workflow_clusters() -> None:
    # All variance is between workflows: 5 always succeed, 5 always fail.
    per = 20
    pairs = _pairs_over_workflows([per] * 5 + [0] * 5, per)
    clustered = bootstrap(pairs, "rsr")
    flags = np.array([float(p["fault"]["success"]) for p in pairs])
    pair_lo, pair_hi = _pair_level_bootstrap(flags)
    assert clustered[0] <= 0.5 <= clustered[1]
    assert clustered[1] - clustered[0] > 2 * (pair_hi - pair_lo)
    # With 10 clusters the interval is wide: about 0.5 +- 0.3.
    assert clustered[1] - clustered[0] > 0.4


def test_bootstrap_draws_whole_workflows() -> None:
    # Every workflow has the same success share, so resampling whole workflows cannot move
    # the ratio (a pair-level bootstrap would give a wide interval here).
    per = 10
    pairs = _pairs_over_workflows([5] * 10, per)
    lo, hi = bootstrap(pairs, "rsr")
    assert lo == pytest.approx(0.5) and hi == pytest.approx(0.5)


def test_bootstrap_of_conditional_rate_uses_ratio() -> None:
    # crsr = C/D resampled as a ratio of cluster sums; must stay within [0, 1].
    pairs = [
        trial(w % 2 == 0 or s < 2, s < 3, workflow=f"wf{w}", pair_id=f"wf{w}-{s}")
        for w in range(6)
        for s in range(5)
    ]
    r = rate(pairs, "crsr")
    assert r["den"] == metrics(pairs)["D"]
    lo, hi = r["bootstrap"]
    assert 0.0 <= lo <= r["value"] <= hi <= 1.0
