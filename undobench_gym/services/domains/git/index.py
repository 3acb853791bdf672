"""Writing commits the way `git commit` does: under `.git/index.lock`.

git's lockfile protocol: create `<file>.lock` with O_CREAT|O_EXCL (it fails when the lock
exists), write the new content into the lock, then either commit it (rename over the
file) or roll it back (unlink). A writer that dies in between leaves the lock behind, and
every later git command that needs the index refuses with "Unable to create
'.../index.lock': File exists." until someone removes it.

`commit_on_branch` builds the new index inside the lock (GIT_INDEX_FILE=the lock), writes
its tree, then commits with `commit-tree` + `update-ref` (a compare-and-swap on the branch).
Between the two sits the crash point `git.after_index_lock`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from fastapi import HTTPException, Request

from undobench_gym.services.domains._service.kit import error, maybe_crash
from undobench_gym.services.domains.git.gitcli import GitError
from undobench_gym.services.domains.git.repos import Repo, repos_root

LOCK_POINT = "git.after_index_lock"


def sanitize(repo: Repo, text: str) -> str:
    """git's message with paths shown relative to the repositories' root."""
    return text.strip().replace(str(repos_root(repo.data_dir)) + os.sep, "")


def git_failure(repo: Repo, exc: GitError, kind: str = "git_error") -> HTTPException:
    if exc.is_lock_conflict:
        kind = "repository_locked"
    return error(409, kind, sanitize(repo, exc.stderr or str(exc)))


class IndexLock:
    def __init__(self, repo: Repo) -> None:
        self.repo = repo
        self.path = repo.git_dir / "index.lock"

    def acquire(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            raise self.conflict() from None
        os.close(fd)

    def conflict(self) -> HTTPException:
        """git's own refusal: a real git command that needs the index, run against the lock."""
        proc = self.repo.git("read-tree", "HEAD", check=False)
        if proc.returncode != 0:
            return error(409, "repository_locked", sanitize(self.repo, proc.stderr.decode()))
        return error(  # the lock went away in between: an ordinary busy repository
            409, "repository_locked", f"Unable to create '{self.repo.name}/.git/index.lock'"
        )

    def commit(self) -> None:
        os.replace(self.path, self.repo.git_dir / "index")

    def rollback(self) -> None:
        self.path.unlink(missing_ok=True)


def probe_index(repo: Repo) -> None:
    """Refuse (409, git's message) up front when the index is locked."""
    lock = IndexLock(repo)
    if lock.path.exists():
        raise lock.conflict()


Stage = Callable[[Path], None]


def stage_file(repo: Repo, base: str, path: str, content: str) -> Stage:
    """Stage `path` = `content` on top of commit `base` (read-tree + update-index)."""

    def stage(index: Path) -> None:
        repo.git("read-tree", base, index_file=index)
        blob = repo.out("hash-object", "-w", "--stdin", stdin=content.encode())
        repo.git("update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", index_file=index)

    return stage


def stage_tree(repo: Repo, tree: str) -> Stage:
    def stage(index: Path) -> None:
        repo.git("read-tree", tree, index_file=index)

    return stage


def commit_on_branch(
    request: Request,
    repo: Repo,
    *,
    branch: str,
    expected_tip: str,
    parents: list[str],
    message: str,
    date: int,
    stage: Stage,
    allow_empty: bool = True,
    empty_message: str = "nothing to commit",
) -> tuple[str, str]:
    """Commit the index `stage` builds onto `branch`; returns (commit id, tree id)."""
    lock = IndexLock(repo)
    lock.acquire()
    try:
        stage(lock.path)
        tree = repo.out("write-tree", index_file=lock.path)
        if not allow_empty and tree == repo.tree_of(expected_tip):
            raise error(409, "empty_change", empty_message)
        maybe_crash(request, LOCK_POINT)
        args = ["commit-tree", tree]
        for p in parents:
            args += ["-p", p]
        sha = repo.out(*args, "-m", message, date=date)
        subject = message.split("\n", 1)[0]
        repo.git(
            "update-ref", "-m", f"commit: {subject}", f"refs/heads/{branch}", sha, expected_tip
        )
    except GitError as exc:
        lock.rollback()
        raise git_failure(repo, exc) from exc
    except HTTPException:
        lock.rollback()
        raise
    if branch == repo.head_branch():
        lock.commit()  # the index tracks main, as after `git commit` on the checked-out branch
    else:
        lock.rollback()
    return sha, tree


def move_branch(repo: Repo, branch: str, new: str, old: str, reflog: str) -> None:
    """Move a branch from `old` to `new` (compare-and-swap); when it is the checked-out
    branch, the index follows under the same lock protocol."""
    lock = IndexLock(repo)
    lock.acquire()
    follow = branch == repo.head_branch()
    try:
        if follow:
            repo.git("read-tree", new, index_file=lock.path)
        repo.git("update-ref", "-m", reflog, f"refs/heads/{branch}", new, old)
    except GitError as exc:
        lock.rollback()
        raise git_failure(repo, exc) from exc
    if follow:
        lock.commit()
    else:
        lock.rollback()


def three_way_tree(
    repo: Repo, base_tree: str, ours: str, theirs_tree: str, date: int
) -> tuple[str | None, list[str]]:
    """Merge the change base_tree -> theirs_tree into commit `ours` with git's merge
    machinery (what cherry-pick and revert do); returns (tree, []) or (None, conflicts)."""
    base = repo.out("commit-tree", base_tree, "-m", "merge base", date=date)
    left = repo.out("commit-tree", repo.tree_of(ours), "-p", base, "-m", "ours", date=date)
    right = repo.out("commit-tree", theirs_tree, "-p", base, "-m", "theirs", date=date)
    return merge_trees(repo, left, right)


def merge_trees(repo: Repo, ours: str, theirs: str) -> tuple[str | None, list[str]]:
    proc = repo.git(
        "merge-tree", "--write-tree", "--name-only", "--no-messages", ours, theirs, check=False
    )
    lines = proc.stdout.decode(errors="replace").splitlines()
    if proc.returncode == 0 and lines:
        return lines[0].strip(), []
    if proc.returncode == 1:
        return None, sorted({ln for ln in lines[1:] if ln})
    raise GitError(["merge-tree"], proc.returncode, proc.stderr.decode(errors="replace"))


def remove_stale_locks(repo: Repo) -> list[str]:
    """Delete the lock files a dead writer left (the caller holds the repo's mutex, so no
    live writer of this service holds one)."""
    removed = repo.lock_files()
    for rel in removed:
        (repo.path / rel).unlink(missing_ok=True)
    return removed
