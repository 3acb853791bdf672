"""B5-P and B6 finish a record a crash left half-done with the public resuming tool.

The rule (`derive.resumption_for`) reads the public schemas only; these tests check it
finds every resuming tool the catalogue offers, and that both methods recover every TEST
crash during a composite mutation where the schemas offer one, without a duplicate, and
give up (not claim done) where the resume is refused.
"""

from __future__ import annotations

from typing import Any

import pytest

from undobench_gym.agents.methods import server_idempotency_for, wrap
from undobench_gym.agents.public_tools import public_tools
from undobench_gym.agents.recovery.derive import resumptions
from undobench_gym.agents.scripted import ScriptedAgent
from undobench_gym.contract.specs import Boundary
from undobench_gym.core import catalog
from undobench_gym.core.pairing import run_pair

#: forward tool -> (resuming tool, filled from the found record's id, from the call)
DERIVED = {
    "create_payout": ("resume_payout", ("payout_id",), ()),
    "pay_dividend": ("resume_dividend", ("dividend_id",), ()),
    "cut_release": ("resume_release", (), ("repo", "version")),
    "start_cutover": ("resume_cutover", ("cutover_id",), ()),
    "convert_lead": ("resume_lead_conversion", (), ("lead_id",)),
    "escalate_incident": ("resume_escalation", ("escalation_id",), ()),
    "send_email_batch": ("resume_email_batch", ("batch_id",), ()),
}


def _public(workflow: Any) -> dict[str, Any]:
    tools = catalog.domain(workflow.domain).tools
    return public_tools(tools[name].openai_schema() for name in workflow.tools)


def test_every_resuming_tool_in_the_catalogue_is_derived_for_its_forward_call() -> None:
    found: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {}
    for workflow in catalog.all_workflows():
        tools = _public(workflow)
        derived = resumptions(tools)
        for name, r in derived.items():
            found[name] = (r.tool, r.from_id, r.by_name)
        # Every resuming tool a workflow offers finishes one of its forward calls.
        offered = {t.name for t in tools.values() if t.resuming}
        assert offered == {r.tool for r in derived.values()}, workflow.id
    assert found == DERIVED


def test_only_tools_marked_resuming_are_offered_as_such() -> None:
    for workflow in catalog.all_workflows():
        for tool in _public(workflow).values():
            spec = catalog.domain(workflow.domain).tools[tool.name]
            assert tool.resuming == spec.resumption, (workflow.id, tool.name)
            assert not (tool.resuming and (tool.read_only or tool.compensating)), tool.name


def _crashes(resumable: bool) -> list[tuple[str, str]]:
    out = []
    for workflow in catalog.all_workflows("test"):
        derived = resumptions(_public(workflow))
        for scenario in workflow.scenarios:
            if scenario.boundary is not Boundary.DURING_MUTATION:
                continue
            if (str(scenario.target.tool) in derived) == resumable:
                out.append((workflow.id, scenario.id))
    return out


#: Refused resumes: git demands the stale index.lock be removed first (repair_repository),
#: which no schema rule derives; the method says the record may be half-done and stops.
REFUSED = {("git-cut-release", "crash-mid-bump")}


def _run(env_for: Any, wf_id: str, sc_id: str, method: str) -> dict[str, Any]:
    workflow = catalog.find_workflow(wf_id)
    env = wrap(env_for(workflow.domain, server_idempotency_for(method)), method)
    pair: dict[str, Any] = run_pair(
        env,
        ScriptedAgent(),
        workflow=workflow,
        scenario=workflow.scenario(sc_id),
        seed=1,
        method=method,
        runtime="process",
    )
    return pair


@pytest.mark.parametrize("method", ["B6", "B5-P"])
@pytest.mark.parametrize(("wf_id", "sc_id"), _crashes(resumable=True))
def test_a_half_done_composite_is_finished_not_resent(
    env_for: Any, wf_id: str, sc_id: str, method: str
) -> None:
    pair = _run(env_for, wf_id, sc_id, method)
    assert pair["control"]["success"]
    fault = pair["fault"]
    assert fault["fault_fired"]
    resume = DERIVED[str(catalog.find_workflow(wf_id).scenario(sc_id).target.tool)][0]
    assert fault["effects"]["duplicates"] == 0
    if (wf_id, sc_id) in REFUSED:
        assert not fault["success"] and fault["finish_status"] == "gave_up"
        return
    assert fault["success"], fault["verdict"]
    assert fault["finish_status"] == "done"
    assert resume in [w["tool"] for w in fault["wire"]]


def test_the_test_split_has_crashes_on_both_sides_of_the_rule() -> None:
    resumable = _crashes(resumable=True)
    assert len(resumable) >= 6 and set(resumable) >= REFUSED
    # Storage's multipart upload has no resuming tool: the open upload must be aborted or
    # completed, which the probe-and-resume rule does not cover.
    assert ("st-publish-build-artifact", "crash-after-parts") in _crashes(resumable=False)
