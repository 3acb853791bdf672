"""Routes that combine histories: merges, cherry-picks and reverts.

Each computes the new tree with git's merge machinery (`git merge-tree --write-tree`),
commits it under `.git/index.lock` (`commit_on_branch`, crash point
`git.after_index_lock`), then in one SQLite transaction rebuilds the repository's mirror
and writes the commit-log row.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy.orm import Session

from undobench_gym.services.domains._service.kit import Effect, error, write_route
from undobench_gym.services.domains.git.common import (
    CommitId,
    Message,
    RefName,
    RepoName,
    branch_or_404,
    clock,
    note_commit,
    resolve_or_404,
    run_in_repo,
    write_repo,
)
from undobench_gym.services.domains.git.gitcli import GitError
from undobench_gym.services.domains.git.index import (
    commit_on_branch,
    git_failure,
    merge_trees,
    move_branch,
    stage_tree,
    three_way_tree,
)
from undobench_gym.services.domains.git.repos import sync_mirror
from undobench_gym.services.domains.git.views import commit_view

router = APIRouter(prefix="/v1")
MERGE = Effect("branch.merge", "set", ("repo", "source", "target"))
#: A pick or a revert is keyed by the commit it applies, resolved to its full id.
CHERRY_PICK = Effect("commit.cherry_pick", "additive", ("repo", "commit", "branch"))
REVERT = Effect("commit.revert", "additive", ("repo", "commit", "branch"), compensation=True)


# ---- merges, cherry-picks, reverts -------------------------------------------------


class MergeIn(BaseModel):
    source: RefName = Field(description="branch to merge")
    target: RefName = Field(description="branch that receives the merge")
    mode: Literal["auto", "fast_forward", "merge_commit"] = Field(
        "auto", description="auto: fast-forward when possible, else a merge commit"
    )
    message: Message | None = None


@write_route(router, "POST", "/repos/{repo}/merges", "merge_branch", MERGE)
def merge_branch(request: Request, repo: RepoName, body: MergeIn) -> JSONResponse:
    """Merge one branch into another. A source already contained in the target changes
    nothing ("already_up_to_date"); conflicts are refused (409) with the paths."""
    r = write_repo(request, repo)
    identity = {"repo": repo, "source": body.source, "target": body.target}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        stamp, date = clock(s)
        src, dst = branch_or_404(r, body.source), branch_or_404(r, body.target)
        if r.is_ancestor(src, dst):
            return 200, {"result": "already_up_to_date", "sha": dst}
        can_ff = r.is_ancestor(dst, src)
        if body.mode == "fast_forward" and not can_ff:
            raise error(409, "not_fast_forward", f"{body.target} has commits {body.source} lacks")
        if can_ff and body.mode != "merge_commit":
            move_branch(r, body.target, src, dst, "merge: fast-forward")
            result, sha, parents = "fast_forward", src, [dst]
        else:
            try:
                tree, conflicts = merge_trees(r, dst, src)
            except GitError as exc:
                raise git_failure(r, exc) from exc
            if tree is None:
                raise error(409, "merge_conflict", f"Merge conflict in {', '.join(conflicts)}")
            default = f"Merge branch '{body.source}'" + (
                "" if body.target == r.head_branch() else f" into {body.target}"
            )
            message = body.message or default
            parents = [dst, src]
            sha, _ = commit_on_branch(
                request,
                r,
                branch=body.target,
                expected_tip=dst,
                parents=parents,
                message=message,
                date=date,
                stage=stage_tree(r, tree),
            )
            note_commit(
                s,
                r,
                branch=body.target,
                sha=sha,
                parents=parents,
                kind="merge",
                message=message,
                created=stamp,
                source=src,
            )
            result = "merge_commit"
        sync_mirror(s, r)
        MERGE.commit(s, {**identity, "mode": body.mode, "result": result, "sha": sha}, key)
        return 200, {"result": result, "sha": sha, "parents": parents}

    payload = {"repo": repo, **body.model_dump()}
    return run_in_repo(request, r, MERGE, route="merge_branch", payload=payload, apply=apply)


class PickIn(BaseModel):
    commit: CommitId
    branch: RefName


def _apply_change(request: Request, repo: str, body: PickIn, *, revert: bool) -> JSONResponse:
    r = write_repo(request, repo)
    effect, kind = (REVERT, "revert") if revert else (CHERRY_PICK, "cherry_pick")

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        stamp, date = clock(s)
        source = resolve_or_404(r, body.commit, "commit")
        tip = branch_or_404(r, body.branch)
        view = commit_view(r, source)
        if len(view["parents"]) != 1:
            raise error(409, "unsupported_commit", f"{source} is a merge or root commit")
        before, after = r.tree_of(view["parents"][0]), view["tree"]
        if revert:
            before, after = after, before
        try:
            tree, conflicts = three_way_tree(r, before, tip, after, date)
        except GitError as exc:
            raise git_failure(r, exc) from exc
        if tree is None:
            raise error(409, "conflict", f"Could not apply {source[:12]}: conflict in {conflicts}")
        if revert:
            message = f'Revert "{view["subject"]}"\n\nThis reverts commit {source}.'
            nothing = f"Nothing to revert: {body.branch} does not have the change of {source}"
        else:
            message = f"{view['message'].rstrip()}\n\n(cherry picked from commit {source})"
            nothing = f"Nothing to pick: {body.branch} already has the change of {source}"
        sha, _ = commit_on_branch(
            request,
            r,
            branch=body.branch,
            expected_tip=tip,
            parents=[tip],
            message=message,
            date=date,
            stage=stage_tree(r, tree),
            allow_empty=False,
            empty_message=nothing,
        )
        note_commit(
            s,
            r,
            branch=body.branch,
            sha=sha,
            parents=[tip],
            kind=kind,
            message=message,
            created=stamp,
            source=source,
        )
        sync_mirror(s, r)
        # A revert undoes the commit it names (a file commit or a pick made in the episode).
        undoes = {"ref": source} if revert else None
        args = {"repo": repo, "commit": source, "branch": body.branch, "sha": sha}
        effect.commit(s, args, key, ref=sha, undoes=undoes)
        return 201, {**commit_view(r, sha, present=True), "branch": body.branch}

    payload = {"repo": repo, **body.model_dump()}
    return run_in_repo(request, r, effect, route=kind, payload=payload, apply=apply)


@write_route(
    router, "POST", "/repos/{repo}/cherry-picks", "cherry_pick_commit", CHERRY_PICK, None, 201
)
def cherry_pick_commit(request: Request, repo: RepoName, body: PickIn) -> JSONResponse:
    """Apply the change of one commit onto a branch as a new commit. A change the branch
    already has is refused (409); so are conflicts."""
    return _apply_change(request, repo, body, revert=False)


@write_route(router, "POST", "/repos/{repo}/reverts", "revert_commit", REVERT, None, 201)
def revert_commit(request: Request, repo: RepoName, body: PickIn) -> JSONResponse:
    """Undo the change of one commit on a branch with a new revert commit (history is kept).
    A change the branch no longer has is refused (409)."""
    return _apply_change(request, repo, body, revert=True)
