"""What the git routes share: argument types and checks, repository lookup, bookkeeping.

The typed aliases are the domain's own, not the kit's `id_types`: a repository name has
a description and no length bounds, a commit id a pattern only, and the OpenAPI
parameters (the tool schemas) stay as they are.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path as FsPath
from typing import Annotated, Any

from fastapi import Path, Request
from fastapi.responses import JSONResponse
from pydantic import AfterValidator, Field
from sqlalchemy.orm import Session

from undobench_gym.services.domains._service.kit import (
    Effect,
    error,
    get_ctx,
    new_id,
    now,
    run_mutation,
)
from undobench_gym.services.domains._service.kit import (
    read_route as read_route,  # one definition, in the kit
)
from undobench_gym.services.domains.git.gitcli import (
    epoch_of,
    path_problem,
    ref_name_problem,
    rev_problem,
)
from undobench_gym.services.domains.git.models import CommitRecord
from undobench_gym.services.domains.git.repos import Repo, data_dir_of

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


def open_repo(data_dir: FsPath, name: str) -> Repo:
    repo = Repo(data_dir, name)
    if not repo.exists():
        raise error(404, "repository_not_found", f"No repository named {name}")
    return repo


def read_repo(s: Session, name: str) -> Repo:
    """The repository a read route names; the repositories lie next to the SQLite file
    the route's session reads."""
    return open_repo(data_dir_of(s), name)


def write_repo(request: Request, name: str) -> Repo:
    """The repository a mutating route names, in the service's data directory."""
    return open_repo(get_ctx(request).data_dir, name)


def run_in_repo(
    request: Request,
    r: Repo,
    effect: Effect,
    *,
    route: str,
    payload: dict[str, Any],
    apply: Callable[[Session, str | None], tuple[int, Any]],
) -> JSONResponse:
    """`run_mutation` of a route with `effect` (whose idempotency says whether the route
    honours a key itself), as the only writer of repository `r` in this process."""
    with r.mutex():
        return run_mutation(
            request, route=route, native=effect.native, payload=payload, apply=apply
        )


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
