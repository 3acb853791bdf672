"""Read-only routes: repositories, branches, tags, commits, history, files, diffs, releases.

The repositories on disk answer most of them (through git); the service's own tables
answer for repositories' descriptions and releases.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from fastapi import Path as PathParam
from sqlalchemy import select

from undobench_gym.services.domains._service.kit import DbSession, error, row
from undobench_gym.services.domains.git.common import (
    RepoName,
    check_query,
    read_repo,
    read_route,
    resolve_or_404,
)
from undobench_gym.services.domains.git.models import Release, Repository
from undobench_gym.services.domains.git.views import (
    BranchOut,
    CommitFilesOut,
    DiffOut,
    FileOut,
    LogEntryOut,
    ReleaseOut,
    RepositoryDetailOut,
    RepositoryOut,
    TagOut,
    commit_view,
)

router = APIRouter(prefix="/v1")
MAX_PATCH_CHARS = 20_000
SEP = "\x1f"


def _changed_files(listing: str) -> list[dict[str, str]]:
    """`--name-status` lines as {status, path}."""
    return [
        {"status": ln.split("\t", 1)[0], "path": ln.split("\t", 1)[1]}
        for ln in listing.splitlines()
        if "\t" in ln
    ]


@read_route(router, "/repos", "list_repos", list[RepositoryOut])
def list_repos(s: DbSession) -> list[dict[str, Any]]:
    """List the hosted repositories."""
    return [row(r) for r in s.scalars(select(Repository).order_by(Repository.name))]


@read_route(router, "/repos/{repo}", "get_repository", RepositoryDetailOut)
def get_repository(s: DbSession, repo: RepoName) -> dict[str, Any]:
    """One repository: its default branch and tip, branch and tag names, any lock files
    present in .git (left by an interrupted git process) and releases not yet complete."""
    r = read_repo(s, repo)
    refs = r.refs()
    meta = s.get(Repository, repo)
    q = select(Release).where(Release.repo == repo, Release.status != "complete")
    open_releases = [
        {"version": x.version, "status": x.status} for x in s.scalars(q.order_by(Release.id))
    ]
    return {
        "name": repo,
        "description": meta.description if meta else "",
        "default_branch": r.head_branch(),
        "head": refs.get(f"refs/heads/{r.head_branch()}"),
        "branches": sorted(k[len("refs/heads/") :] for k in refs if k.startswith("refs/heads/")),
        "tags": sorted(k[len("refs/tags/") :] for k in refs if k.startswith("refs/tags/")),
        "lock_files": r.lock_files(),
        "releases_in_progress": open_releases,
    }


@read_route(router, "/repos/{repo}/branches", "list_branches", list[BranchOut])
def list_branches(s: DbSession, repo: RepoName) -> list[dict[str, Any]]:
    """List branches with their tip commit and its subject."""
    r = read_repo(s, repo)
    fmt = f"--format=%(refname:lstrip=2){SEP}%(objectname){SEP}%(subject)"
    out = []
    for line in r.out("for-each-ref", fmt, "refs/heads").splitlines():
        name, sha, subject = line.split(SEP)
        out.append({"name": name, "sha": sha, "subject": subject})
    return out


@read_route(router, "/repos/{repo}/tags", "list_tags", list[TagOut])
def list_tags(s: DbSession, repo: RepoName) -> list[dict[str, Any]]:
    """List tags with the commit each points to and, for annotated tags, the message."""
    r = read_repo(s, repo)
    fmt = (
        f"--format=%(refname:lstrip=2){SEP}%(objecttype){SEP}%(objectname)"
        f"{SEP}%(*objectname){SEP}%(contents:subject)"
    )
    out = []
    for line in r.out("for-each-ref", fmt, "refs/tags").splitlines():
        name, kind, oid, peeled, subject = line.split(SEP)
        annotated = kind == "tag"
        out.append(
            {
                "name": name,
                "sha": peeled if annotated else oid,
                "annotated": annotated,
                "message": subject if annotated else None,
            }
        )
    return out


@read_route(router, "/repos/{repo}/commits/{sha}", "get_commit", CommitFilesOut)
def get_commit(
    s: DbSession, repo: RepoName, sha: str = PathParam(pattern=r"^[0-9a-f]{4,40}$")
) -> dict[str, Any]:
    """One commit: parents, author, date, full message and the files it changed
    (against its first parent)."""
    r = read_repo(s, repo)
    full = resolve_or_404(r, sha, "commit")
    view = commit_view(r, full)
    base = view["parents"][:1] or ["--root"]
    listing = r.out("diff-tree", "-r", "--no-commit-id", "--name-status", *base, full)
    return {**view, "files": _changed_files(listing)}


@read_route(router, "/repos/{repo}/log", "get_log", list[LogEntryOut])
def get_log(
    s: DbSession,
    repo: RepoName,
    ref: str = Query("main", max_length=100, description="branch, tag or commit id"),
    limit: int = Query(20, ge=1, le=100),
    path: str | None = Query(None, max_length=200, description="only commits touching it"),
) -> list[dict[str, Any]]:
    """The history of a branch, tag or commit, newest first."""
    r = read_repo(s, repo)
    sha = resolve_or_404(r, check_query("rev", ref))
    args = ["log", f"--format=%H{SEP}%P{SEP}%an <%ae>{SEP}%aI{SEP}%s", "-n", str(limit), sha]
    if path is not None:
        args += ["--", check_query("path", path)]
    out = []
    for line in r.out(*args).splitlines():
        commit, parents, author, date, subject = line.split(SEP)
        date = date.replace("+00:00", "Z")
        out.append(
            {
                "sha": commit,
                "parents": parents.split(),
                "author": author,
                "date": date,
                "subject": subject,
            }
        )
    return out


@read_route(router, "/repos/{repo}/file", "get_file", FileOut)
def get_file(
    s: DbSession,
    repo: RepoName,
    path: str = Query(max_length=200),
    ref: str = Query("main", max_length=100, description="branch, tag or commit id"),
) -> dict[str, Any]:
    """Read a file as it is at a branch, tag or commit."""
    r = read_repo(s, repo)
    sha = resolve_or_404(r, check_query("rev", ref))
    check_query("path", path)
    proc = r.git("cat-file", "blob", f"{sha}:{path}", check=False)
    if proc.returncode != 0:
        raise error(404, "file_not_found", f"No file {path} at {ref} in {repo}")
    blob = r.out("rev-parse", f"{sha}:{path}")
    return {
        "repo": repo,
        "ref": ref,
        "commit": sha,
        "path": path,
        "blob": blob,
        "size": len(proc.stdout),
        "content": proc.stdout.decode(errors="replace"),
    }


@read_route(router, "/repos/{repo}/diff", "get_diff", DiffOut)
def get_diff(
    s: DbSession,
    repo: RepoName,
    base: str = Query(max_length=100, description="branch, tag or commit id"),
    head: str = Query(max_length=100, description="branch, tag or commit id"),
) -> dict[str, Any]:
    """The changes from `base` to `head`: changed files and a unified patch."""
    r = read_repo(s, repo)
    a = resolve_or_404(r, check_query("rev", base))
    b = resolve_or_404(r, check_query("rev", head))
    names = r.out("diff", "--no-ext-diff", "--no-renames", "--name-status", a, b)
    patch = r.git("diff", "--no-ext-diff", "--no-color", "--no-renames", a, b).stdout.decode(
        errors="replace"
    )
    return {
        "base": a,
        "head": b,
        "files": _changed_files(names),
        "patch": patch[:MAX_PATCH_CHARS],
        "truncated": len(patch) > MAX_PATCH_CHARS,
    }


@read_route(router, "/repos/{repo}/releases", "list_releases", list[ReleaseOut])
def list_releases(s: DbSession, repo: RepoName) -> list[dict[str, Any]]:
    """Releases of a repository with the step each has reached (started, branch_created,
    version_bumped, tagged, complete)."""
    read_repo(s, repo)
    q = select(Release).where(Release.repo == repo).order_by(Release.created, Release.id)
    return [row(x) for x in s.scalars(q)]
