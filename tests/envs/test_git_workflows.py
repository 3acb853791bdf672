"""Git effects as the oracle judges them: the shared `WorkflowContract` (every route's
declared identity is the one it records, never a commit message; gold plans succeed with
nothing unrequired; a commit re-sent with a reworded message is a duplicate, another
content or another release an unrequired effect), and here what is particular to git:
repairing a lock and resuming a release a crash stopped is allowed, an undo nobody asked
for is not. In-process, with the benchmark's own oracle."""

from __future__ import annotations

import pytest

from undobench_gym.services.domains.git.fixture import build_fixture
from undobench_gym.services.domains.git.repos import Repo
from undobench_gym.services.domains.git.service import DOMAIN
from undobench_gym.services.domains.git.workflows import WORKFLOWS

from .service_harness import ServiceClient, params_for, run_gold_plan, step_args
from .workflow_harness import (
    Resend,
    Row,
    WorkflowContract,
    gold,
    ops,
    resend_step,
    reworded,
    verdict,
)

pytestmark = pytest.mark.service(DOMAIN)

RELEASE_STEPS = ("release.branch", "release.bump", "release.tag", "release.notes")


class TestWorkflowContract(WorkflowContract):
    workflows = WORKFLOWS
    free_text = frozenset({"message", "notes", "description", "subject", "text", "body", "note"})
    #: cut_release commits each of its steps, named by the release.
    sub_effects = {op: frozenset({"repo", "version"}) for op in RELEASE_STEPS}
    resends = [
        *reworded(
            "git",
            [
                (wf_id, "commit_file", {"message": "{message} (retry)"})
                for wf_id in ("git-update-config", "git-merge-feature", "git-revert-bad-commit")
            ],
        ),
        Resend(
            "git-update-config",
            "commit of another content",
            resend_step("commit_file", {"content": "requests_per_minute = 1\n"}),
            unrequired=["file.commit"],
        ),
        Resend(
            "git-cut-release",
            "a second release",
            resend_step("cut_release", {"version": "7.7.7"}),
            unrequired=["release.cut", *RELEASE_STEPS],
        ),
    ]

    def exercise(self, svc: ServiceClient) -> list[Row]:
        """Drive every mutating route, and a release a crash stopped, repaired and resumed."""
        h = build_fixture(svc.seed)["history"][0]
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
        return svc.commit_log()


# ---- crashes and undos -----------------------------------------------------------------


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
    assert svc.ops().count("release.resume") == 1  # a done release: no row


def test_an_undo_nobody_asked_for_is_unrequired(svc: ServiceClient) -> None:
    """Backport done, then the agent "cleans up" by reverting its own pick: a compensation
    the task did not ask for."""
    ep = gold(svc, "git-backport-fix")
    revert = {"repo": ep.params["repo"], "commit": ep.params["fix_sha"], "branch": "main"}
    svc.ok("revert_commit", revert)
    v = ep.verdict()
    assert not v.success and ops(v.unrequired) == ["commit.revert"]


def test_a_lock_repair_where_nothing_crashed_is_harmless(svc: ServiceClient) -> None:
    """repair_repository with no lock present records nothing, so a cautious agent that
    runs it needlessly is not charged with an effect."""
    wf = svc.workflow("git-update-config")
    params = params_for(wf)
    svc.ok("repair_repository", {"repo": params["repo"]})
    run_gold_plan(svc, wf, params)
    assert verdict(svc, wf, params).success
    assert not (Repo(svc.ctx.data_dir, params["repo"]).git_dir / "index.lock").exists()
