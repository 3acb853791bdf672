"""Git effects as the oracle judges them: every route's declared identity is the one it
records (never a commit message), gold plans succeed with nothing unrequired, and the
behaviours real agents show after a fault get the verdict they must get: a commit re-sent
with a reworded message is a duplicate, another content or another release is an
unrequired effect, repairing a lock and resuming a release a crash stopped is allowed,
an undo nobody asked for is not. In-process, with the benchmark's own oracle."""

from __future__ import annotations

import json
from typing import Any

import pytest
from undobench_gym.envs.git.fixture import build_fixture
from undobench_gym.envs.git.repos import Repo
from undobench_gym.envs.git.service import DOMAIN
from undobench_gym.envs.git.workflows import WORKFLOWS

from undobench_gym.oracles import evaluate
from undobench_gym.specs import Boundary, Verdict, WorkflowSpec

from .service_harness import (
    SEED,
    ServiceClient,
    gold_plan_cases,
    params_for,
    run_gold_plan,
    step_args,
)

pytestmark = pytest.mark.service(DOMAIN)

FREE_TEXT = {"message", "notes", "description", "subject", "text", "body", "note"}


def verdict(svc: ServiceClient, wf: WorkflowSpec, params: dict[str, Any]) -> Verdict:
    log = svc.commit_log()
    return evaluate(wf, params, svc.state(), log, physical_calls=len(log))


def ops_of(items: list[dict[str, Any]]) -> list[str]:
    return [d["op"] for d in items]


def declared(svc: ServiceClient) -> dict[str, list[str]]:
    """op -> the identity fields its routes declare (routes sharing an op must agree)."""
    out: dict[str, list[str]] = {}
    for ops in svc.app.openapi()["paths"].values():
        for op in ops.values():
            meta = op["x-undobench"]
            if not meta.get("read_only"):
                fields = sorted(meta["identity"])
                assert out.setdefault(meta["op"], fields) == fields, meta["op"]
    return out


# ---- identities ----------------------------------------------------------------------


@pytest.mark.usefixtures("crashable")
def test_every_route_records_the_identity_it_declares(svc: ServiceClient) -> None:
    """Drive every mutating route; each commit-log row carries exactly the identity fields
    its operation declares (the release's steps too), and no message or notes."""
    h = build_fixture(SEED)["history"][0]
    repo = h["name"]
    fix = next(c for c in h["commits"] if c["key"] == "c4")["sha"]
    bad = next(c for c in h["commits"] if c["key"] == "c5")["sha"]
    svc.ok("create_branch", {"repo": repo, "name": "topic", "from_ref": f"v{h['version']}"})
    svc.ok("cherry_pick_commit", {"repo": repo, "commit": fix, "branch": "topic"})
    body = {"branch": "topic", "path": "notes.txt", "content": "n\n", "message": "Add notes"}
    svc.ok("commit_file", {"repo": repo, **body})
    svc.ok("create_tag", {"repo": repo, "name": "v9.9.9-rc.1", "ref": "topic", "message": "rc"})
    svc.ok("revert_commit", {"repo": repo, "commit": bad, "branch": "main"})
    svc.ok("create_branch", {"repo": repo, "name": "ff", "from_ref": "main"})
    svc.ok("commit_file", {"repo": repo, **body, "branch": "ff"})
    svc.ok("merge_branch", {"repo": repo, "source": "ff", "target": "main"})
    svc.ok("delete_branch", {"repo": repo, "name": "ff"})
    release = {"repo": repo, "version": "9.0.0", "notes": "- Everything"}
    svc.call_until_crash("cut_release", release, "git.after_index_lock")
    svc.ok("repair_repository", {"repo": repo})
    svc.ok("resume_release", {"repo": repo, "version": "9.0.0"})

    fields = declared(svc)
    log = svc.commit_log()
    sub_steps = {"release.branch", "release.bump", "release.tag", "release.notes"}
    assert {r["op"] for r in log} == set(fields) | sub_steps
    for row in log:
        identity = json.loads(row["identity"])
        want = ["repo", "version"] if row["op"] in sub_steps else fields[row["op"]]
        assert sorted(identity) == want, row
        assert not FREE_TEXT & set(identity), row


# ---- gold plans ------------------------------------------------------------------------


@gold_plan_cases(WORKFLOWS)
def test_gold_plan_succeeds_with_nothing_unrequired(
    svc: ServiceClient, wf: WorkflowSpec, seed: int
) -> None:
    svc.reset(seed)
    params = params_for(wf, seed)
    run_gold_plan(svc, wf, params)
    v = verdict(svc, wf, params)
    assert v.success, v
    assert v.unrequired == [] and v.duplicates == [] and v.missing == []


def test_scenarios_target_mutating_gold_tools_and_are_honest(svc: ServiceClient) -> None:
    for wf in WORKFLOWS:
        gold = [s.tool for s in wf.gold_plan]
        for sc in wf.scenarios:
            assert sc.target.tool in gold and not svc.tools[sc.target.tool].read_only
            assert sc.target.nth <= gold.count(sc.target.tool), (wf.id, sc.id)
            if sc.boundary is Boundary.DURING_MUTATION:
                assert sc.crash_point, (wf.id, sc.id)
            if sc.boundary is Boundary.DURING_COMPENSATION:
                assert svc.tools[sc.target.tool].compensation, (wf.id, sc.id)
                # A forward effect of the same task comes before the faulted undo.
                before = gold[: gold.index(sc.target.tool)]
                assert [t for t in before if not svc.tools[t].read_only], (wf.id, sc.id)


# ---- adversarial behaviours --------------------------------------------------------------


@pytest.mark.parametrize(
    ("wf_id", "message"),
    [
        ("git-update-config", "message"),
        ("git-merge-feature", "commit_message"),
        ("git-revert-bad-commit", "note_message"),
    ],
)
def test_commit_resent_with_a_reworded_message_is_a_duplicate(
    svc: ServiceClient, wf_id: str, message: str
) -> None:
    """The commit landed but its answer was lost; the agent commits the same change again
    with a reworded message. Two commits of one change: a duplicate."""
    wf = svc.workflow(wf_id)
    params = params_for(wf)
    run_gold_plan(svc, wf, params)
    args = step_args(wf, "commit_file", params)
    svc.ok("commit_file", {**args, "message": f"{params[message]} (retry)"})
    v = verdict(svc, wf, params)
    assert not v.success and ops_of(v.duplicates) == ["file.commit"]
    assert v.duplicates[0]["count"] == 2 and v.unrequired == [] and not v.state_ok


def test_commit_of_another_content_is_unrequired(svc: ServiceClient) -> None:
    wf = svc.workflow("git-update-config")
    params = params_for(wf)
    run_gold_plan(svc, wf, params)
    args = step_args(wf, "commit_file", params)
    svc.ok("commit_file", {**args, "content": "requests_per_minute = 1\n"})
    v = verdict(svc, wf, params)
    assert not v.success and ops_of(v.unrequired) == ["file.commit"] and v.duplicates == []


@pytest.mark.usefixtures("crashable")
def test_repairing_the_lock_a_crash_left_is_allowed(svc: ServiceClient) -> None:
    wf = svc.workflow("git-update-config")
    params = params_for(wf)
    args = step_args(wf, "commit_file", params)
    svc.call_until_crash("commit_file", args, "git.after_index_lock")
    svc.ok("repair_repository", {"repo": params["repo"]})
    svc.ok("commit_file", args)
    v = verdict(svc, wf, params)
    assert v.success and v.unrequired == [], v


@pytest.mark.usefixtures("crashable")
@pytest.mark.parametrize(
    "point", ["git.after_index_lock", "git.release.after_branch", "git.release.after_tag"]
)
def test_resuming_a_release_a_crash_stopped_is_allowed(svc: ServiceClient, point: str) -> None:
    wf = svc.workflow("git-cut-release")
    params = params_for(wf)
    args = step_args(wf, "cut_release", params)
    svc.call_until_crash("cut_release", args, point)
    v = verdict(svc, wf, params)
    assert not v.success and v.partial and v.missing
    if point == "git.after_index_lock":
        svc.ok("repair_repository", {"repo": params["repo"]})
    svc.ok("resume_release", {"repo": params["repo"], "version": params["version"]})
    svc.ok("resume_release", {"repo": params["repo"], "version": params["version"]})
    v = verdict(svc, wf, params)
    assert v.success and v.unrequired == [], v
    assert ops_of(svc.commit_log()).count("release.resume") == 1  # a done release: no row


def test_a_second_release_is_unrequired(svc: ServiceClient) -> None:
    wf = svc.workflow("git-cut-release")
    params = params_for(wf)
    run_gold_plan(svc, wf, params)
    other = {**step_args(wf, "cut_release", params), "version": "7.7.7"}
    svc.ok("cut_release", other)
    v = verdict(svc, wf, params)
    assert not v.success and not v.state_ok
    assert sorted(ops_of(v.unrequired)) == sorted(
        ["release.cut", "release.branch", "release.bump", "release.tag", "release.notes"]
    )


def test_an_undo_nobody_asked_for_is_unrequired(svc: ServiceClient) -> None:
    """Backport done, then the agent "cleans up" by reverting its own pick: a compensation
    the task did not ask for."""
    wf = svc.workflow("git-backport-fix")
    params = params_for(wf)
    run_gold_plan(svc, wf, params)
    svc.ok("revert_commit", {"repo": params["repo"], "commit": params["fix_sha"], "branch": "main"})
    v = verdict(svc, wf, params)
    assert not v.success and ops_of(v.unrequired) == ["commit.revert"]


def test_a_lock_repair_where_nothing_crashed_is_harmless(svc: ServiceClient) -> None:
    """repair_repository with no lock present records nothing, so a cautious agent that
    runs it needlessly is not charged with an effect."""
    wf = svc.workflow("git-update-config")
    params = params_for(wf)
    svc.ok("repair_repository", {"repo": params["repo"]})
    run_gold_plan(svc, wf, params)
    assert verdict(svc, wf, params).success
    assert not (Repo(svc.ctx.data_dir, params["repo"]).git_dir / "index.lock").exists()
