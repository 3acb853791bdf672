"""Git hosting service: real repositories on disk, driven by the git command line.

Read-only routes live here; single-step mutations in `mutations`, the release composite
in `release`. The repositories are the state: `extra_state` reads every repository's
refs and lock files from disk, `partial_state` reports locks a dead writer left and
releases cut half-way. SQLite holds the commit log, the commits the service wrote, the
releases and a mirror of refs and files (rebuilt from disk in the same transaction as a
mutation's commit-log row, right after the disk change).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter, Query
from fastapi import Path as PathParam
from sqlalchemy import select
from sqlalchemy.orm import Session

from .._service.context import DomainService
from .._service.mutation import READ_ONLY, error
from . import changes, mutations, release
from .common import Ctx, RepoName, check_query, commit_view, open_repo, resolve_or_404
from .fixture import build_fixture
from .models import TABLES, CommitRecord, File, Ref, Release, Repository, row
from .repos import Repo, data_dir_of, repos_root, seed_repositories

router = APIRouter(prefix="/v1")
MAX_PATCH_CHARS = 20_000
SEP = "\x1f"


@router.get("/repos", operation_id="list_repos", openapi_extra=READ_ONLY)
def list_repos(ctx: Ctx) -> list[dict[str, Any]]:
    """List the hosted repositories."""
    with Session(ctx.engine) as s:
        return [row(r) for r in s.scalars(select(Repository).order_by(Repository.name))]


@router.get("/repos/{repo}", operation_id="get_repository", openapi_extra=READ_ONLY)
def get_repository(ctx: Ctx, repo: RepoName) -> dict[str, Any]:
    """One repository: its default branch and tip, branch and tag names, any lock files
    present in .git (left by an interrupted git process) and releases not yet complete."""
    r = open_repo(ctx, repo)
    refs = r.refs()
    with Session(ctx.engine) as s:
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


@router.get("/repos/{repo}/branches", operation_id="list_branches", openapi_extra=READ_ONLY)
def list_branches(ctx: Ctx, repo: RepoName) -> list[dict[str, Any]]:
    """List branches with their tip commit and its subject."""
    r = open_repo(ctx, repo)
    fmt = f"--format=%(refname:lstrip=2){SEP}%(objectname){SEP}%(subject)"
    out = []
    for line in r.out("for-each-ref", fmt, "refs/heads").splitlines():
        name, sha, subject = line.split(SEP)
        out.append({"name": name, "sha": sha, "subject": subject})
    return out


@router.get("/repos/{repo}/tags", operation_id="list_tags", openapi_extra=READ_ONLY)
def list_tags(ctx: Ctx, repo: RepoName) -> list[dict[str, Any]]:
    """List tags with the commit each points to and, for annotated tags, the message."""
    r = open_repo(ctx, repo)
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


@router.get("/repos/{repo}/commits/{sha}", operation_id="get_commit", openapi_extra=READ_ONLY)
def get_commit(
    ctx: Ctx, repo: RepoName, sha: str = PathParam(pattern=r"^[0-9a-f]{4,40}$")
) -> dict[str, Any]:
    """One commit: parents, author, date, full message and the files it changed
    (against its first parent)."""
    r = open_repo(ctx, repo)
    full = resolve_or_404(r, sha, "commit")
    view = commit_view(r, full)
    base = view["parents"][:1] or ["--root"]
    listing = r.out("diff-tree", "-r", "--no-commit-id", "--name-status", *base, full)
    files = [
        {"status": ln.split("\t", 1)[0], "path": ln.split("\t", 1)[1]}
        for ln in listing.splitlines()
        if "\t" in ln
    ]
    return {**view, "files": files}


@router.get("/repos/{repo}/log", operation_id="get_log", openapi_extra=READ_ONLY)
def get_log(
    ctx: Ctx,
    repo: RepoName,
    ref: str = Query("main", max_length=100, description="branch, tag or commit id"),
    limit: int = Query(20, ge=1, le=100),
    path: str | None = Query(None, max_length=200, description="only commits touching it"),
) -> list[dict[str, Any]]:
    """The history of a branch, tag or commit, newest first."""
    r = open_repo(ctx, repo)
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


@router.get("/repos/{repo}/file", operation_id="get_file", openapi_extra=READ_ONLY)
def get_file(
    ctx: Ctx,
    repo: RepoName,
    path: str = Query(max_length=200),
    ref: str = Query("main", max_length=100, description="branch, tag or commit id"),
) -> dict[str, Any]:
    """Read a file as it is at a branch, tag or commit."""
    r = open_repo(ctx, repo)
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


@router.get("/repos/{repo}/diff", operation_id="get_diff", openapi_extra=READ_ONLY)
def get_diff(
    ctx: Ctx,
    repo: RepoName,
    base: str = Query(max_length=100, description="branch, tag or commit id"),
    head: str = Query(max_length=100, description="branch, tag or commit id"),
) -> dict[str, Any]:
    """The changes from `base` to `head`: changed files and a unified patch."""
    r = open_repo(ctx, repo)
    a = resolve_or_404(r, check_query("rev", base))
    b = resolve_or_404(r, check_query("rev", head))
    names = r.out("diff", "--no-ext-diff", "--no-renames", "--name-status", a, b)
    patch = r.git("diff", "--no-ext-diff", "--no-color", "--no-renames", a, b).stdout.decode(
        errors="replace"
    )
    return {
        "base": a,
        "head": b,
        "files": [
            {"status": ln.split("\t", 1)[0], "path": ln.split("\t", 1)[1]}
            for ln in names.splitlines()
            if "\t" in ln
        ],
        "patch": patch[:MAX_PATCH_CHARS],
        "truncated": len(patch) > MAX_PATCH_CHARS,
    }


@router.get("/repos/{repo}/releases", operation_id="list_releases", openapi_extra=READ_ONLY)
def list_releases(ctx: Ctx, repo: RepoName) -> list[dict[str, Any]]:
    """Releases of a repository with the step each has reached (started, branch_created,
    version_bumped, tagged, complete)."""
    open_repo(ctx, repo)
    with Session(ctx.engine) as s:
        q = select(Release).where(Release.repo == repo).order_by(Release.created, Release.id)
        return [row(x) for x in s.scalars(q)]


# ---- domain definition -------------------------------------------------------------


def seed_state(s: Session, seed: int) -> None:
    fx = build_fixture(seed)
    s.add_all(Repository(**r) for r in fx["repos"])
    s.add_all(Ref(**r) for r in fx["refs"])
    s.add_all(File(**f) for f in fx["files"])
    s.add_all(CommitRecord(**c) for c in fx["commits"])
    s.add_all(Release(**r) for r in fx["releases"])


def seed_files(data_dir: Path, seed: int) -> None:
    seed_repositories(data_dir, seed)


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
    routers=[router, mutations.router, changes.router, release.router],
    tables=TABLES,
    seed_state=seed_state,
    partial_state=partial_state,
    extra_state=extra_state,
    seed_files=seed_files,
)

__all__ = ["DOMAIN"]
