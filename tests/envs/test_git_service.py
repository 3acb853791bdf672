"""Git domain in-process: real repositories on disk, seeded deterministically; gold plans
against the real routes; duplicates, conflicts, lock files a crash leaves and their
repair; name validation. No network, no service subprocess."""

from __future__ import annotations

import re
import subprocess
import time
from typing import Any

import pytest

from undobench_gym.contract.specs import Boundary, WorkflowSpec
from undobench_gym.services.domains.git.fixture import build_fixture, commit
from undobench_gym.services.domains.git.gitcli import git_env, path_problem, ref_name_problem
from undobench_gym.services.domains.git.repos import Repo, snapshot
from undobench_gym.services.domains.git.service import DOMAIN
from undobench_gym.services.domains.git.workflows import WORKFLOWS

from .service_harness import (
    MALFORMED_JSON,
    SEED,
    ServiceClient,
    assert_done,
    assert_gold_plan_completes,
    assert_gold_plan_is_reproducible,
    assert_key_replays,
    assert_malformed_json_rejected,
    assert_rejected,
    assert_reset_is_deterministic,
    assert_routes_declare_effects,
    assert_workflow_is_consistent,
    effect_count,
    failed_invariants,
    gold_plan_cases,
    params_for,
    refused,
    retry_after_gold_plan,
    run_gold_plan,
    step_args,
    unchanged,
)

pytestmark = pytest.mark.service(DOMAIN)

CRASH_POINTS = {"git.after_index_lock", "git.release.after_branch", "git.release.after_tag"}


def repo(svc: ServiceClient, name: str) -> Repo:
    return Repo(svc.ctx.data_dir, name)


def assert_mirror_matches_disk(svc: ServiceClient) -> None:
    """The refs and files tables mirror what git has on disk."""
    state = svc.state()
    refs: list[dict[str, Any]] = []
    files: list[dict[str, Any]] = []
    for name in state["extra"]["repos"]:
        r, f = snapshot(repo(svc, name))
        refs += r
        files += f

    def key(row: dict[str, Any]) -> tuple[str, ...]:
        return (row["repo"], row["ref"], row.get("path", ""))

    assert sorted(refs, key=key) == sorted(state["tables"]["git_refs"], key=key)
    assert sorted(files, key=key) == sorted(state["tables"]["git_files"], key=key)


def assert_done_on_disk(svc: ServiceClient, wf: WorkflowSpec, params: dict[str, Any]) -> None:
    assert_done(svc, wf, params)
    assert_mirror_matches_disk(svc)


# ---- seeded state ------------------------------------------------------------------


def test_seeded_state_is_deterministic(svc: ServiceClient) -> None:
    assert_reset_is_deterministic(svc)


@pytest.mark.parametrize("seed", [0, SEED, 99])
def test_python_object_ids_match_git(svc: ServiceClient, seed: int) -> None:
    """The fixture's commit, tree and tag ids are the ones git wrote to disk."""
    svc.reset(seed)
    fx = build_fixture(seed)
    state = svc.state()
    assert state["tables"]["git_refs"] == fx["refs"]
    assert state["tables"]["git_files"] == fx["files"]
    assert_mirror_matches_disk(svc)
    for h in fx["history"]:
        r = repo(svc, h["name"])
        for c in h["commits"]:
            assert r.resolve(c["sha"]) == c["sha"]
        assert r.refs()[f"refs/tags/{h['tags'][0]['name']}"] == h["tags"][0]["sha"]
        assert r.head_branch() == "main"
        # The index tracks main: nothing is staged.
        assert r.out("diff", "--cached", "--name-only", "refs/heads/main") == ""


def _git_says(r: Repo, ref: str) -> tuple[bool, str | None]:
    exists = r.git("show-ref", "--verify", "--quiet", ref, check=False).returncode == 0
    proc = r.git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
    return exists, (proc.stdout.decode().strip() or None) if proc.returncode == 0 else None


def test_refs_read_from_files_agree_with_git(svc: ServiceClient) -> None:
    """`Repo.ref_exists` and `Repo.resolve` read branch and tag refs from git's files
    (a git process apiece was the git service's main cost): they must say what git says,
    for loose refs, packed refs, missing refs, a name below an existing branch, and a ref
    whose update a crash left half-done (its `.lock` beside the old value)."""
    svc.reset(SEED)
    h = build_fixture(SEED)["history"][0]
    r = repo(svc, h["name"])
    r.git("pack-refs", "--all")  # every ref now lives in packed-refs
    tip = r.read_ref("refs/heads/main")
    assert tip is not None
    r.git("update-ref", "refs/heads/loose-only", tip)  # a loose ref over packed ones
    (r.git_dir / "refs" / "heads" / "main.lock").write_text("0" * 40 + "\n")
    tag = f"refs/tags/{h['tags'][0]['name']}"
    names = [
        "refs/heads/main",
        "refs/heads/loose-only",
        "refs/heads/main/below",
        tag,
        "refs/heads/absent",
        "refs/tags/absent",
    ]
    for ref in names:
        exists, commit_id = _git_says(r, ref)
        assert r.ref_exists(ref) is exists, ref
        if ref.startswith("refs/heads/"):
            assert r.resolve(ref) == commit_id, ref
    assert r.resolve(tag) == _git_says(r, tag)[1]  # an annotated tag: peeled by git
    # Short names are read from the branch's file only where git's lookup order reaches
    # refs/heads/<name> first: a tag, a ref below refs/ or a file in .git of the same
    # name, or a name that could be an abbreviated object id, is git's to resolve.
    short = tag.removeprefix("refs/tags/")
    other = r.read_ref("refs/heads/loose-only")
    assert other is not None
    r.git("update-ref", f"refs/heads/{short}", tip)  # a branch shadowed by the tag
    r.git("update-ref", "refs/heads/heads/x", other)  # `heads/x` is refs/heads/x's name
    r.git("update-ref", "refs/heads/x", tip)
    r.git("update-ref", "refs/heads/HEAD", other)  # `HEAD` is .git/HEAD
    r.git("update-ref", "refs/heads/beef", other)  # hex: git may read an object id
    r.git("update-ref", "refs/heads/desc", other)
    (r.git_dir / "desc").write_text("not a ref\n")  # a file in .git of the same name
    shorts = ["main", "loose-only", short, "heads/x", "x", "HEAD", "beef", "desc", "absent"]
    shorts += ["main~1", "main^", f"{tip[:12]}", "main/below", "@", "tags/" + short]
    for rev in shorts:
        assert r.resolve(rev) == _git_says(r, rev)[1], rev
    assert r._branch_wins("main") and r._branch_wins("loose-only")
    assert not any(r._branch_wins(rev) for rev in (short, "heads/x", "HEAD", "beef", "desc"))
    # for-each-ref's own listing: a commit ref is (name, commit, no tag object); an
    # annotated tag is (name, the commit it peels to, the tag object).
    fmt = "--format=%(refname) %(objecttype) %(objectname) %(*objectname)"
    expected = []
    for line in r.out("for-each-ref", fmt, "refs/heads", "refs/tags").splitlines():
        name, kind, oid, *peeled = line.split()
        expected.append((name, oid, None) if kind == "commit" else (name, peeled[0], oid))
    assert [(x["ref"], x["sha"], x["tag_object"]) for x in snapshot(r)[0]] == expected


def test_runtime_commits_are_deterministic(svc: ServiceClient) -> None:
    first = assert_gold_plan_is_reproducible(svc, svc.workflow("git-merge-feature"))
    assert first[1]["date"] == "2026-01-01T00:00:01Z"


def test_reset_rebuilds_repositories(svc: ServiceClient) -> None:
    fresh = svc.reset(SEED)
    wf = svc.workflow("git-cut-release")
    params = params_for(wf)
    run_gold_plan(svc, wf, params)
    (repo(svc, params["repo"]).git_dir / "index.lock").write_text("")
    assert svc.state()["hash"] != fresh
    started = time.monotonic()
    assert svc.reset(SEED) == fresh
    assert time.monotonic() - started < 1.0
    state = svc.state()
    assert state["partial"] == [] and svc.commit_log() == []
    assert all(info["lock_files"] == [] for info in state["extra"]["repos"].values())
    assert sorted(p.name for p in (svc.ctx.data_dir / "repos").iterdir()) == sorted(
        state["extra"]["repos"]
    )


# ---- tool catalogue and workflows --------------------------------------------------


def test_every_route_declares_its_effect(svc: ServiceClient) -> None:
    classes = assert_routes_declare_effects(svc)
    assert {c for c, _ in classes} <= {"additive", "set", "create_unique"}
    protection = {name: tool.idempotency for name, tool in svc.tools.items()}
    assert protection["commit_file"] == "native"
    assert protection["create_tag"] == protection["cut_release"] == "constraint"
    assert protection["revert_commit"] == "none"


def test_workflows_are_consistent(svc: ServiceClient) -> None:
    assert len(WORKFLOWS) == 8  # three of them the stress split's (cascades, a writer)
    splits = [w.split for w in WORKFLOWS]
    assert [splits.count(s) for s in ("dev", "val", "test", "stress")] == [2, 1, 2, 3]
    assert len({w.id for w in WORKFLOWS}) == 8
    boundaries = {s.boundary for w in WORKFLOWS for s in w.scenarios}
    assert boundaries == set(Boundary)
    assert any(s.ambiguous for w in WORKFLOWS for s in w.scenarios)
    for wf in WORKFLOWS:
        assert_workflow_is_consistent(svc, wf, prefix="git-")
        for sc in wf.scenarios:
            assert sc.target.tool is not None, f"{wf.id}/{sc.id} never fires"
            assert sc.crash_point is None or sc.crash_point in CRASH_POINTS
        for seed in (SEED, 11):
            text = wf.instruction.format(**params_for(wf, seed))
            assert not re.search(r"fault|inject|retr|bench|test", text, re.IGNORECASE), text


# ---- gold plans --------------------------------------------------------------------


@gold_plan_cases(WORKFLOWS)
def test_gold_plan_leaves_invariants_true(svc: ServiceClient, wf: WorkflowSpec, seed: int) -> None:
    assert_gold_plan_completes(svc, wf, seed)
    assert_mirror_matches_disk(svc)


@pytest.mark.parametrize("wf_id", ["git-update-config", "git-merge-feature"])
def test_repeated_commit_is_a_duplicate(svc: ServiceClient, wf_id: str) -> None:
    wf = svc.workflow(wf_id)
    params, again = retry_after_gold_plan(svc, wf, "commit_file")
    assert again.status_code == 201  # the same change again is a second (empty) commit
    assert failed_invariants(svc, wf, params)
    assert effect_count(svc.commit_log(), wf.required_effects[0], params) == 2


def test_commit_idempotency_key_replays(svc: ServiceClient) -> None:
    wf = svc.workflow("git-update-config")
    params = params_for(wf)
    args = step_args(wf, 1, params)
    assert_key_replays(svc, "commit_file", args, "ops-1", changed={"content": "x\n"})
    assert failed_invariants(svc, wf, params) == []


def test_expected_head_makes_a_retry_safe(svc: ServiceClient) -> None:
    wf = svc.workflow("git-update-config")
    params = params_for(wf)
    tip = svc.call("get_log", {"repo": params["repo"], "limit": 1}).json()[0]["sha"]
    args = {**step_args(wf, 1, params), "expected_head": tip[:12]}
    assert svc.call("commit_file", args).status_code == 201
    again = svc.call("commit_file", args)
    assert again.status_code == 409 and again.json()["detail"]["type"] == "branch_moved"
    assert failed_invariants(svc, wf, params) == []


def test_repeats_of_unique_and_set_effects(svc: ServiceClient) -> None:
    wf = svc.workflow("git-backport-fix")
    params = params_for(wf)
    run_gold_plan(svc, wf, params)
    for i, step in enumerate(wf.gold_plan[1:], start=1):
        res = svc.call(step.tool, step_args(wf, i, params))
        assert res.status_code == 409, (step.tool, res.text)
    merge = svc.workflow("git-merge-feature")
    mp = params_for(merge)
    run_gold_plan(svc, merge, mp)
    again = svc.call("merge_branch", step_args(merge, 2, mp))
    assert again.status_code == 200 and again.json()["result"] == "already_up_to_date"
    rel = svc.workflow("git-cut-release")
    rp = params_for(rel)
    run_gold_plan(svc, rel, rp)
    again = svc.call("cut_release", step_args(rel, 1, rp))
    assert again.status_code == 409 and again.json()["detail"]["type"] == "release_exists"
    state = svc.state()
    for w, p in ((wf, params), (merge, mp), (rel, rp)):
        assert failed_invariants(state, w, p) == []


def test_repeated_revert_is_refused(svc: ServiceClient) -> None:
    wf = svc.workflow("git-revert-bad-commit")
    params, again = retry_after_gold_plan(svc, wf, "revert_commit")
    assert again.status_code == 409 and again.json()["detail"]["type"] == "empty_change"
    assert_done_on_disk(svc, wf, params)


def test_merge_conflicts_and_fast_forward_rules(svc: ServiceClient) -> None:
    h = build_fixture(SEED)["history"][0]
    name, feature = h["name"], h["feature_branch"]
    for branch in ("main", feature):
        body = {"branch": branch, "path": "VERSION", "content": f"{branch}\n", "message": "v"}
        assert svc.call("commit_file", {"repo": name, **body}).status_code == 201
    res = svc.call("merge_branch", {"repo": name, "source": feature, "target": "main"})
    assert res.status_code == 409 and "VERSION" in res.json()["detail"]["message"]
    ff = {"repo": name, "source": feature, "target": "main", "mode": "fast_forward"}
    assert svc.call("merge_branch", ff).status_code == 409
    assert svc.call("create_branch", {"repo": name, "name": "topic"}).status_code == 201
    body = {"repo": name, "branch": "topic", "path": "notes.txt", "content": "n\n", "message": "n"}
    assert svc.call("commit_file", body).status_code == 201
    res = svc.call("merge_branch", {"repo": name, "source": "topic", "target": "main"})
    assert res.json()["result"] == "fast_forward"
    assert repo(svc, name).out("diff", "--cached", "--name-only", "refs/heads/main") == ""
    assert svc.call("delete_branch", {"repo": name, "name": "topic"}).status_code == 200
    assert svc.call("delete_branch", {"repo": name, "name": "topic"}).status_code == 404
    assert svc.call("delete_branch", {"repo": name, "name": "main"}).status_code == 409
    assert svc.state()["partial"] == []
    assert_mirror_matches_disk(svc)


# ---- lock files and half-cut releases ----------------------------------------------


@pytest.mark.usefixtures("crashable")
def test_crash_holding_index_lock_then_repair(svc: ServiceClient) -> None:
    wf = svc.workflow("git-update-config")
    params = params_for(wf)
    args = step_args(wf, 1, params)
    svc.call_until_crash("commit_file", args, "git.after_index_lock")
    r = repo(svc, params["repo"])
    assert svc.state()["partial"] == [
        f"repository {params['repo']}: lock file .git/index.lock left behind"
    ]
    assert svc.call("get_repository", {"repo": params["repo"]}).json()["lock_files"] == [
        ".git/index.lock"
    ]
    again = svc.call("commit_file", args)
    assert again.status_code == 409 and again.json()["detail"]["type"] == "repository_locked"
    message = again.json()["detail"]["message"]
    assert message.startswith(
        f"fatal: Unable to create '{params['repo']}/.git/index.lock': File exists."
    )
    # A plain `git commit` in that repository is refused with the same words.
    plain = subprocess.run(
        ["git", "commit", "--allow-empty", "-m", "x"],
        cwd=r.path,
        env=git_env(r.home),
        capture_output=True,
        text=True,
        check=False,
    )
    assert plain.returncode != 0
    assert "index.lock': File exists." in plain.stderr
    assert message.splitlines()[1:] == plain.stderr.strip().splitlines()[1:]
    assert svc.commit_log() == []
    fixed = svc.call("repair_repository", {"repo": params["repo"]})
    assert fixed.json()["removed_lock_files"] == [".git/index.lock"]
    assert (
        svc.call("repair_repository", {"repo": params["repo"]}).json()["removed_lock_files"] == []
    )
    assert svc.call("commit_file", args).status_code == 201
    state = svc.state()
    assert failed_invariants(state, wf, params) == [] and state["partial"] == []
    assert svc.ops() == ["repo.repair", "file.commit"]


@pytest.mark.usefixtures("crashable")
@pytest.mark.parametrize(
    ("point", "stopped"),
    [
        ("git.release.after_branch", "branch_created"),
        ("git.after_index_lock", "branch_created"),
        ("git.release.after_tag", "tagged"),
    ],
)
def test_crash_mid_release_then_resume(svc: ServiceClient, point: str, stopped: str) -> None:
    wf = svc.workflow("git-cut-release")
    params = params_for(wf)
    args = step_args(wf, 1, params)
    svc.call_until_crash("cut_release", args, point)
    partial = svc.state()["partial"]
    assert f"release {params['version']} of {params['repo']} stopped at {stopped}" in partial[-1]
    locked = point == "git.after_index_lock"
    assert (len(partial) == 2) is locked
    again = svc.call("cut_release", args)
    assert again.status_code == 409 and "resume_release" in again.json()["detail"]["message"]
    resume = {"repo": params["repo"], "version": params["version"]}
    res = svc.call("resume_release", resume)
    if locked:
        assert res.status_code == 409 and res.json()["detail"]["type"] == "repository_locked"
        assert svc.call("repair_repository", {"repo": params["repo"]}).status_code == 200
        res = svc.call("resume_release", resume)
    assert res.status_code == 200 and res.json()["status"] == "complete"
    assert svc.call("resume_release", resume).json()["status"] == "complete"
    assert_done_on_disk(svc, wf, params)


def test_stale_ref_lock_and_release_branch_without_tag(svc: ServiceClient) -> None:
    h = build_fixture(SEED)["history"][1]
    r = repo(svc, h["name"])
    (r.git_dir / "refs" / "heads" / "main.lock").write_text("")
    res = svc.call(
        "commit_file",
        {"repo": h["name"], "branch": "main", "path": "a.txt", "content": "a\n", "message": "a"},
    )
    assert res.status_code == 409 and "cannot lock ref 'refs/heads/main'" in res.text
    assert not (r.git_dir / "index.lock").exists()  # the lock was rolled back
    assert svc.call("create_branch", {"repo": h["name"], "name": "release/9.9.9"}).is_success
    assert svc.state()["partial"] == [
        f"repository {h['name']}: lock file .git/refs/heads/main.lock left behind",
        f"repository {h['name']}: branch release/9.9.9 has no tag v9.9.9",
    ]
    removed = svc.call("repair_repository", {"repo": h["name"]}).json()["removed_lock_files"]
    assert removed == [".git/refs/heads/main.lock"]
    assert svc.call("create_tag", {"repo": h["name"], "name": "v9.9.9", "ref": "release/9.9.9"})
    assert svc.state()["partial"] == []


# ---- validation --------------------------------------------------------------------

NAMES = [
    "main", "feature/x", "release/1.2.3", "v1.2.3-rc.1", "a..b", "-x", "x/", "/x", "a//b",
    ".hidden", "x.lock", "a/.b", "a b", "a~1", "a^", "a:b", "a?", "a*", "a[", "a\\b", "x.",
    "@", "a@{b", "HEAD", "hot@fix", "ünï", "",
]  # fmt: skip


@pytest.mark.parametrize("name", NAMES)
def test_ref_names_follow_git_check_ref_format(name: str) -> None:
    proc = subprocess.run(
        ["git", "check-ref-format", "--branch", name], capture_output=True, check=False
    )
    ours = ref_name_problem(name) is None
    if name in ("@", "HEAD", "ünï"):  # refused here, though git accepts some of these
        assert not ours
    else:
        assert ours == (proc.returncode == 0), (name, ref_name_problem(name))


@pytest.mark.parametrize(
    "path",
    ["../x", "a/../../etc/passwd", "/etc/passwd", ".git/config", "a/.git/hooks/x", ".GIT/x",
     "a//b", "a/./b", "a\\b", "a\0b", "", "x/", "a b", "é"],
)  # fmt: skip
def test_bad_paths_are_refused(svc: ServiceClient, path: str) -> None:
    assert path_problem(path) is not None
    name = build_fixture(SEED)["repos"][0]["name"]
    body = {"branch": "main", "path": path, "content": "x", "message": "m"}
    assert_rejected(svc, "POST", f"/v1/repos/{name}/commits", json=body)
    res = svc.public.get(f"/v1/repos/{name}/file", params={"path": path})
    assert 400 <= res.status_code < 500, res.text
    assert svc.commit_log() == []


def _commit(**over: Any) -> dict[str, Any]:
    return {"branch": "main", "path": "a.txt", "content": "x", "message": "m", **over}


def test_bad_bodies_are_4xx(svc: ServiceClient) -> None:
    fx = build_fixture(SEED)
    base = f"/v1/repos/{fx['repos'][0]['name']}"
    sha = commit(fx["history"][0], "c4")["sha"]
    bad: list[tuple[str, str, Any]] = [
        ("POST", f"{base}/commits", _commit(content=5)),
        ("POST", f"{base}/commits", _commit(message="  ")),
        ("POST", f"{base}/commits", _commit(message="a\0b")),
        ("POST", f"{base}/commits", _commit(content="x" * 70_000)),
        ("POST", f"{base}/commits", _commit(branch="nope")),
        ("POST", f"{base}/commits", _commit(branch="-D")),
        ("POST", f"{base}/commits", _commit(expected_head="zz")),
        ("POST", f"{base}/commits", _commit(path="README.md/x")),
        ("POST", f"{base}/commits", _commit(path="src")),
        ("POST", f"{base}/commits", [1, 2]),
        ("POST", "/v1/repos/no-such-repo/commits", _commit()),
        ("POST", "/v1/repos/..%2F..%2Fetc/commits", _commit()),
        ("POST", f"{base}/branches", {"name": "--force", "from_ref": "main"}),
        ("POST", f"{base}/branches", {"name": "ok", "from_ref": "main~1"}),
        ("POST", f"{base}/branches", {"name": "ok", "from_ref": "deadbeef"}),
        ("POST", f"{base}/tags", {"name": "v1 2", "ref": "main"}),
        ("POST", f"{base}/tags", {"name": "v1", "ref": "nope"}),
        ("POST", f"{base}/merges", {"source": "main", "target": "main", "mode": "octopus"}),
        ("POST", f"{base}/merges", {"source": "nope", "target": "main"}),
        ("POST", f"{base}/cherry-picks", {"commit": "not-a-sha", "branch": "main"}),
        ("POST", f"{base}/cherry-picks", {"commit": "0" * 40, "branch": "main"}),
        ("POST", f"{base}/reverts", {"commit": sha, "branch": "a..b"}),
        ("POST", f"{base}/releases", {"version": "1.2", "notes": "n"}),
        ("POST", f"{base}/releases", {"version": "01.2.3", "notes": "n"}),
        ("POST", f"{base}/releases", {"version": "1.2.3", "notes": ""}),
        ("POST", f"{base}/releases/1.2.3/resume", None),
        ("POST", f"{base}/releases/x/resume", None),
        ("DELETE", f"{base}/branches?name=..", None),
    ]
    with unchanged(svc):
        for method, path, body in bad:
            refused(svc, method, path, json=body)
    assert svc.state()["partial"] == []
    assert not list((svc.ctx.data_dir).glob("**/etc"))


@pytest.mark.parametrize("raw", [*MALFORMED_JSON, b'{"branch": "main"'])
def test_malformed_json_is_4xx(svc: ServiceClient, raw: bytes) -> None:
    base = f"/v1/repos/{build_fixture(SEED)['repos'][0]['name']}"
    tails = ("commits", "branches", "tags", "merges", "cherry-picks", "reverts", "releases")
    assert_malformed_json_rejected(svc, [("POST", f"{base}/{t}") for t in tails], raw)


def test_bad_queries_are_4xx(svc: ServiceClient) -> None:
    base = f"/v1/repos/{build_fixture(SEED)['repos'][0]['name']}"
    assert svc.public.get(f"{base}/log", params={"limit": 0}).status_code == 422
    assert svc.public.get(f"{base}/log", params={"ref": "main^"}).status_code == 400
    assert svc.public.get(f"{base}/log", params={"ref": "nope"}).status_code == 404
    assert svc.public.get(f"{base}/file", params={"path": "nope.txt"}).status_code == 404
    assert (
        svc.public.get(f"{base}/diff", params={"base": "main", "head": "x..y"}).status_code == 400
    )
    assert svc.public.get(f"{base}/commits/xyz").status_code == 422
    assert svc.public.get(f"{base}/commits/{'0' * 40}").status_code == 404
    assert svc.public.get("/v1/repos/UPPER").status_code == 422
    assert svc.public.get("/v1/repos/missing").status_code == 404
