"""Git fixture history: for several seeds, the seeded repositories carry a history that
agrees with their current state (commits, branches, the earlier release and its tag, the
service's own commit and release records), the service seeds exactly that, and task
parameters and read-backs can tell an episode's effects from the history."""

from __future__ import annotations

from typing import Any

import pytest

from undobench_gym.services.domains.git.fixture import (
    BOT,
    EPOCH_TS,
    build_fixture,
    bump_message,
    changelog_with,
    commit,
    depth,
    iso,
    notes_message,
)
from undobench_gym.services.domains.git.objects import commit_id, tag_id, tree_id
from undobench_gym.services.domains.git.service import DOMAIN
from undobench_gym.services.domains.git.workflows import WORKFLOWS

from .service_harness import GOLD_SEEDS, ServiceClient
from .workflow_harness import assert_new_rows_follow_history, tables_around_gold_plan

pytestmark = pytest.mark.service(DOMAIN)

SEEDS = (0, 1, 3, 7, 11, 42, 12345)
EPOCH = iso(EPOCH_TS)


def _ancestors(h: dict[str, Any], key: str) -> list[str]:
    """`key` and every commit before it, newest first."""
    out = []
    cur: str | None = key
    while cur is not None:
        out.append(cur)
        cur = commit(h, cur)["parent"]
    return out


def _histories(seed: int) -> list[dict[str, Any]]:
    return list(build_fixture(seed)["history"])


# ---- commits and refs --------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_commits_form_a_consistent_history(seed: int) -> None:
    for h in _histories(seed):
        seen: dict[str, dict[str, Any]] = {}
        for c in h["commits"]:
            parent = seen[c["parent"]] if c["parent"] else None  # parents come first
            assert c["time"] < EPOCH_TS
            files = dict(parent["files"]) if parent else {}
            files.update(c["changes"])
            assert c["files"] == files
            if parent:
                assert c["time"] > parent["time"]
                assert any(parent["files"].get(p) != v for p, v in c["changes"].items())
            parents = [parent["sha"]] if parent else []
            author = (c["author"][0], c["author"][1])
            sha = commit_id(tree_id(files), parents, author, c["time"], c["message"])
            assert c["sha"] == sha
            seen[c["key"]] = c
        # Every commit is on the branch it was made on.
        for c in h["commits"]:
            assert c["key"] in _ancestors(h, h["branches"][c["branch"]]), c["key"]


@pytest.mark.parametrize("seed", SEEDS)
def test_refs_and_mirror_rows_agree_with_the_history(seed: int) -> None:
    fx = build_fixture(seed)
    for h in fx["history"]:
        refs = {r["ref"]: r for r in fx["refs"] if r["repo"] == h["name"]}
        expected = {f"refs/heads/{b}" for b in h["branches"]} | {
            f"refs/tags/{t['name']}" for t in h["tags"]
        }
        assert set(refs) == expected
        for branch, key in h["branches"].items():
            ref = refs[f"refs/heads/{branch}"]
            assert (ref["sha"], ref["depth"]) == (commit(h, key)["sha"], depth(h, key))
        for t in h["tags"]:
            target = commit(h, t["target"])
            ref = refs[f"refs/tags/{t['name']}"]
            assert (ref["sha"], ref["tag_object"]) == (target["sha"], t["sha"])
            assert t["time"] > target["time"] and t["time"] < EPOCH_TS
            tagger = (t["tagger"][0], t["tagger"][1])
            assert t["sha"] == tag_id(target["sha"], t["name"], tagger, t["time"], t["message"])


# ---- the earlier release -----------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_the_earlier_release_is_complete_and_consistent(seed: int) -> None:
    fx = build_fixture(seed)
    for h in fx["history"]:
        (rel,) = [r for r in fx["releases"] if r["repo"] == h["name"]]
        by_sha = {c["sha"]: c for c in h["commits"]}
        bump, notes = by_sha[rel["bump_sha"]], by_sha[rel["notes_sha"]]
        version = rel["version"]
        assert (rel["status"], rel["branch"], rel["tag"]) == (
            "complete",
            f"release/{version}",
            f"v{version}",
        )
        assert version == h["version"]
        # cut_release's steps: branch at main's tip, bump, annotated tag, notes.
        assert commit(h, bump["parent"])["sha"] == rel["base_sha"]
        assert bump["parent"] in _ancestors(h, h["branches"]["main"])
        assert bump["subject"] == bump_message(version)
        assert bump["changes"] == {"VERSION": f"{version}\n"}
        (tag,) = [t for t in h["tags"] if t["name"] == rel["tag"]]
        assert commit(h, tag["target"])["sha"] == rel["bump_sha"]
        assert tag["sha"] == rel["tag_object"] and tag["message"] == f"Release {version}\n"
        assert commit(h, notes["parent"])["sha"] == rel["bump_sha"]
        assert notes["subject"] == notes_message(version)
        before = bump["files"]["CHANGELOG.md"]
        assert notes["files"]["CHANGELOG.md"] == changelog_with(before, version, rel["notes"])
        assert commit(h, h["branches"][rel["branch"]])["sha"] == rel["notes_sha"]
        assert iso(bump["time"]) > rel["created"]
        assert rel["created"] < rel["updated"] == iso(notes["time"]) < EPOCH
        # Main went on to the next development version; the release branch holds the release.
        main_version = commit(h, h["branches"]["main"])["files"]["VERSION"]
        assert main_version == f"1.{h['minor'] + 1}.0-dev\n"
        assert [t["name"] for t in h["tags"]] == [rel["tag"]]  # no other release was tagged
        assert not [b for b in h["branches"] if b.startswith("release/") and b != rel["branch"]]


@pytest.mark.parametrize("seed", SEEDS)
def test_service_commit_records_match_the_commits_they_name(seed: int) -> None:
    fx = build_fixture(seed)
    for h in fx["history"]:
        rows = {r["sha"]: r for r in fx["commits"] if r["repo"] == h["name"]}
        by_bot = {c["sha"]: c for c in h["commits"] if tuple(c["author"]) == BOT}
        # The service wrote exactly the commits authored by its bot, and recorded each one.
        assert set(rows) == set(by_bot) and len(rows) == 4
        release_branches = {r["branch"] for r in fx["releases"] if r["repo"] == h["name"]}
        for sha, row in rows.items():
            c = by_bot[sha]
            parent = commit(h, c["parent"])["sha"]
            assert (row["branch"], row["parents"]) == (c["branch"], [parent])
            assert row["message"] == c["message"].rstrip("\n")
            assert row["path"] in c["changes"] and len(c["changes"]) == 1
            assert row["kind"] == ("release" if c["branch"] in release_branches else "commit")
            assert row["created"] == iso(c["time"]) and row["source"] is None
        ids = [r["id"] for r in fx["commits"]]
        assert len(set(ids)) == len(ids)


# ---- task parameters stay right with the history --------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_task_parameters_name_what_the_history_lacks(seed: int) -> None:
    fx = build_fixture(seed)
    wf = {w.id: w for w in WORKFLOWS}
    refs = {(r["repo"], r["ref"]) for r in fx["refs"]}
    paths = {(f["repo"], f["ref"], f["path"]) for f in fx["files"]}

    rel = wf["git-cut-release"].draw_params(seed, fx)
    assert rel["version"] not in {r["version"] for r in fx["releases"] if r["repo"] == rel["repo"]}
    assert (rel["repo"], rel["branch_ref"]) not in refs
    assert (rel["repo"], rel["tag_ref"]) not in refs
    assert rel["releases_after"] == 2  # the earlier release plus the new one

    bp = wf["git-backport-fix"].draw_params(seed, fx)
    assert (bp["repo"], bp["branch_ref"]) not in refs and (bp["repo"], bp["tag_ref"]) not in refs

    rv = wf["git-revert-bad-commit"].draw_params(seed, fx)
    assert (rv["repo"], "refs/heads/main", rv["note_path"]) not in paths
    assert not [r for r in fx["commits"] if r.get("source") == rv["bad_sha"]]

    cfg = wf["git-update-config"].draw_params(seed, fx)
    assert cfg["content"] not in {
        f["content"] for f in fx["files"] if f["repo"] == cfg["repo"] and f["path"] == cfg["path"]
    }

    mg = wf["git-merge-feature"].draw_params(seed, fx)
    assert (mg["repo"], mg["tag_ref"]) not in refs


# ---- the service seeds that history, and an episode's records stand apart from it -------


@pytest.mark.parametrize("seed", (3, 11))
def test_service_seeds_the_history(svc: ServiceClient, seed: int) -> None:
    svc.reset(seed)
    fx = build_fixture(seed)
    state = svc.state()
    assert state["tables"]["git_commits"] == fx["commits"]
    assert state["tables"]["git_releases"] == fx["releases"]
    assert state["partial"] == [] and svc.commit_log() == []
    for h in fx["history"]:
        (listed,) = svc.ok("list_releases", {"repo": h["name"]})
        assert (listed["version"], listed["status"]) == (h["version"], "complete")
        repo = svc.ok("get_repository", {"repo": h["name"]})
        assert repo["releases_in_progress"] == [] and repo["lock_files"] == []
        log = svc.ok("get_log", {"repo": h["name"], "ref": f"release/{h['version']}"})
        assert [e["subject"] for e in log[:2]] == [
            notes_message(h["version"]),
            bump_message(h["version"]),
        ]


@pytest.mark.parametrize("seed", GOLD_SEEDS)
@pytest.mark.parametrize("wf", WORKFLOWS, ids=lambda w: w.id)
def test_episode_records_are_newer_than_all_history(svc: ServiceClient, wf: Any, seed: int) -> None:
    """Every commit or release the gold plan recorded is dated at or after the epoch,
    every seeded one before it, so the new effect cannot be mistaken for history."""
    before, after = tables_around_gold_plan(svc, wf, seed)
    stamps = {"git_commits": ("id", "created"), "git_releases": ("id", "created")}
    added = assert_new_rows_follow_history(before, after, stamps)
    for table in stamps:  # history is never rewritten away
        assert {r["id"] for r in after[table]} >= {r["id"] for r in before[table]}, table
    assert added["git_commits"], wf.id  # every gold plan commits
