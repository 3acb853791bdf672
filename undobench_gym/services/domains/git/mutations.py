"""Single-step mutating routes: branches, commits, tags, merges, cherry-picks, reverts,
and the repair of a repository a dead git process left locked.

Each route changes the repository on disk, then (same SQLite transaction) rebuilds the
mirror of that repository and writes the commit-log row. The window between the disk
change and that transaction holds no crash point; the one inside `commit_on_branch`
(`git.after_index_lock`) sits before any ref moves.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy.orm import Session

from undobench_gym.services.domains._service.kit import Effect, KeyHeader, error, write_route
from undobench_gym.services.domains.git.common import (
    CommitId,
    FilePath,
    Message,
    RefName,
    RepoName,
    Rev,
    branch_or_404,
    check_query,
    clock,
    note_commit,
    resolve_or_404,
    run_in_repo,
    write_repo,
)
from undobench_gym.services.domains.git.gitcli import ZERO_OID, GitError
from undobench_gym.services.domains.git.index import (
    commit_on_branch,
    git_failure,
    remove_stale_locks,
    stage_file,
)
from undobench_gym.services.domains.git.repos import sync_mirror
from undobench_gym.services.domains.git.views import commit_view

router = APIRouter(prefix="/v1")
MAX_CONTENT = 64_000
CREATE_BRANCH = Effect("branch.create", "create_unique", ("repo", "name"), "constraint")
DELETE_BRANCH = Effect("branch.delete", "set", ("repo", "name"))
#: The change is the file's new content on a branch; the message is free text, so a
#: re-sent commit with a reworded message is the same change committed twice.
COMMIT_FILE = Effect(
    "file.commit",
    "additive",
    ("repo", "branch", "path", "content"),
    "native",
    preconditions=("expected_head",),
)
CREATE_TAG = Effect("tag.create", "create_unique", ("repo", "name"), "constraint")
REPAIR_REPO = Effect("repo.repair", "set", ("repo",))


# ---- branches ----------------------------------------------------------------------


class BranchIn(BaseModel):
    name: RefName
    from_ref: Rev = Field("main", description="branch, tag or commit id to start from")


@write_route(router, "POST", "/repos/{repo}/branches", "create_branch", CREATE_BRANCH, None, 201)
def create_branch(request: Request, repo: RepoName, body: BranchIn) -> JSONResponse:
    """Create a branch at a branch, tag or commit. A branch that exists is refused (409)."""
    r = write_repo(request, repo)
    payload = {"repo": repo, **body.model_dump()}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        start = resolve_or_404(r, body.from_ref)
        if r.ref_exists(f"refs/heads/{body.name}"):
            tip = r.branch_tip(body.name)
            raise error(409, "branch_exists", f"Branch {body.name} already exists at {tip}")
        try:
            r.git("update-ref", "-m", "branch: created", f"refs/heads/{body.name}", start, ZERO_OID)
        except GitError as exc:
            raise git_failure(r, exc, "branch_exists") from exc
        sync_mirror(s, r)
        CREATE_BRANCH.commit(s, {**payload, "sha": start}, key)
        return 201, {"name": body.name, "sha": start}

    return run_in_repo(
        request, r, CREATE_BRANCH, route="create_branch", payload=payload, apply=apply
    )


@write_route(router, "DELETE", "/repos/{repo}/branches", "delete_branch", DELETE_BRANCH)
def delete_branch(
    request: Request, repo: RepoName, name: str = Query(min_length=1, max_length=100)
) -> JSONResponse:
    """Delete a branch (not the default branch). Its commits stay reachable from tags."""
    r = write_repo(request, repo)
    check_query("ref", name)
    payload = {"repo": repo, "name": name}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        tip = branch_or_404(r, name)
        if name == r.head_branch():
            raise error(409, "default_branch", f"{name} is the default branch")
        try:
            r.git("update-ref", "-d", f"refs/heads/{name}", tip)
        except GitError as exc:
            raise git_failure(r, exc) from exc
        sync_mirror(s, r)
        DELETE_BRANCH.commit(s, payload, key)
        return 200, {"name": name, "deleted": True, "sha": tip}

    return run_in_repo(
        request, r, DELETE_BRANCH, route="delete_branch", payload=payload, apply=apply
    )


# ---- commits -----------------------------------------------------------------------


class CommitIn(BaseModel):
    branch: RefName
    path: FilePath
    content: str = Field(max_length=MAX_CONTENT, description="the whole new file content")
    message: Message
    expected_head: CommitId | None = Field(
        None, description="refuse (409) unless the branch tip is still this commit"
    )


@write_route(router, "POST", "/repos/{repo}/commits", "commit_file", COMMIT_FILE, None, 201)
def commit_file(
    request: Request, repo: RepoName, body: CommitIn, idempotency_key: KeyHeader = None
) -> JSONResponse:
    """Commit a new version of one file to a branch. Every call makes a new commit, even
    when the content is unchanged. Accepts an Idempotency-Key header; `expected_head`
    makes the commit conditional on the branch tip."""
    r = write_repo(request, repo)
    payload = {"repo": repo, **body.model_dump()}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        stamp, date = clock(s)
        tip = branch_or_404(r, body.branch)
        if body.expected_head is not None and not tip.startswith(body.expected_head):
            raise error(
                409,
                "branch_moved",
                f"Branch {body.branch} is at {tip}, not {body.expected_head}",
            )
        sha, _tree = commit_on_branch(
            request,
            r,
            branch=body.branch,
            expected_tip=tip,
            parents=[tip],
            message=body.message,
            date=date,
            stage=stage_file(r, tip, body.path, body.content),
        )
        note_commit(
            s,
            r,
            branch=body.branch,
            sha=sha,
            parents=[tip],
            kind="commit",
            message=body.message,
            created=stamp,
            path=body.path,
        )
        sync_mirror(s, r)
        args = {k: payload[k] for k in ("repo", "branch", "path", "content", "message")}
        COMMIT_FILE.commit(s, {**args, "sha": sha, "parent": tip}, key, ref=sha)
        return 201, {**commit_view(r, sha, present=True), "branch": body.branch}

    return run_in_repo(request, r, COMMIT_FILE, route="commit_file", payload=payload, apply=apply)


# ---- tags --------------------------------------------------------------------------


class TagIn(BaseModel):
    name: RefName
    ref: Rev = Field(description="branch, tag or commit id to tag")
    message: Message | None = Field(None, description="makes an annotated tag")


@write_route(router, "POST", "/repos/{repo}/tags", "create_tag", CREATE_TAG, None, 201)
def create_tag(request: Request, repo: RepoName, body: TagIn) -> JSONResponse:
    """Tag a commit (annotated when a message is given). A tag that exists is refused (409)."""
    r = write_repo(request, repo)
    payload = {"repo": repo, **body.model_dump()}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        _stamp, date = clock(s)
        target = resolve_or_404(r, body.ref)
        if r.ref_exists(f"refs/tags/{body.name}"):
            at = r.resolve(f"refs/tags/{body.name}")
            raise error(409, "tag_exists", f"Tag {body.name} already exists (on {at})")
        args = ["tag", *(["-a", "-m", body.message] if body.message else []), body.name, target]
        try:
            r.git(*args, date=date)
        except GitError as exc:
            raise git_failure(r, exc, "tag_exists") from exc
        sync_mirror(s, r)
        CREATE_TAG.commit(s, {**payload, "sha": target}, key)
        return 201, {"name": body.name, "sha": target, "annotated": bool(body.message)}

    return run_in_repo(request, r, CREATE_TAG, route="create_tag", payload=payload, apply=apply)


# ---- repair ------------------------------------------------------------------------


@write_route(router, "POST", "/repos/{repo}/repair", "repair_repository", REPAIR_REPO)
def repair_repository(request: Request, repo: RepoName) -> JSONResponse:
    """Remove stale lock files (.git/index.lock, ref locks) an interrupted git process left
    behind, so git commands work again. Changes staged under a stale lock are discarded."""
    r = write_repo(request, repo)

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        removed = remove_stale_locks(r)
        if removed:
            sync_mirror(s, r)
            REPAIR_REPO.commit(s, {"repo": repo, "removed": removed}, key)
        return 200, {"repo": repo, "removed_lock_files": removed}

    return run_in_repo(
        request, r, REPAIR_REPO, route="repair_repository", payload={"repo": repo}, apply=apply
    )
