"""Cutting a release: a composite of four git steps, each followed by its own SQLite
transaction (status, mirror, commit-log row):

    started -> branch_created  create release/X.Y.Z at main's tip
            -> version_bumped  commit VERSION = X.Y.Z on it (under .git/index.lock)
            -> tagged          annotated tag vX.Y.Z on the bump commit
            -> complete        commit the release notes to CHANGELOG.md on the branch

Crash points: `git.release.after_branch`, `git.after_index_lock` (inside the bump commit,
leaving .git/index.lock behind) and `git.release.after_tag`. `resume_release` carries a
release on from the step it reached; a lock left by a crash must first be removed with
`repair_repository`, as git itself demands.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, HTTPException, Path, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from undobench_gym.services.domains._service.kit import (
    Effect,
    ServiceContext,
    error,
    get_ctx,
    maybe_crash,
    new_id,
    now,
    row,
    run_composite,
    write_route,
)
from undobench_gym.services.domains.git.common import (
    VERSION_PATTERN,
    Message,
    RepoName,
    branch_or_404,
    clock,
    note_commit,
    write_repo,
)
from undobench_gym.services.domains.git.fixture import bump_message, changelog_with, notes_message
from undobench_gym.services.domains.git.gitcli import ZERO_OID, GitError
from undobench_gym.services.domains.git.index import (
    commit_on_branch,
    git_failure,
    probe_index,
    stage_file,
)
from undobench_gym.services.domains.git.models import Release
from undobench_gym.services.domains.git.repos import Repo, sync_mirror
from undobench_gym.services.domains.git.views import ReleaseOut, commit_view

router = APIRouter(prefix="/v1")
CHANGELOG = "CHANGELOG.md"
CUT_RELEASE = Effect("release.cut", "create_unique", ("repo", "version"), "constraint")
RESUME_RELEASE = Effect("release.resume", "set", ("repo", "version"), resumption=True)
#: The steps of a release, each with its own commit-log row (no route of their own).
RELEASE_BRANCH = Effect("release.branch", "create_unique", ("repo", "version"))
RELEASE_BUMP = Effect("release.bump", "additive", ("repo", "version"))
RELEASE_TAG = Effect("release.tag", "create_unique", ("repo", "version"))
RELEASE_NOTES = Effect("release.notes", "additive", ("repo", "version"))


class ReleaseIn(BaseModel):
    version: str = Field(pattern=VERSION_PATTERN, description="X.Y.Z")
    notes: Message = Field(description="release notes, added to CHANGELOG.md")


def _finish_step(ctx: ServiceContext, r: Repo, rel_id: str, step: Effect, **fields: Any) -> None:
    with Session(ctx.engine) as s, s.begin():
        rel = s.get(Release, rel_id)
        assert rel is not None
        for k, v in fields.items():
            setattr(rel, k, v)
        rel.updated = now(s)
        if step in (RELEASE_BUMP, RELEASE_NOTES):
            sha = fields.get("bump_sha") or fields["notes_sha"]
            view = commit_view(r, sha, present=True)
            note_commit(
                s,
                r,
                branch=rel.branch,
                sha=sha,
                parents=view["parents"],
                kind="release",
                message=view["message"].rstrip("\n"),
                created=rel.updated,
                path="VERSION" if step is RELEASE_BUMP else CHANGELOG,
            )
        sync_mirror(s, r)
        step.commit(s, {"repo": rel.repo, "version": rel.version, **fields}, None)


def _tick(ctx: ServiceContext) -> int:
    with Session(ctx.engine) as s, s.begin():
        return clock(s)[1]


def _commit_step(
    request: Request, r: Repo, rel: dict[str, Any], path: str, content: str, message: str
) -> str:
    """Commit `path` = `content` on the release branch, unless a commit with this message
    already is its tip (a step that committed before its bookkeeping was written)."""
    tip = branch_or_404(r, rel["branch"])
    if commit_view(r, tip, present=True)["subject"] == message:
        return tip
    sha, _ = commit_on_branch(
        request,
        r,
        branch=rel["branch"],
        expected_tip=tip,
        parents=[tip],
        message=message,
        date=_tick(get_ctx(request)),
        stage=stage_file(r, tip, path, content),
    )
    return sha


def advance(request: Request, r: Repo, rel_id: str) -> None:
    """Carry the release on, one step at a time, until it is complete."""
    ctx = get_ctx(request)
    while True:
        with Session(ctx.engine) as s:
            found = s.get(Release, rel_id)
            assert found is not None
            rel = row(found)
        status, version = rel["status"], rel["version"]
        try:
            if status == "complete":
                return
            if status == "started":
                ref = f"refs/heads/{rel['branch']}"
                tip = r.resolve(ref)
                if tip is None:
                    r.git("update-ref", "-m", "release: branch", ref, rel["base_sha"], ZERO_OID)
                elif not r.is_ancestor(rel["base_sha"], tip):
                    raise error(409, "branch_exists", f"{rel['branch']} exists elsewhere")
                _finish_step(ctx, r, rel_id, RELEASE_BRANCH, status="branch_created")
                maybe_crash(request, "git.release.after_branch")
            elif status == "branch_created":
                sha = _commit_step(
                    request, r, rel, "VERSION", f"{version}\n", bump_message(version)
                )
                _finish_step(ctx, r, rel_id, RELEASE_BUMP, status="version_bumped", bump_sha=sha)
            elif status == "version_bumped":
                tag_ref = f"refs/tags/{rel['tag']}"
                if not r.ref_exists(tag_ref):
                    r.git(
                        "tag",
                        "-a",
                        "-m",
                        f"Release {version}",
                        rel["tag"],
                        rel["bump_sha"],
                        date=_tick(ctx),
                    )
                elif r.resolve(tag_ref) != rel["bump_sha"]:
                    raise error(409, "tag_exists", f"Tag {rel['tag']} exists on another commit")
                tag_object = r.out("rev-parse", tag_ref)
                _finish_step(ctx, r, rel_id, RELEASE_TAG, status="tagged", tag_object=tag_object)
                maybe_crash(request, "git.release.after_tag")
            elif status == "tagged":
                current = r.git(
                    "cat-file", "blob", f"refs/heads/{rel['branch']}:{CHANGELOG}", check=False
                )
                text = current.stdout.decode() if current.returncode == 0 else None
                content = changelog_with(text, version, rel["notes"])
                sha = _commit_step(request, r, rel, CHANGELOG, content, notes_message(version))
                _finish_step(ctx, r, rel_id, RELEASE_NOTES, status="complete", notes_sha=sha)
        except GitError as exc:
            raise git_failure(r, exc) from exc


def release_view(s: Session, rel_id: str) -> dict[str, Any]:
    rel = s.get(Release, rel_id)
    assert rel is not None
    return row(rel)


@dataclass
class _Cut:
    """The composite's handle: the release it opened, and a refusal one of its steps met
    (answered from the last transaction, so that the key is freed for a retry)."""

    rel_id: str = ""
    refused: HTTPException | None = None


@write_route(router, "POST", "/repos/{repo}/releases", "cut_release", CUT_RELEASE, ReleaseOut, 201)
def cut_release(request: Request, repo: RepoName, body: ReleaseIn) -> JSONResponse:
    """Cut release X.Y.Z from main: create branch release/X.Y.Z, commit VERSION = X.Y.Z on
    it, tag the bump commit vX.Y.Z, then commit the notes to CHANGELOG.md on the branch.
    A version released (or started) before is refused (409); a release that stopped
    part-way is finished with resume_release."""
    r = write_repo(request, repo)
    branch, tag = f"release/{body.version}", f"v{body.version}"
    cut = _Cut()
    payload = {"repo": repo, **body.model_dump()}

    def start(s: Session, key: str | None) -> _Cut:
        q = select(Release).where(Release.repo == repo, Release.version == body.version)
        if (found := s.scalar(q)) is not None:
            raise error(
                409,
                "release_exists",
                f"Release {body.version} of {repo} already exists ({found.status}); "
                "resume_release finishes a release that stopped part-way",
            )
        for ref in (f"refs/heads/{branch}", f"refs/tags/{tag}"):
            if r.ref_exists(ref):
                raise error(409, "release_exists", f"{ref} already exists in {repo}")
        probe_index(r)
        stamp = now(s)
        rel = Release(
            id=new_id(s, "rel"),
            repo=repo,
            version=body.version,
            branch=branch,
            tag=tag,
            status="started",
            base_sha=branch_or_404(r, r.head_branch()),
            notes=body.notes,
            created=stamp,
            updated=stamp,
        )
        s.add(rel)
        CUT_RELEASE.commit(s, payload, key)
        cut.rel_id = rel.id
        return cut

    def steps(c: _Cut) -> None:
        try:
            advance(request, r, c.rel_id)
        except HTTPException as exc:
            c.refused = exc

    def view(s: Session, c: _Cut) -> dict[str, Any]:
        if c.refused is not None:
            raise c.refused
        return release_view(s, c.rel_id)

    with r.mutex():
        return run_composite(
            request,
            route="cut_release",
            payload=payload,
            start=start,
            advance=steps,
            view=view,
            status=201,
            native=CUT_RELEASE.native,
        )


@write_route(
    router,
    "POST",
    "/repos/{repo}/releases/{version}/resume",
    "resume_release",
    RESUME_RELEASE,
    ReleaseOut,
)
def resume_release(
    request: Request,
    repo: RepoName,
    version: str = Path(pattern=VERSION_PATTERN),
) -> dict[str, Any]:
    """Carry a release that stopped part-way on from the step it reached; a complete
    release is returned as it is (and nothing is recorded)."""
    # Not a `run_composite`: this route has never honoured an Idempotency-Key (in no
    # idempotency mode), and a resume of a complete release writes nothing at all.
    ctx = get_ctx(request)
    r = write_repo(request, repo)
    with r.mutex():
        with Session(ctx.engine) as s:
            q = select(Release).where(Release.repo == repo, Release.version == version)
            found = s.scalar(q)
            if found is None:
                raise error(404, "release_not_found", f"No release {version} of {repo}")
            rel_id, stopped = found.id, found.status
        if stopped == "complete":
            with Session(ctx.engine) as s:
                return release_view(s, rel_id)
        probe_index(r)
        advance(request, r, rel_id)
        with Session(ctx.engine) as s, s.begin():
            # The steps it ran wrote their own rows; this one says a resume finished them.
            RESUME_RELEASE.commit(
                s, {"repo": repo, "version": version, "resumed_from": stopped}, None
            )
            return release_view(s, rel_id)
