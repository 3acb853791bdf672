"""Git domain in-process: real repositories on disk, seeded deterministically; gold plans
against the real routes; duplicates, conflicts, lock files a crash leaves and their
repair; name validation. No network, no service subprocess."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from httpx import Response
from undobench_gym.envs._service.app import create_apps
from undobench_gym.envs._service.context import CRASH_HEADER, ServiceContext
from undobench_gym.envs.git.fixture import build_fixture, commit
from undobench_gym.envs.git.gitcli import git_env, path_problem, ref_name_problem
from undobench_gym.envs.git.repos import Repo, snapshot
from undobench_gym.envs.git.service import DOMAIN
from undobench_gym.envs.git.workflows import WORKFLOWS

from undobench_gym.specs import Boundary, EffectExpectation, StatePredicate, WorkflowSpec, fill

SEED = 3
CRASH_POINTS = {"git.after_index_lock", "git.release.after_branch", "git.release.after_tag"}


class Service:
    def __init__(self, ctx: ServiceContext, public: FastAPI, admin: FastAPI) -> None:
        self.ctx = ctx
        self.app = public
        self.public = TestClient(public)
        self.admin = TestClient(admin)
        self.routes = routes_by_tool(public)

    def reset(self, seed: int = SEED) -> str:
        res = self.admin.post("/admin/reset", json={"seed": seed})
        assert res.status_code == 200, res.text
        return str(res.json()["hash"])

    def state(self) -> dict[str, Any]:
        res = self.admin.get("/admin/state")
        assert res.status_code == 200, res.text
        return dict(res.json())

    def commit_log(self) -> list[dict[str, Any]]:
        return list(self.admin.get("/admin/commit-log").json())

    def call(self, tool: str, args: dict[str, Any] | None = None, **kw: Any) -> Response:
        method, path = self.routes[tool]
        rest = dict(args or {})
        for name in re.findall(r"\{(\w+)\}", path):
            path = path.replace(f"{{{name}}}", str(rest.pop(name)))
        if method in ("get", "delete"):
            return self.public.request(method.upper(), path, params=rest, **kw)
        return self.public.request(method.upper(), path, json=rest, **kw)

    def repo(self, name: str) -> Repo:
        return Repo(self.ctx.data_dir, name)


def routes_by_tool(app: FastAPI) -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    for path, ops in app.openapi()["paths"].items():
        for method, op in ops.items():
            out[op["operationId"]] = (method, path)
    return out


@pytest.fixture
def svc(tmp_path: Path) -> Iterator[Service]:
    ctx = ServiceContext.open(DOMAIN, tmp_path)
    public, admin = create_apps(DOMAIN, ctx)
    service = Service(ctx, public, admin)
    service.reset()
    yield service
    ctx.engine.dispose()


class Crashed(Exception):
    """Stands in for the process exit of an armed crash point."""


@pytest.fixture
def crashable(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_exit(code: int) -> None:
        raise Crashed(code)

    monkeypatch.setattr(os, "_exit", fake_exit)


# ---- evaluation helpers ------------------------------------------------------------


def run_gold(svc: Service, wf: WorkflowSpec, params: dict[str, Any]) -> list[Any]:
    responses: list[Any] = []
    for step in wf.gold_plan:
        res = svc.call(step.tool, fill(step.arguments, params))
        assert res.status_code < 300, f"{wf.id} {step.tool}: {res.status_code} {res.text}"
        responses.append(res.json())
    return responses


def evaluate(pred: StatePredicate, params: dict[str, Any], tables: dict[str, Any]) -> bool:
    where = fill(pred.where, params)
    rows = [r for r in tables[pred.table] if all(r.get(k) == v for k, v in where.items())]
    expected = fill(pred.value, params)
    if pred.op == "count":
        return len(rows) == expected
    if len(rows) != 1 or pred.field is None:
        return False
    return bool(rows[0][pred.field] == expected)


def failing(wf: WorkflowSpec, params: dict[str, Any], state: dict[str, Any]) -> list[str]:
    return [p.description for p in wf.invariants if not evaluate(p, params, state["tables"])]


def effect_count(log: list[dict[str, Any]], effect: EffectExpectation, params: Any) -> int:
    identity = fill(effect.identity, params)
    return sum(1 for r in log if r["op"] == effect.op and json.loads(r["identity"]) == identity)


def params_for(wf: WorkflowSpec, seed: int = SEED) -> dict[str, Any]:
    return wf.draw_params(seed, build_fixture(seed))


def workflow(wf_id: str) -> WorkflowSpec:
    return next(w for w in WORKFLOWS if w.id == wf_id)


def assert_mirror_matches_disk(svc: Service) -> None:
    state = svc.state()
    refs: list[dict[str, Any]] = []
    files: list[dict[str, Any]] = []
    for name in state["extra"]["repos"]:
        r, f = snapshot(svc.repo(name))
        refs += r
        files += f

    def key(row: dict[str, Any]) -> tuple[str, ...]:
        return (row["repo"], row["ref"], row.get("path", ""))

    assert sorted(refs, key=key) == sorted(state["tables"]["git_refs"], key=key)
    assert sorted(files, key=key) == sorted(state["tables"]["git_files"], key=key)


def assert_done(svc: Service, wf: WorkflowSpec, params: dict[str, Any]) -> None:
    state = svc.state()
    assert failing(wf, params, state) == []
    assert state["partial"] == []
    log = svc.commit_log()
    for effect in wf.required_effects:
        assert effect_count(log, effect, params) == 1, effect
    for effect in wf.forbidden_effects:
        assert effect_count(log, effect, params) == 0, effect
    assert_mirror_matches_disk(svc)


# ---- seeded state ------------------------------------------------------------------


def test_seeded_state_is_deterministic(svc: Service) -> None:
    first = svc.reset(SEED)
    assert svc.reset(SEED) == first
    assert svc.state()["hash"] == first
    assert svc.reset(SEED + 1) != first
    assert build_fixture(SEED) == build_fixture(SEED)
    assert build_fixture(SEED) != build_fixture(SEED + 1)


@pytest.mark.parametrize("seed", [0, SEED, 99])
def test_python_object_ids_match_git(svc: Service, seed: int) -> None:
    """The fixture's commit, tree and tag ids are the ones git wrote to disk."""
    svc.reset(seed)
    fx = build_fixture(seed)
    state = svc.state()
    assert state["tables"]["git_refs"] == fx["refs"]
    assert state["tables"]["git_files"] == fx["files"]
    assert_mirror_matches_disk(svc)
    for h in fx["history"]:
        repo = svc.repo(h["name"])
        for c in h["commits"]:
            assert repo.resolve(c["sha"]) == c["sha"]
        assert repo.refs()[f"refs/tags/{h['tags'][0]['name']}"] == h["tags"][0]["sha"]
        assert repo.head_branch() == "main"
        # The index tracks main: nothing is staged.
        assert repo.out("diff", "--cached", "--name-only", "refs/heads/main") == ""


def test_runtime_commits_are_deterministic(svc: Service) -> None:
    wf = workflow("git-merge-feature")
    params = params_for(wf)
    first = run_gold(svc, wf, params)
    svc.reset(SEED)
    assert run_gold(svc, wf, params) == first
    assert first[1]["date"] == "2026-01-01T00:00:01Z"


def test_reset_rebuilds_repositories(svc: Service) -> None:
    fresh = svc.reset(SEED)
    wf = workflow("git-cut-release")
    params = params_for(wf)
    run_gold(svc, wf, params)
    repo = svc.repo(params["repo"])
    (repo.git_dir / "index.lock").write_text("")
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


def test_every_route_declares_its_effect(svc: Service) -> None:
    doc = svc.app.openapi()
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            meta = op["x-undobench"]
            assert op["operationId"] and op.get("description"), path
            if method == "get":
                assert meta == {"read_only": True}, path
            else:
                assert meta["effect_class"] in {"additive", "set", "create_unique"}, path
                assert meta["op"] and meta["identity"], path
    protections = {
        op["operationId"]: op["x-undobench"].get("idempotency")
        for ops in doc["paths"].values()
        for op in ops.values()
    }
    assert protections["commit_file"] == "native"
    assert protections["create_tag"] == protections["cut_release"] == "constraint"
    assert protections["revert_commit"] == "none"


def test_workflows_are_consistent(svc: Service) -> None:
    assert len(WORKFLOWS) == 5
    splits = [w.split for w in WORKFLOWS]
    assert (splits.count("dev"), splits.count("val"), splits.count("test")) == (2, 1, 2)
    assert len({w.id for w in WORKFLOWS}) == 5 and all(w.id.startswith("git-") for w in WORKFLOWS)
    boundaries = {s.boundary for w in WORKFLOWS for s in w.scenarios}
    assert boundaries == set(Boundary)
    assert any(s.ambiguous for w in WORKFLOWS for s in w.scenarios)
    for wf in WORKFLOWS:
        assert wf.domain == "git"
        gold_tools = [s.tool for s in wf.gold_plan]
        for tool in [*wf.tools, *gold_tools]:
            assert tool in svc.routes, f"{wf.id}: unknown tool {tool}"
        for sc in wf.scenarios:
            assert sc.target.tool in gold_tools, f"{wf.id}/{sc.id} never fires"
            assert sc.crash_point is None or sc.crash_point in CRASH_POINTS
        if wf.split == "test":
            assert any(s.boundary is Boundary.POST_MUTATION_PRE_ACK for s in wf.scenarios)
        for seed in (SEED, 11):
            params = params_for(wf, seed)
            text = wf.instruction.format(**params)
            assert not re.search(r"fault|inject|retr|bench|test", text, re.IGNORECASE), text


# ---- gold plans --------------------------------------------------------------------


@pytest.mark.parametrize("seed", [SEED, 11, 12345])
@pytest.mark.parametrize("wf", WORKFLOWS, ids=lambda w: w.id)
def test_gold_plan_leaves_invariants_true(svc: Service, wf: WorkflowSpec, seed: int) -> None:
    svc.reset(seed)
    params = params_for(wf, seed)
    assert failing(wf, params, svc.state())
    run_gold(svc, wf, params)
    assert_done(svc, wf, params)


@pytest.mark.parametrize("wf_id", ["git-update-config", "git-merge-feature"])
def test_repeated_commit_is_a_duplicate(svc: Service, wf_id: str) -> None:
    wf = workflow(wf_id)
    params = params_for(wf)
    run_gold(svc, wf, params)
    step = next(s for s in wf.gold_plan if s.tool == "commit_file")
    again = svc.call("commit_file", fill(step.arguments, params))
    assert again.status_code == 201  # the same change again is a second (empty) commit
    assert failing(wf, params, svc.state())
    assert effect_count(svc.commit_log(), wf.required_effects[0], params) == 2


def test_commit_idempotency_key_replays(svc: Service) -> None:
    wf = workflow("git-update-config")
    params = params_for(wf)
    args = fill(wf.gold_plan[1].arguments, params)
    key = {"Idempotency-Key": "ops-1"}
    first, again = (
        svc.call("commit_file", args, headers=key),
        svc.call("commit_file", args, headers=key),
    )
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json() and again.headers["idempotent-replayed"] == "true"
    assert failing(wf, params, svc.state()) == []
    other = svc.call("commit_file", {**args, "content": "x\n"}, headers=key)
    assert other.status_code == 422


def test_expected_head_makes_a_retry_safe(svc: Service) -> None:
    wf = workflow("git-update-config")
    params = params_for(wf)
    tip = svc.call("get_log", {"repo": params["repo"], "limit": 1}).json()[0]["sha"]
    args = {**fill(wf.gold_plan[1].arguments, params), "expected_head": tip[:12]}
    assert svc.call("commit_file", args).status_code == 201
    again = svc.call("commit_file", args)
    assert again.status_code == 409 and again.json()["detail"]["type"] == "branch_moved"
    assert failing(wf, params, svc.state()) == []


def test_repeats_of_unique_and_set_effects(svc: Service) -> None:
    wf = workflow("git-backport-fix")
    params = params_for(wf)
    run_gold(svc, wf, params)
    for step in wf.gold_plan[1:]:
        res = svc.call(step.tool, fill(step.arguments, params))
        assert res.status_code == 409, (step.tool, res.text)
    merge = workflow("git-merge-feature")
    mp = params_for(merge)
    run_gold(svc, merge, mp)
    again = svc.call("merge_branch", fill(merge.gold_plan[2].arguments, mp))
    assert again.status_code == 200 and again.json()["result"] == "already_up_to_date"
    rel = workflow("git-cut-release")
    rp = params_for(rel)
    run_gold(svc, rel, rp)
    again = svc.call("cut_release", fill(rel.gold_plan[1].arguments, rp))
    assert again.status_code == 409 and again.json()["detail"]["type"] == "release_exists"
    for w, p in ((wf, params), (merge, mp), (rel, rp)):
        assert failing(w, p, svc.state()) == []


def test_repeated_revert_is_refused(svc: Service) -> None:
    wf = workflow("git-revert-bad-commit")
    params = params_for(wf)
    run_gold(svc, wf, params)
    again = svc.call("revert_commit", fill(wf.gold_plan[1].arguments, params))
    assert again.status_code == 409 and again.json()["detail"]["type"] == "empty_change"
    assert_done(svc, wf, params)


def test_merge_conflicts_and_fast_forward_rules(svc: Service) -> None:
    h = build_fixture(SEED)["history"][0]
    repo, feature = h["name"], h["feature_branch"]
    for branch in ("main", feature):
        body = {"branch": branch, "path": "VERSION", "content": f"{branch}\n", "message": "v"}
        assert svc.call("commit_file", {"repo": repo, **body}).status_code == 201
    res = svc.call("merge_branch", {"repo": repo, "source": feature, "target": "main"})
    assert res.status_code == 409 and "VERSION" in res.json()["detail"]["message"]
    ff = {"repo": repo, "source": feature, "target": "main", "mode": "fast_forward"}
    assert svc.call("merge_branch", ff).status_code == 409
    assert svc.call("create_branch", {"repo": repo, "name": "topic"}).status_code == 201
    body = {"repo": repo, "branch": "topic", "path": "notes.txt", "content": "n\n", "message": "n"}
    assert svc.call("commit_file", body).status_code == 201
    res = svc.call("merge_branch", {"repo": repo, "source": "topic", "target": "main"})
    assert res.json()["result"] == "fast_forward"
    assert svc.repo(repo).out("diff", "--cached", "--name-only", "refs/heads/main") == ""
    assert svc.call("delete_branch", {"repo": repo, "name": "topic"}).status_code == 200
    assert svc.call("delete_branch", {"repo": repo, "name": "topic"}).status_code == 404
    assert svc.call("delete_branch", {"repo": repo, "name": "main"}).status_code == 409
    assert svc.state()["partial"] == []
    assert_mirror_matches_disk(svc)


# ---- lock files and half-cut releases ----------------------------------------------


@pytest.mark.usefixtures("crashable")
def test_crash_holding_index_lock_then_repair(svc: Service) -> None:
    wf = workflow("git-update-config")
    params = params_for(wf)
    args = fill(wf.gold_plan[1].arguments, params)
    with pytest.raises(Crashed):
        svc.call("commit_file", args, headers={CRASH_HEADER: "git.after_index_lock"})
    repo = svc.repo(params["repo"])
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
        cwd=repo.path,
        env=git_env(repo.home),
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
    assert failing(wf, params, state) == [] and state["partial"] == []
    ops = [r["op"] for r in svc.commit_log()]
    assert ops == ["repo.repair", "file.commit"]


@pytest.mark.usefixtures("crashable")
@pytest.mark.parametrize(
    ("point", "stopped"),
    [
        ("git.release.after_branch", "branch_created"),
        ("git.after_index_lock", "branch_created"),
        ("git.release.after_tag", "tagged"),
    ],
)
def test_crash_mid_release_then_resume(svc: Service, point: str, stopped: str) -> None:
    wf = workflow("git-cut-release")
    params = params_for(wf)
    args = fill(wf.gold_plan[1].arguments, params)
    with pytest.raises(Crashed):
        svc.call("cut_release", args, headers={CRASH_HEADER: point})
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
    assert_done(svc, wf, params)


def test_stale_ref_lock_and_release_branch_without_tag(svc: Service) -> None:
    h = build_fixture(SEED)["history"][1]
    repo = svc.repo(h["name"])
    (repo.git_dir / "refs" / "heads" / "main.lock").write_text("")
    res = svc.call(
        "commit_file",
        {"repo": h["name"], "branch": "main", "path": "a.txt", "content": "a\n", "message": "a"},
    )
    assert res.status_code == 409 and "cannot lock ref 'refs/heads/main'" in res.text
    assert not (repo.git_dir / "index.lock").exists()  # the lock was rolled back
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
def test_bad_paths_are_refused(svc: Service, path: str) -> None:
    assert path_problem(path) is not None
    repo = build_fixture(SEED)["repos"][0]["name"]
    body = {"branch": "main", "path": path, "content": "x", "message": "m"}
    res = svc.public.post(f"/v1/repos/{repo}/commits", json=body)
    assert 400 <= res.status_code < 500, res.text
    res = svc.public.get(f"/v1/repos/{repo}/file", params={"path": path})
    assert 400 <= res.status_code < 500, res.text
    assert svc.commit_log() == []


def _commit(**over: Any) -> dict[str, Any]:
    return {"branch": "main", "path": "a.txt", "content": "x", "message": "m", **over}


def test_bad_bodies_are_4xx(svc: Service) -> None:
    fx = build_fixture(SEED)
    repo = fx["repos"][0]["name"]
    sha = commit(fx["history"][0], "c4")["sha"]
    base = f"/v1/repos/{repo}"
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
    for method, path, body in bad:
        res = svc.public.request(method, path, json=body)
        assert 400 <= res.status_code < 500, (path, body, res.status_code, res.text)
    assert svc.commit_log() == []
    assert svc.state()["partial"] == []
    assert not list((svc.ctx.data_dir).glob("**/etc"))


@pytest.mark.parametrize("raw", [b"{not json", b"", b"\xff\xfe", b'{"branch": "main"'])
def test_malformed_json_is_4xx(svc: Service, raw: bytes) -> None:
    repo = build_fixture(SEED)["repos"][0]["name"]
    headers = {"content-type": "application/json"}
    for tail in ("commits", "branches", "tags", "merges", "cherry-picks", "reverts", "releases"):
        res = svc.public.post(f"/v1/repos/{repo}/{tail}", content=raw, headers=headers)
        assert 400 <= res.status_code < 500, (tail, res.status_code, res.text)
    assert svc.commit_log() == []


def test_bad_queries_are_4xx(svc: Service) -> None:
    repo = build_fixture(SEED)["repos"][0]["name"]
    base = f"/v1/repos/{repo}"
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
