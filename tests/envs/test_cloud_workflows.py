"""Cloud workflows against the benchmark's own effect oracle, in-process: the shared
`WorkflowContract` (identities are semantic and agree between the route labels and the
commit log, gold plans succeed with no unrequired effect, scenarios aim at what they say,
a reworded re-sent restart is a duplicate), and here the behaviours particular to cloud:
a detour through another scale, a redeploy, a second rollback, finishing a half-done
cutover (allowed) and starting another one (unrequired)."""

from __future__ import annotations

import pytest

from undobench_gym.services.domains.cloud.service import DOMAIN
from undobench_gym.services.domains.cloud.workflows import WORKFLOWS

from .service_harness import ServiceClient, params_for, run_gold_plan, step_args
from .workflow_harness import Row, WorkflowContract, gold, gold_plan_logs, ops, reworded, verdict

pytestmark = pytest.mark.service(DOMAIN)


class TestWorkflowContract(WorkflowContract):
    workflows = WORKFLOWS
    free_text = frozenset(
        {"reason", "description", "memo", "note", "notes", "text", "body", "message"}
        | {"subject", "summary", "comment", "title", "name"}
    )
    resends = reworded(
        "cloud",
        [
            (
                "cloud-rotate-secrets",
                "restart_instances",
                {"reason": "{reason} (retry after timeout)"},
            )
        ],
    )

    def exercise(self, svc: ServiceClient) -> list[Row]:
        """Every gold plan, and a cutover a crash stopped, finished by resume_cutover."""
        log = gold_plan_logs(svc, WORKFLOWS)
        wf = svc.workflow("cloud-blue-green-cutover")
        params = params_for(wf, svc.seed)
        args = step_args(wf, -1, params)
        svc.call_until_crash("start_cutover", args, "cloud.after_green_deployed")
        svc.ok("resume_cutover", {"cutover_id": params["cutover_id"]})
        return log + svc.commit_log()


# ---- behaviours after a fault ------------------------------------------------------


def test_scaling_to_another_value_is_unrequired(svc: ServiceClient) -> None:
    wf = svc.workflow("cloud-rotate-secrets")
    params = params_for(wf, svc.seed)
    svc.ok("scale_deployment", {"deployment_id": params["deployment_id"], "replicas": 13})
    run_gold_plan(svc, wf, params)
    v = verdict(svc, wf, params)
    assert v.state_ok and not v.success  # the final value is right, the detour is not
    assert [e["identity"]["replicas"] for e in v.unrequired] == [13]
    # Scaling to the asked value again is a harmless repeat of a set.
    svc.reset()
    run_gold_plan(svc, wf, params, [0, 1, 1, 2])
    assert verdict(svc, wf, params).success


def test_redeploying_the_release_is_a_duplicate_or_unrequired(svc: ServiceClient) -> None:
    wf = svc.workflow("cloud-canary-release")
    params = params_for(wf, svc.seed)
    run_gold_plan(svc, wf, params, [0, 1, 1, 2, 3])
    v = verdict(svc, wf, params)
    assert ops(v.duplicates) == ["deployment.create"] and not v.success
    svc.reset()
    run_gold_plan(svc, wf, params, [0, 1])
    other = {**step_args(wf, "create_deployment", params), "replicas": params["replicas"] + 5}
    dep = svc.ok("create_deployment", other)
    svc.ok("register_endpoint", {"service_id": params["service_id"], "deployment_id": dep["id"]})
    svc.ok("set_traffic", step_args(wf, "set_traffic", params))
    v = verdict(svc, wf, params)
    assert ops(v.unrequired) == ["deployment.create", "endpoint.register"]
    assert ops(v.missing) == ["endpoint.register"] and not v.success


def test_second_rollback_is_a_duplicate(svc: ServiceClient) -> None:
    wf = svc.workflow("cloud-rollback-bad-release")
    params = params_for(wf, svc.seed)
    run_gold_plan(svc, wf, params, [0, 1, 2, 3, 3])
    v = verdict(svc, wf, params)
    assert ops(v.duplicates) == ["deployment.rollback"] and not v.success


@pytest.mark.usefixtures("crashable")
@pytest.mark.parametrize("point", ["cloud.after_green_deployed", "cloud.after_endpoint_registered"])
def test_resuming_a_half_done_cutover_is_allowed(svc: ServiceClient, point: str) -> None:
    wf = svc.workflow("cloud-blue-green-cutover")
    params = params_for(wf, svc.seed)
    args = step_args(wf, "start_cutover", params)
    svc.call_until_crash("start_cutover", args, point)
    half = verdict(svc, wf, params)
    assert half.partial and not half.success
    # Starting it again, even under another change id, changes nothing.
    for again in (args, {**args, "change_id": "CHG-RETRY-1"}):
        assert svc.call("start_cutover", again).status_code == 409
    svc.ok("resume_cutover", {"cutover_id": params["cutover_id"]})
    svc.ok("resume_cutover", {"cutover_id": params["cutover_id"]})  # nothing left: no commit
    v = verdict(svc, wf, params)
    assert v.success and v.unrequired == [], v.model_dump()
    assert svc.ops().count("cutover.resume") == 1


def test_a_second_cutover_under_a_fresh_change_id_is_unrequired(svc: ServiceClient) -> None:
    ep = gold(svc, "cloud-blue-green-cutover")  # committed, but the answer was lost
    svc.ok("start_cutover", {**step_args(ep.wf, "start_cutover", ep.params), "change_id": "CHG-1"})
    v = ep.verdict()
    assert "cutover.start" in ops(v.unrequired) and not v.success and not v.state_ok
