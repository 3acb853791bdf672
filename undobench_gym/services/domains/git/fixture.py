"""The seeded repositories: a pure function of the seed.

`build_fixture(seed)` describes three small repositories commit by commit (their names,
people and file texts drawn from `fixture_pools`), with every object id computed in
Python (`objects`), plus the rows the service's SQLite tables hold
right after a reset: the mirror of refs and files, the commits the service itself wrote
(`git_commits`) and the releases it cut (`git_releases`). `seeding.seed_repositories`
writes the same history to disk with `git fast-import`; the tests check both agree.

Every repository has the same shape, so any workflow can run on any of them:

    main:           c1 Initial - c2 docs - d1 open next version - c3 timeout - c4 fix - c5 debug
    release/1.M.0:              c2 - r1 bump VERSION (tag v1.M.0) - r2 release notes
    feature/<slug>:                                              c3 - f1 module - f2 tests

The history is the one the service would have left: release 1.M.0 was cut from c2 by
`cut_release` (branch, bump commit, annotated tag, notes commit, a complete release row),
after which main moved VERSION on to the next development version; c3 and c5 were
committed through `commit_file`. Those service commits are authored by the platform bot
and listed in `git_commits`; the others were pushed by people. Every timestamp lies
before the virtual clock's epoch, so whatever an episode writes is newer than all of it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from undobench_gym.contract.seeding import rng_for, stable_id
from undobench_gym.services.domains.git.fixture_pools import (
    FEATURES,
    FIRST_NOTES,
    FIXES,
    PEOPLE,
    REPO_POOL,
    app_source,
    settings_ini,
)
from undobench_gym.services.domains.git.gitcli import BOT_EMAIL, BOT_NAME
from undobench_gym.services.domains.git.objects import blob_id, commit_id, tag_id, tree_id

#: 2026-01-01T00:00:00Z, the virtual clock's epoch: seeded history lies before it.
EPOCH_TS = 1767225600
BOT = (BOT_NAME, BOT_EMAIL)
DEBUG_SUBJECT = "Enable debug logging in production"
CHANGELOG_HEADER = "# Changelog\n\n"
REPOS_PER_SEED = 3
#: Commit keys of the history the service wrote itself (through commit_file).
SERVICE_COMMITS = ("c3", "c5")


def bump_message(version: str) -> str:
    """The subject of a release's VERSION commit (what cut_release writes)."""
    return f"Bump version to {version}"


def notes_message(version: str) -> str:
    """The subject of a release's CHANGELOG commit (what cut_release writes)."""
    return f"Add release notes for {version}"


def iso(ts: int) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _history(seed: int, index: int, name: str, description: str) -> dict[str, Any]:
    rng = rng_for("git-fixture", seed, name)
    minor = rng.randint(2, 9)
    fix_subject, old_line, new_line = rng.choice(FIXES)
    slug, title = rng.choice(FEATURES)
    module = slug.replace("-", "_")
    workers, timeout = rng.randint(2, 16), rng.choice([10, 15, 30, 60])
    rpm = rng.choice([300, 600, 1200])
    version = f"1.{minor}.0"
    release_branch = f"release/{version}"
    notes = rng.choice(FIRST_NOTES).format(name=name)
    t0 = EPOCH_TS - 40 * 86400 + index * 3600
    steps: list[tuple[str, str, str | None, str, dict[str, str], int]] = [
        # (key, branch it extends, parent key, message, changed files, day)
        (
            "c1",
            "main",
            None,
            "Initial commit\n",
            {
                "README.md": f"# {name}\n\n{description}.\n",
                "VERSION": f"{version}-dev\n",
                "CHANGELOG.md": CHANGELOG_HEADER,
                "src/app.py": app_source(description, old_line),
                "config/settings.ini": settings_ini(name, "info", workers, None),
                "config/rate_limit.conf": f"requests_per_minute = {rpm}\n",
            },
            0,
        ),
        (
            "c2",
            "main",
            "c1",
            "Document deployment steps\n",
            {
                "README.md": f"# {name}\n\n{description}.\n\n"
                "## Deploying\n\nRun `make deploy` from a clean checkout.\n"
            },
            1,
        ),
        (
            "d1",
            "main",
            "c2",
            f"Start 1.{minor + 1} development\n",
            {"VERSION": f"1.{minor + 1}.0-dev\n"},
            3,
        ),
        (
            "c3",
            "main",
            "d1",
            "Add request timeout setting\n",
            {"config/settings.ini": settings_ini(name, "info", workers, timeout)},
            4,
        ),
        (
            "f1",
            f"feature/{slug}",
            "c3",
            f"Add {title.lower()} module\n",
            {f"src/{module}.py": f'"""{title}."""\n\n\ndef enabled():\n    return True\n'},
            5,
        ),
        (
            "f2",
            f"feature/{slug}",
            "f1",
            f"Add tests for {title.lower()}\n",
            {
                f"tests/test_{module}.py": f"from src.{module} import enabled\n\n\n"
                "def test_enabled():\n    assert enabled()\n"
            },
            6,
        ),
        (
            "c4",
            "main",
            "c3",
            f"{fix_subject}\n",
            {"src/app.py": app_source(description, new_line)},
            7,
        ),
        (
            "c5",
            "main",
            "c4",
            f"{DEBUG_SUBJECT}\n\nTemporary, to chase a latency spike.\n",
            {"config/settings.ini": settings_ini(name, "debug", workers, timeout)},
            8,
        ),
    ]
    commits: list[dict[str, Any]] = []
    by_key: dict[str, dict[str, Any]] = {}

    def add(
        key: str,
        branch: str,
        parent: str | None,
        message: str,
        changes: dict[str, str],
        author: tuple[str, str],
        when: int,
    ) -> dict[str, Any]:
        files = dict(by_key[parent]["files"]) if parent else {}
        files.update(changes)
        parents = [by_key[parent]["sha"]] if parent else []
        commit = {
            "key": key,
            "branch": branch,
            "parent": parent,
            "author": list(author),
            "time": when,
            "message": message,
            "subject": message.split("\n", 1)[0],
            "changes": changes,
            "files": files,
            "sha": commit_id(tree_id(files), parents, author, when, message),
        }
        commits.append(commit)
        by_key[key] = commit
        return commit

    for key, branch, parent, message, changes, day in steps:
        person = rng.choice(PEOPLE)
        author = BOT if key in SERVICE_COMMITS else person
        add(key, branch, parent, message, changes, author, t0 + day * 86400 + rng.randint(0, 3599))
        if key == "c2":
            # Release 1.M.0, cut from c2 the next day, step by step as cut_release does.
            started = by_key["c2"]["time"] + 86400
            bump = {"VERSION": f"{version}\n"}
            add("r1", release_branch, "c2", bump_message(version) + "\n", bump, BOT, started + 1)
            changelog = changelog_with(by_key["r1"]["files"]["CHANGELOG.md"], version, notes)
            listed = {"CHANGELOG.md": changelog}
            add("r2", release_branch, "r1", notes_message(version) + "\n", listed, BOT, started + 3)
    # One virtual second per step: started, bump commit, tag, notes commit.
    cut = by_key["r1"]["time"] - 1
    tag_time = cut + 2
    tag_message = f"Release {version}\n"
    tag = {
        "name": f"v{version}",
        "target": "r1",
        "tagger": list(BOT),
        "time": tag_time,
        "message": tag_message,
        "sha": tag_id(by_key["r1"]["sha"], f"v{version}", BOT, tag_time, tag_message),
    }
    release = {
        "version": version,
        "branch": release_branch,
        "tag": f"v{version}",
        "base": "c2",
        "bump": "r1",
        "notes_commit": "r2",
        "notes": notes,
        "created": cut,
        "updated": by_key["r2"]["time"],
    }
    return {
        "name": name,
        "description": description,
        "minor": minor,
        "version": version,
        "slug": slug,
        "feature_title": title,
        "feature_branch": f"feature/{slug}",
        "fix_subject": fix_subject,
        "settings_before_debug": by_key["c4"]["files"]["config/settings.ini"],
        "commits": commits,
        "branches": {"main": "c5", f"feature/{slug}": "f2", release_branch: "r2"},
        "tags": [tag],
        "releases": [release],
    }


def changelog_with(current: str | None, version: str, notes: str) -> str:
    """CHANGELOG.md with a section for `version` on top (what a release commits)."""
    header = "# Changelog\n\n"
    rest = (current or header).removeprefix(header)
    return f"{header}## {version}\n\n{notes}\n\n{rest}"


def commit(history: dict[str, Any], key: str) -> dict[str, Any]:
    return next(c for c in history["commits"] if c["key"] == key)


def depth(history: dict[str, Any], key: str) -> int:
    """Number of commits reachable from `key` (the seeded history is linear per branch)."""
    n, cur = 0, commit(history, key)
    while True:
        n += 1
        if cur["parent"] is None:
            return n
        cur = commit(history, cur["parent"])


def _mirror(history: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The git_refs and git_files rows of a freshly seeded repository."""
    name = history["name"]
    refs, files = [], []
    targets: list[tuple[str, str, str, dict[str, Any]]] = [
        (f"refs/heads/{b}", "branch", b, {"key": key}) for b, key in history["branches"].items()
    ]
    targets += [
        (f"refs/tags/{t['name']}", "tag", t["name"], {"key": t["target"], **t})
        for t in history["tags"]
    ]
    for ref, kind, short, info in targets:
        c = commit(history, info["key"])
        annotated = kind == "tag"
        refs.append(
            {
                "repo": name,
                "ref": ref,
                "kind": kind,
                "name": short,
                "sha": c["sha"],
                "subject": c["subject"],
                "depth": depth(history, info["key"]),
                "tag_object": info["sha"] if annotated else None,
                "tag_message": info["message"] if annotated else None,
            }
        )
        for path, content in c["files"].items():
            files.append(
                {
                    "repo": name,
                    "ref": ref,
                    "path": path,
                    "blob": blob_id(content),
                    "size": len(content.encode()),
                    "content": content,
                }
            )
    return refs, files


def _service_rows(
    seed: int, history: dict[str, Any]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The git_commits and git_releases rows of the commits and releases the service made."""
    name = history["name"]
    commits = []
    for c in history["commits"]:
        if c["author"] != list(BOT):
            continue
        rel = next((r for r in history["releases"] if c["branch"] == r["branch"]), None)
        commits.append(
            {
                "id": stable_id("gc", seed, name, c["key"]),
                "repo": name,
                "branch": c["branch"],
                "sha": c["sha"],
                "parents": [commit(history, c["parent"])["sha"]] if c["parent"] else [],
                "kind": "release" if rel else "commit",
                "message": c["message"].rstrip("\n"),
                "path": next(iter(c["changes"])),
                "source": None,
                "created": iso(c["time"]),
            }
        )
    releases = []
    for r in history["releases"]:
        tag = next(t for t in history["tags"] if t["name"] == r["tag"])
        releases.append(
            {
                "id": stable_id("rel", seed, name, r["version"]),
                "repo": name,
                "version": r["version"],
                "branch": r["branch"],
                "tag": r["tag"],
                "status": "complete",
                "base_sha": commit(history, r["base"])["sha"],
                "bump_sha": commit(history, r["bump"])["sha"],
                "tag_object": tag["sha"],
                "notes_sha": commit(history, r["notes_commit"])["sha"],
                "notes": r["notes"],
                "created": iso(r["created"]),
                "updated": iso(r["updated"]),
            }
        )
    return commits, releases


def build_fixture(seed: int) -> dict[str, list[dict[str, Any]]]:
    rng = rng_for("git-fixture-repos", seed)
    chosen = rng.sample(REPO_POOL, REPOS_PER_SEED)
    histories = [_history(seed, i, n, d) for i, (n, d) in enumerate(chosen)]
    repos, refs, files, commits, releases = [], [], [], [], []
    for h in histories:
        repos.append(
            {
                "name": h["name"],
                "description": h["description"],
                "default_branch": "main",
                "created": "2025-11-22T00:00:00Z",
            }
        )
        r, f = _mirror(h)
        refs += r
        files += f
        c, rel = _service_rows(seed, h)
        commits += c
        releases += rel
    key = lambda r: (r["repo"], r["ref"], r.get("path", ""))  # noqa: E731
    return {
        "repos": sorted(repos, key=lambda r: r["name"]),
        "refs": sorted(refs, key=key),
        "files": sorted(files, key=key),
        "commits": sorted(commits, key=lambda c: c["id"]),
        "releases": sorted(releases, key=lambda r: r["id"]),
        "history": sorted(histories, key=lambda h: h["name"]),
    }
