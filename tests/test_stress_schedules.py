"""The stress split: every stress workflow's gold plan succeeds in control, every
fault of every schedule fires under the gold plan, and a schedule is deterministic. (The
concurrent writer's own tests are in tests/test_concurrent_writer.py; its workflows are in
the catalogue-wide cases here too: control success, its fault firing, its writer acting.)

"Under the gold plan" means the scripted gold-plan agent behind naive retry (B0): a
cascade's later faults land on retries, and the bare scripted agent gives up at the first
failure, so it never makes them. The crash cascades fire under bare as well (the restarted
agent re-sends), which `test_a_crash_cascade_fires_under_bare_too` checks.
"""

from __future__ import annotations

from typing import Any

import pytest

from undobench_gym.contract.specs import Boundary, FaultScenario, LaterFault
from undobench_gym.core.catalog import all_workflows

STRESS = all_workflows("stress")
CASES = [(w, s.id) for w in STRESS for s in w.scenarios]
#: The cascades (the concurrent writer's workflows hold one fault each).
CASCADES = [w for w in STRESS if w.writer is None]
WRITERS = [w for w in STRESS if w.writer is not None]


def _faults(record: dict[str, Any]) -> list[dict[str, Any]]:
    """Every fault of the episode's schedule: a cascade's list, or the one fault."""
    outcome: dict[str, Any] = record["fault_outcome"]
    faults: list[dict[str, Any]] = outcome.get("faults") or [{**outcome, "index": None}]
    return faults


def test_every_domain_has_a_cascade_and_a_writer_and_nothing_else() -> None:
    from undobench_gym.core.catalog import DOMAINS

    assert {w.domain for w in CASCADES} == set(DOMAINS)
    assert {w.domain for w in WRITERS} == set(DOMAINS)
    assert all(s.schedule_kind == "cascade" for w in CASCADES for s in w.scenarios)
    kinds = {s.id for w in CASCADES for s in w.scenarios}
    assert kinds == {"crash-then-lost-ack", "lost-ack-twice", "retries-dropped"}
    assert {s.id for w in WRITERS for s in w.scenarios} == {"writer-lookalike", "writer-overwrite"}
    assert all(w.schedule_kind == "concurrent-writer" for w in WRITERS)
    # The paper's splits are untouched: no cascade outside the stress split.
    assert not [w.id for w in all_workflows() if w.split != "stress" for s in w.scenarios if s.then]


@pytest.mark.parametrize("workflow", STRESS, ids=[w.id for w in STRESS])
def test_the_gold_plan_succeeds_in_control(play: Any, workflow: Any) -> None:
    record = play(workflow, None)
    assert record["success"], record["verdict"]


@pytest.mark.parametrize(("workflow", "scenario"), CASES, ids=[f"{w.id}:{s}" for w, s in CASES])
def test_every_fault_of_the_schedule_fires_under_the_gold_plan(
    play: Any, workflow: Any, scenario: str
) -> None:
    record = play(workflow, scenario, method="B0")
    faults = _faults(record)
    assert len(faults) == workflow.scenario(scenario).fault_count
    missed = [f for f in faults if not f["as_planned"]]
    assert not missed, missed
    indices = [f["index"] for f in faults if f["index"] is not None]
    assert indices == sorted(set(indices)), "each fault on its own call, in schedule order"
    if workflow.writer is not None:  # and the writer acted at its trigger, not at the end
        assert [w["after_call"] is not None and w["status"] < 300 for w in record["writer"]] == [
            True
        ] * len(workflow.writer.actions)


def test_a_crash_cascade_fires_under_bare_too(play: Any) -> None:
    workflow = next(w for w in STRESS if w.id == "pay-renew-subscription-stress")
    record = play(workflow, "crash-then-lost-ack")
    assert [f["mechanism"] for f in _faults(record)] == [
        "worker_crash_after_ack",
        "reply_dropped_after_commit",
    ]
    # The restarted agent re-sent the renewal (the second fault's call): a duplicate.
    assert record["effects"]["duplicates"] == 1


@pytest.mark.parametrize("method", ["bare", "B0", "B1", "B5"])
def test_same_seed_same_faults_and_verdicts(play: Any, method: str) -> None:
    workflow = next(w for w in STRESS if w.id == "db-upgrade-tier-stress")
    for scenario in ("lost-ack-twice", "retries-dropped"):
        a, b = (play(workflow, scenario, method=method, seed=4) for _ in range(2))
        for key in ("transcript", "verdict", "fault_outcome", "state_hash", "effects"):
            assert a[key] == b[key], (scenario, key)


def test_each_later_fault_has_its_own_coin() -> None:
    from undobench_gym.core.boundaries import resolve

    scenario = FaultScenario.on(
        "amb-cascade",
        Boundary.POST_MUTATION_PRE_ACK,
        "create_charge",
        ambiguous=True,
        then=(
            LaterFault(boundary=Boundary.POST_MUTATION_PRE_ACK, after=0, ambiguous=True),
            LaterFault(boundary=Boundary.PRE_MUTATION, after=1),
        ),
    )
    setups = [resolve(scenario, seed, "pay-charge-customer", 2.0) for seed in range(40)]
    assert all(len(s.then) == 2 and s.coins[1] is None for s in setups)
    assert setups == [resolve(scenario, seed, "pay-charge-customer", 2.0) for seed in range(40)]
    later = [s.coins[0] for s in setups]
    assert set(later) == {True, False}, "the later fault's coin falls both ways over seeds"
    assert later != [s.coin for s in setups], "it is not the first fault's coin"
    for s in setups:
        assert s.then[0].action == ("drop_response" if s.coins[0] else "drop_request")
        assert s.then[0].after == 0 and s.then[0].tool is None


#: One stress workflow per cascade family, for the docker runtime (a sample: each docker
#: stack costs seconds to start).
DOCKER_SAMPLE = [
    ("pay-renew-subscription-stress", "crash-then-lost-ack", "B1"),
    ("db-upgrade-tier-stress", "lost-ack-twice", "B0"),
    ("tix-retract-mistaken-page-stress", "retries-dropped", "B3"),
]


@pytest.mark.docker
@pytest.mark.parametrize(("workflow_id", "scenario", "method"), DOCKER_SAMPLE)
def test_docker_fires_every_fault_and_agrees_with_process(
    play: Any, workflow_id: str, scenario: str, method: str
) -> None:
    """Every fault of the schedule fires under the gold plan (B0) on docker, and the same
    seed gives the same transcript, verdict and fault outcomes on both runtimes."""
    workflow = next(w for w in STRESS if w.id == workflow_id)
    fired = play(workflow, scenario, method="B0", runtime="docker")
    assert all(f["as_planned"] for f in _faults(fired)), _faults(fired)
    on = {
        rt: play(workflow, scenario, method=method, seed=2, runtime=rt)
        for rt in ("process", "docker")
    }
    for key in ("transcript", "verdict", "fault_outcome", "effects"):
        assert on["process"][key] == on["docker"][key], key


@pytest.mark.parametrize(
    ("later", "message"),
    [
        ({"boundary": "PRE_MUTATION"}, "one of them"),
        ({"boundary": "PRE_MUTATION", "after": 0, "target": {"tool": "x"}}, "one of them"),
        ({"boundary": "POST_ACK_PRE_CHECKPOINT", "after": 0}, "first fault"),
        ({"boundary": "DURING_MUTATION", "after": 0, "ambiguous": True}, "ambiguous"),
        ({"boundary": "PRE_MUTATION", "after": 1}, "earlier fault"),
    ],
)
def test_a_malformed_schedule_is_a_clear_error(later: dict[str, Any], message: str) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=message):
        FaultScenario.on("bad", Boundary.PRE_MUTATION, "create_charge", then=(LaterFault(**later),))
