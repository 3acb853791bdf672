"""What the git routes share: argument types and checks, repository lookup, views."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Header, Path
from pydantic import AfterValidator, Field
from sqlalchemy.orm import Session

from .._service.context import ServiceContext, get_ctx, new_id, now
from .._service.mutation import error
from .gitcli import epoch_of, path_problem, ref_name_problem, rev_problem
from .models import CommitRecord
from .repos import ObjectReader, Repo, split_object

Ctx = Annotated[ServiceContext, Depends(get_ctx)]
KeyHeader = Annotated[str | None, Header(alias="Idempotency-Key", max_length=255)]
REPO_PATTERN = r"^[a-z0-9][a-z0-9-]{0,39}$"
RepoName = Annotated[str, Path(pattern=REPO_PATTERN, description="repository name")]
VERSION_PATTERN = r"^(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})$"


def _ref(value: str) -> str:
    if (problem := ref_name_problem(value)) is not None:
        raise ValueError(f"invalid name {value[:100]!r}: {problem}")
    return value


def _rev(value: str) -> str:
    if (problem := rev_problem(value)) is not None:
        raise ValueError(f"invalid revision {value[:100]!r}: {problem}")
    return value


def _path(value: str) -> str:
    if (problem := path_problem(value)) is not None:
        raise ValueError(f"invalid path {value[:200]!r}: {problem}")
    return value


def _message(value: str) -> str:
    text = "\n".join(line.rstrip() for line in value.strip().splitlines())
    if not text or "\0" in text:
        raise ValueError("the message must hold some text and no NUL character")
    return text


RefName = Annotated[str, Field(min_length=1, max_length=100), AfterValidator(_ref)]
Rev = Annotated[str, Field(min_length=1, max_length=100), AfterValidator(_rev)]
FilePath = Annotated[str, Field(min_length=1, max_length=200), AfterValidator(_path)]
Message = Annotated[str, Field(min_length=1, max_length=2000), AfterValidator(_message)]
CommitId = Annotated[str, Field(pattern=r"^[0-9a-f]{4,40}$")]


def check_query(kind: str, value: str) -> str:
    """Validate a query parameter (400 on a bad one)."""
    checks = {"rev": rev_problem, "path": path_problem, "ref": ref_name_problem}
    if (problem := checks[kind](value)) is not None:
        raise error(400, "invalid_request", f"invalid {kind} {value[:100]!r}: {problem}")
    return value


def open_repo(ctx: ServiceContext, name: str) -> Repo:
    repo = Repo(ctx.data_dir, name)
    if not repo.exists():
        raise error(404, "repository_not_found", f"No repository named {name}")
    return repo


def resolve_or_404(repo: Repo, rev: str, what: str = "revision") -> str:
    sha = repo.resolve(rev)
    if sha is None:
        raise error(404, "revision_not_found", f"No {what} {rev} in {repo.name}")
    return sha


def branch_or_404(repo: Repo, branch: str) -> str:
    sha = repo.branch_tip(branch)
    if sha is None:
        raise error(404, "branch_not_found", f"No branch {branch} in {repo.name}")
    return sha


def clock(s: Session) -> tuple[str, int]:
    """The virtual clock: an ISO stamp and the same instant as Unix seconds for git."""
    stamp = now(s)
    return stamp, epoch_of(stamp.replace("Z", "+0000"))


def commit_view(repo: Repo, sha: str) -> dict[str, Any]:
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
        "date": _iso(stamp),
        "subject": message.split("\n", 1)[0],
        "message": message,
    }


def _iso(stamp: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def note_commit(
    s: Session,
    repo: Repo,
    *,
    branch: str,
    sha: str,
    parents: list[str],
    kind: str,
    message: str,
    created: str,
    path: str | None = None,
    source: str | None = None,
) -> None:
    s.add(
        CommitRecord(
            id=new_id(s, "gc"),
            repo=repo.name,
            branch=branch,
            sha=sha,
            parents=parents,
            kind=kind,
            message=message,
            path=path,
            source=source,
            created=created,
        )
    )
