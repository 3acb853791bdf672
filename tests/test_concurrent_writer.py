"""The concurrent writer: another client of the same services acts between the
agent's steps, in the control and the fault episode alike, through the admin port.

What is checked, on real stacks: the writer's commits are tagged as its own and never
counted as the agent's harm; the oracles catch real wrong behaviours of real methods (a
verify-before-retry that takes the other client's charge for its own; a blind retry that
overwrites the other operator's update) and pass the right ones; control and fault are
identical until the fault fires, the writer in both; the same seed gives the same writer
actions and verdicts, twice and on both runtimes; reports break metrics down by it.
"""

from __future__ import annotations

from typing import Any

import pytest

from undobench_gym.agents.methods import wrap
from undobench_gym.agents.scripted import ScriptedAgent
from undobench_gym.core.catalog import all_workflows, find_workflow
from undobench_gym.core.oracles import evaluate
from undobench_gym.core.pairing import run_episode, run_pair

WRITERS = [w for w in all_workflows("stress") if w.writer is not None]
LOOKALIKE = "pay-charge-customer-writer"
OVERWRITE = "cloud-rotate-secrets-writer"


def _actions(record: dict[str, Any]) -> list[tuple[Any, ...]]:
    """What the writer did, as the agent cannot change it: when, which call, what values."""
    return [(w["after_call"], w["tool"], w["arguments"]) for w in record["writer"]]


def test_every_domain_has_a_writer_and_the_paper_splits_none() -> None:
    from undobench_gym.core.catalog import DOMAINS

    assert sorted(w.domain for w in WRITERS) == sorted(DOMAINS)
    assert not [w.id for w in all_workflows() if w.split != "stress" and w.writer is not None]


def test_the_writers_commits_are_its_own_never_the_agents_harm(play: Any) -> None:
    """Control, gold plan: the other client's charge has the identity of the agent's (a
    duplicate, were it the agent's), yet the verdict counts one charge, the agent's."""
    workflow = find_workflow(LOOKALIKE)
    record = play(workflow, None)
    assert record["success"], record["verdict"]
    actors = [(c["op"], c.get("actor")) for c in record["commit_log"]]
    assert actors == [("charge.create", None), ("charge.create", "writer")]
    assert record["commit_log"][0]["identity"] == record["commit_log"][1]["identity"]
    assert record["effects"]["committed"] == 1 and record["effects"]["duplicates"] == 0
    assert record["verdict"]["unrequired"] == []
    # The writer's call never crossed the proxy: the wire holds the agent's calls only.
    agent_calls = [t for t in record["transcript"] if "tool" in t["observation"]]
    assert len(record["wire"]) == len(agent_calls)
    assert record["writer"][0]["status"] == 201 and record["writer"][0]["after_call"] == 2


def test_the_effect_oracle_ignores_rows_tagged_as_the_writers() -> None:
    workflow = find_workflow(LOOKALIKE).model_copy(update={"invariants": []})
    params = {"customer_id": "cus_1", "amount": 500}
    row = {
        "op": "charge.create",
        "effect_class": "additive",
        "identity": '{"amount":500,"currency":"usd","customer_id":"cus_1"}',
    }
    state: dict[str, Any] = {"tables": {}}
    own = evaluate(workflow, params, state, [row], 1)
    both = evaluate(workflow, params, state, [row, {**row, "actor": "writer"}], 1)
    twice = evaluate(workflow, params, state, [row, row], 2)
    assert (own.duplicates, own.missing) == ([], [])
    assert (both.duplicates, both.missing, both.layers.committed) == ([], [], 1)
    assert len(twice.duplicates) == 1, "the same row as the agent's own is a duplicate"
    alone = evaluate(workflow, params, state, [{**row, "actor": "writer"}], 1)
    assert len(alone.missing) == 1, "the other client's charge does not do the agent's part"


@pytest.mark.parametrize(
    ("workflow_id", "wrong", "right", "caught_by"),
    [
        # B6 reads the charges back after the dropped call, finds the other client's
        # (new since its baseline, carrying every value it sent) and never charges.
        (LOOKALIKE, "B6", "B0", "missing"),
        # B0 re-sends the scale whose answer was lost, after the autoscaler's: overwritten.
        (OVERWRITE, "B0", "B2-K", "invariant"),
        # B6 reads the assignee back, sees the other operator's, and re-assigns over it.
        ("crm-close-won-deal-writer", "B6", "B2-K", "invariant"),
    ],
)
def test_a_wrong_behaviour_is_caught_and_the_right_one_passes(
    play: Any, workflow_id: str, wrong: str, right: str, caught_by: str
) -> None:
    workflow = find_workflow(workflow_id)
    scenario = workflow.scenarios[0].id
    bad = play(workflow, scenario, method=wrong)
    good = play(workflow, scenario, method=right)
    assert bad["fault_fired"] and good["fault_fired"]
    assert not bad["success"] and good["success"], (bad["verdict"], good["verdict"])
    failed = [i["description"] for i in bad["verdict"]["invariants"] if not i["passed"]]
    if caught_by == "missing":
        assert bad["effects"]["missing"] == 1 and bad["effects"]["duplicates"] == 0
    else:
        assert failed and any("after the agent's" in d for d in failed), failed
    # Neither run counts the writer's commit as the agent's effect.
    for record in (bad, good):
        assert record["verdict"]["unrequired"] == [] and record["effects"]["duplicates"] == 0
        assert [c for c in record["commit_log"] if c.get("actor") == "writer"]


@pytest.mark.parametrize("workflow_id", [LOOKALIKE, OVERWRITE])
def test_control_and_fault_agree_until_the_fault_with_the_writer_in_both(
    env_for: Any, workflow_id: str
) -> None:
    workflow = find_workflow(workflow_id)
    scenario = workflow.scenarios[0]
    env = wrap(env_for(workflow.domain, "native"), "B6")
    pair = run_pair(
        env,
        ScriptedAgent(),
        workflow=workflow,
        scenario=scenario,
        seed=3,
        method="B6",
        runtime="process",
    )
    assert pair["schedule"] == "concurrent-writer"
    assert pair["prefix_equivalent"]
    control, fault = pair["control"], pair["fault"]
    assert fault["fault_fired"]
    assert _actions(control) == _actions(fault) != []
    faulted = fault["fault"]["index"]
    assert control["writer"][0]["after_call"] == faulted, "the writer follows the target call"


@pytest.mark.parametrize("method", ["bare", "B0", "B6"])
def test_same_seed_same_writer_actions_and_verdicts(play: Any, method: str) -> None:
    for workflow_id in (LOOKALIKE, OVERWRITE):
        workflow = find_workflow(workflow_id)
        for fault in (None, workflow.scenarios[0].id):
            a, b = (play(workflow, fault, method=method, seed=4) for _ in range(2))
            for key in ("writer", "transcript", "verdict", "state_hash", "effects", "commit_log"):
                assert a[key] == b[key], (workflow_id, fault, key)


def test_a_writer_never_triggered_acts_before_the_verdict(env_for: Any) -> None:
    """An agent that stops at once: the other client does not wait; its change is in the
    final state, and none of it is the agent's (the agent's own effect is missing)."""
    workflow = find_workflow(OVERWRITE)
    env = env_for(workflow.domain, "native")
    env.reset(seed=2, options={"workflow": workflow.id, "fault": None})
    _obs, _r, _done, _trunc, info = env.step({"tool": "finish", "arguments": {"status": "gave_up"}})
    record = info["episode"]
    assert [w["after_call"] for w in record["writer"]] == [None]
    assert [c.get("actor") for c in record["commit_log"]] == ["writer"]
    verdict = info["verdict"]
    assert not verdict["success"] and verdict["unrequired"] == []
    assert {m["op"] for m in verdict["missing"]} == {"deployment.scale", "deployment.restart"}


def test_reports_break_metrics_down_by_the_writer_family(env_for: Any) -> None:
    from undobench_gym.evaluation.schedules import fault_counts
    from undobench_gym.evaluation.summary import summarize

    workflow = find_workflow(LOOKALIKE)
    pairs = []
    for method in ("B0", "B6"):
        env = wrap(env_for(workflow.domain, "native"), method)
        pairs.append(
            run_pair(
                env,
                ScriptedAgent(),
                workflow=workflow,
                scenario=workflow.scenarios[0],
                seed=1,
                method=method,
                runtime="process",
            )
        )
    summary = summarize(pairs)
    by = summary["by"]["schedule"]
    assert list(by) == ["concurrent-writer/writer-lookalike"]
    assert by["concurrent-writer/writer-lookalike"]["N"] == 2
    counts = fault_counts(pairs)["concurrent-writer/writer-lookalike"]
    for method in ("B0", "B6"):
        assert [(r["boundary"], r["fired"], r["of"]) for r in counts[method]] == [
            ("PRE_MUTATION", 1, 1),
            ("writer", 1, 1),
        ]


@pytest.mark.docker
@pytest.mark.parametrize("workflow", WRITERS, ids=[w.id for w in WRITERS])
def test_docker_fires_the_fault_runs_the_writer_and_agrees_with_process(
    play: Any, workflow: Any
) -> None:
    """On docker, too, the gold plan succeeds in control, the fault fires and the writer
    acts at its trigger; and the same seed gives the same writer actions, transcript,
    verdict, final state and commit log on both runtimes, in both episodes. (Its own docker
    stack, closed at the end: a stack per domain held for the session takes 16 networks.)"""
    from undobench_gym.core.env import UndoBenchEnv

    scenario = workflow.scenarios[0].id
    env = UndoBenchEnv(workflow.domain, runtime="docker")
    try:
        for fault in (None, scenario):
            process = play(workflow, fault, method="B0", seed=2)
            docker = run_episode(
                wrap(env, "B0"), ScriptedAgent(), seed=2, workflow=workflow.id, fault=fault
            )
            assert docker["writer"] and all(w["after_call"] is not None for w in docker["writer"])
            if fault is None:
                assert docker["success"], docker["verdict"]
            else:
                assert docker["fault_outcome"]["as_planned"], docker["fault_outcome"]
            for key in (
                "writer",
                "transcript",
                "verdict",
                "state_hash",
                "effects",
                "fault_outcome",
                "commit_log",
            ):
                assert process[key] == docker[key], (fault, key)
    finally:
        env.close()
