"""What the git routes answer with: the commit view and the response models.

Rows of the service's own tables (repositories, releases) answer with `row_model`s; the
answers read from the repositories on disk (branches, tags, commits, files, diffs) are
written out in the key order the read routes build them in, so the OpenAPI document tells
an agent the shape of every read's answer (and of a release, what the composite answers).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from undobench_gym.services.domains._service.kit import error, row_model
from undobench_gym.services.domains._service.lru import LruCache
from undobench_gym.services.domains.git.fixture import iso
from undobench_gym.services.domains.git.models import Release, Repository
from undobench_gym.services.domains.git.repos import ObjectReader, Repo, split_object

#: Built at run time, so typed `Any`: mypy takes no variable as a type.
RepositoryOut: Any = row_model(Repository)
ReleaseOut: Any = row_model(Release)


class ReleaseStepOut(BaseModel):
    version: str
    status: str


class RepositoryDetailOut(BaseModel):
    name: str
    description: str
    default_branch: str
    head: str | None
    branches: list[str]
    tags: list[str]
    lock_files: list[str]
    releases_in_progress: list[ReleaseStepOut]


class BranchOut(BaseModel):
    name: str
    sha: str
    subject: str


class TagOut(BaseModel):
    name: str
    sha: str
    annotated: bool
    message: str | None


class ChangedFileOut(BaseModel):
    status: str
    path: str


class CommitOut(BaseModel):
    sha: str
    tree: str
    parents: list[str]
    author: str
    date: str
    subject: str
    message: str


class CommitFilesOut(CommitOut):
    files: list[ChangedFileOut]


class LogEntryOut(BaseModel):
    sha: str
    parents: list[str]
    author: str
    date: str
    subject: str


class FileOut(BaseModel):
    repo: str
    ref: str
    commit: str
    path: str
    blob: str
    size: int
    content: str


class DiffOut(BaseModel):
    base: str
    head: str
    files: list[ChangedFileOut]
    patch: str
    truncated: bool


#: Commit views by repository and sha, for commits known to be in the repository. A
#: commit object never changes; only whether a repository holds it does (a reset takes
#: away what an episode wrote), hence `present`.
_VIEWS: LruCache[tuple[str, str], dict[str, Any]] = LruCache(512)


def commit_view(repo: Repo, sha: str, *, present: bool = False) -> dict[str, Any]:
    """`present`: the caller just wrote `sha` or read it from a ref, so the view may come
    from the cache (no git process); otherwise the object store is asked."""
    key = (repo.name, sha)
    kept = _VIEWS.get(key) if present else None
    if kept is None:
        kept = _read_commit_view(repo, sha)
        _VIEWS.put(key, kept)
    return {**kept, "parents": list(kept["parents"])}


def _read_commit_view(repo: Repo, sha: str) -> dict[str, Any]:
    with ObjectReader(repo) as rd:
        obj = rd.read(sha)
    if obj is None or obj[0] != "commit":
        raise error(404, "revision_not_found", f"No commit {sha} in {repo.name}")
    headers, message = split_object(obj[1])
    author = headers["author"][0]
    name_email, _, when = author.rpartition(">")
    stamp = int(when.split()[0])
    return {
        "sha": sha,
        "tree": headers["tree"][0],
        "parents": headers.get("parent", []),
        "author": name_email + ">",
        "date": iso(stamp),
        "subject": message.split("\n", 1)[0],
        "message": message,
    }
