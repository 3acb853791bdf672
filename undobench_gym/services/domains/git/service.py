"""Git hosting service: real repositories on disk, driven by the git command line.

Routes: reads in `reads`, single-step mutations in `mutations` and `changes`, the
release composite in `release`. The repositories are the state: `extra_state` reads
every repository's refs and lock files from disk, `partial_state` reports locks a dead
writer left and releases cut half-way. SQLite holds the commit log, the commits the
service wrote, the releases and a mirror of refs and files (rebuilt from disk in the same
transaction as a mutation's commit-log row, right after the disk change).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from undobench_gym.services.domains._service.kit import DomainService
from undobench_gym.services.domains.git import changes, mutations, reads, release
from undobench_gym.services.domains.git.fixture import build_fixture
from undobench_gym.services.domains.git.models import (
    TABLES,
    CommitRecord,
    File,
    Ref,
    Release,
    Repository,
)
from undobench_gym.services.domains.git.repos import Repo, data_dir_of, repos_root
from undobench_gym.services.domains.git.seeding import seed_repositories

#: Fixture rows by key, and the tables they seed.
FIXTURE_ORDER = (
    ("repos", Repository),
    ("refs", Ref),
    ("files", File),
    ("commits", CommitRecord),
    ("releases", Release),
)


def extra_state(s: Session) -> dict[str, Any]:
    """Every repository as it is on disk: refs -> object ids, and lock files present."""
    root = repos_root(data_dir_of(s))
    repos: dict[str, Any] = {}
    if root.is_dir():
        for path in sorted(p for p in root.iterdir() if (p / ".git").is_dir()):
            r = Repo(data_dir_of(s), path.name)
            repos[path.name] = {
                "head": r.head_branch(),
                "refs": r.refs(),
                "lock_files": r.lock_files(),
            }
    return {"repos": repos}


def partial_state(state: dict[str, Any]) -> list[str]:
    """Lock files left in a repository, and releases cut half-way."""
    issues = []
    repos = state.get("extra", {}).get("repos", {})
    for name, info in repos.items():
        for lock in info["lock_files"]:
            issues.append(f"repository {name}: lock file {lock} left behind")
    incomplete = set()
    for rel in state["tables"].get("git_releases", []):
        if rel["status"] != "complete":
            incomplete.add((rel["repo"], rel["branch"]))
            issues.append(
                f"release {rel['version']} of {rel['repo']} stopped at {rel['status']} "
                f"(branch {rel['branch']}, tag {rel['tag']})"
            )
    for name, info in repos.items():
        for ref in info["refs"]:
            if not ref.startswith("refs/heads/release/"):
                continue
            branch = ref[len("refs/heads/") :]
            version = branch[len("release/") :]
            if f"refs/tags/v{version}" not in info["refs"] and (name, branch) not in incomplete:
                issues.append(f"repository {name}: branch {branch} has no tag v{version}")
    return issues


DOMAIN = DomainService(
    name="git",
    title="UndoBench Git",
    routers=[reads.router, mutations.router, changes.router, release.router],
    tables=TABLES,
    fixture=build_fixture,
    fixture_order=FIXTURE_ORDER,
    partial_state=partial_state,
    extra_state=extra_state,
    seed_files=seed_repositories,
)

__all__ = ["DOMAIN"]
