"""The domain kit: everything a domain's routes share, behind one import.

A domain module imports from here, never from the other `_service` modules: typed
parameter aliases, the read-session dependency, `get_or_404`, the two mutation runners
(one transaction: `run_mutation`; several, with crash points between them:
`run_composite`), commit-log rows, OpenAPI labels, row views and response models.

One route style: a read route takes `s: DbSession` (a session opened for the request and
closed after it); a mutating route takes the `Request` (its Idempotency-Key header and
armed crash point live there) and goes through `run_mutation` or `run_composite`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, Header, Path, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, create_model
from sqlalchemy import JSON, Boolean, Float, Integer, Select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from undobench_gym.contract import IDEMPOTENCY_HEADER
from undobench_gym.services.domains._service.context import (
    DomainService,
    ServiceContext,
    get_ctx,
    maybe_crash,
    new_id,
    now,
    seed_of,
    seeded_id,
)
from undobench_gym.services.domains._service.db import Base, insert_fixture, row
from undobench_gym.services.domains._service.mutation import (
    READ_ONLY,
    claim_key,
    complete_key,
    effect_meta,
    error,
    honoured_key,
    record_commit,
    release_key,
    run_mutation,
)

__all__ = [
    "READ_ONLY",
    "Base",
    "Ctx",
    "DbSession",
    "DomainService",
    "Effect",
    "KeyHeader",
    "ServiceContext",
    "db_session",
    "effect_meta",
    "error",
    "filtered",
    "flush_or_409",
    "get_ctx",
    "get_or_404",
    "id_types",
    "insert_fixture",
    "maybe_crash",
    "new_id",
    "now",
    "read_route",
    "record_commit",
    "row",
    "row_model",
    "run_composite",
    "run_mutation",
    "seed_of",
    "seeded_id",
    "write_route",
]

T = TypeVar("T")
H = TypeVar("H")
Q = TypeVar("Q", bound=Select[Any])
F = TypeVar("F", bound=Callable[..., Any])

Ctx = Annotated[ServiceContext, Depends(get_ctx)]
KeyHeader = Annotated[str | None, Header(alias=IDEMPOTENCY_HEADER, max_length=255)]


def db_session(request: Request) -> Iterator[Session]:
    """A session for one read route, closed once the route returns."""
    with Session(get_ctx(request).engine) as s:
        yield s


DbSession = Annotated[Session, Depends(db_session)]


def id_types(pattern: str | None = None, max_length: int = 64) -> tuple[Any, Any]:
    """(body-field id, path-parameter id) aliases, optionally constrained by `pattern`."""
    body = Annotated[str, Field(min_length=1, max_length=max_length, pattern=pattern)]
    path = Annotated[str, Path(min_length=1, max_length=max_length, pattern=pattern)]
    return body, path


Id, PathId = id_types()


def get_or_404(s: Session, model: type[T], ident: Any, what: str) -> T:
    """The row with primary key `ident`, or the API's 404 naming what is missing."""
    obj = s.get(model, ident)
    if obj is None:
        raise error(404, "resource_missing", f"No such {what}: {ident}")
    return obj


@dataclass(frozen=True)
class Effect:
    """A mutating route's effect, declared once: its route's OpenAPI labels (`labels`) and
    the commit-log rows it writes (`commit`) come from this one object, so they agree."""

    op: str
    effect_class: str
    identity: tuple[str, ...]
    idempotency: str = "none"  # native | constraint | none
    compensation: bool = False
    #: Arguments that make the call conditional on the state the client saw (a 409/412
    #: refusal when it changed), e.g. git's expected_head, storage's if_match.
    preconditions: tuple[str, ...] = ()
    #: The route finishes a composite that a crash left part-way (a payout still
    #: `processing`), and changes nothing on a finished one: a client may call it on any
    #: record it found after losing the answer to the call that created it.
    resumption: bool = False

    @property
    def native(self) -> bool:
        """The route honours an Idempotency-Key itself (not only in mode "all")."""
        return self.idempotency == "native"

    @property
    def labels(self) -> dict[str, Any]:
        """The route's `openapi_extra`."""
        return effect_meta(
            self.op,
            self.effect_class,
            list(self.identity),
            self.idempotency,
            self.compensation,
            list(self.preconditions),
            resumption=self.resumption,
        )

    def commit(
        self,
        s: Session,
        args: dict[str, Any],
        key: str | None,
        identity: dict[str, Any] | None = None,
        *,
        ref: str | None = None,
        undoes: dict[str, Any] | None = None,
    ) -> None:
        """Write the commit-log row in the caller's transaction; the identity is the
        identity fields of `args` unless given (a value the service derived). `ref` is the
        id of what it created; `undoes` names what it undoes in full (the oracle pairs an
        agent's undo with an excess effect: a repair)."""
        record_commit(
            s,
            op=self.op,
            effect_class=self.effect_class,
            identity={f: args[f] for f in self.identity} if identity is None else identity,
            args=args,
            key=key,
            compensation=self.compensation,
            ref=ref,
            undoes=undoes,
        )


def read_route(router: APIRouter, path: str, op: str, model: Any) -> Callable[[F], F]:
    """A GET route labelled read-only (no effect, never faulted) that answers `model`."""
    return router.get(path, operation_id=op, openapi_extra=READ_ONLY, response_model=model)


def write_route(
    router: APIRouter,
    method: str,
    path: str,
    op: str,
    effect: Effect,
    model: Any = None,
    status_code: int = 200,
) -> Callable[[F], F]:
    """A mutating route labelled with its effect (op, class, identity, idempotency) that
    answers `model` (for the OpenAPI document: the route answers a JSONResponse)."""
    return router.api_route(
        path,
        methods=[method],
        operation_id=op,
        status_code=status_code,
        openapi_extra=effect.labels,
        response_model=model,
    )


def filtered(q: Q, *conditions: tuple[Any, str | None]) -> Q:
    """`q` narrowed to `column == value` for each (column, value) whose value was given."""
    for column, value in conditions:
        if value:
            q = q.where(column == value)
    return q


def flush_or_409(s: Session, message: str) -> None:
    """Flush the new row; a unique key that a concurrent request took first is a 409."""
    try:
        s.flush()
    except IntegrityError as exc:
        raise error(409, "resource_exists", message) from exc


def run_composite(
    request: Request,
    *,
    route: str,
    payload: dict[str, Any],
    start: Callable[[Session, str | None], H],
    advance: Callable[[H], None],
    view: Callable[[Session, H], Any],
    status: int = 201,
    native: bool = False,
) -> JSONResponse:
    """A mutation of several transactions under Idempotency-Key semantics.

    Claim the key; `start(session, key)` opens the operation in one transaction (its
    commit-log row included) and returns a handle; `advance(handle)` runs the steps, each
    in its own transaction, with the domain's crash points between them (a crash there
    leaves the partial state a DURING_MUTATION fault is meant to show); `view(session,
    handle)` builds the answer, stored with the key in the last transaction. A start or a
    last transaction that fails rolls back and frees the key for a retry.
    """
    ctx = get_ctx(request)
    claim = claim_key(ctx, honoured_key(request, native), route, payload)
    if isinstance(claim, JSONResponse):
        return claim
    try:
        with Session(ctx.engine) as s, s.begin():
            handle = start(s, claim.key if claim else None)
    except Exception:
        release_key(ctx, claim)
        raise
    advance(handle)
    try:
        with Session(ctx.engine) as s, s.begin():
            body = view(s, handle)
            complete_key(s, claim, status, body)
    except Exception:
        release_key(ctx, claim)
        raise
    return JSONResponse(status_code=status, content=body)


_PY_TYPES: list[tuple[type[Any], Any]] = [
    (Boolean, bool),
    (Integer, int),
    (Float, float),
    (JSON, Any),
]


def _python_type(column: Any) -> Any:
    kind: Any = str
    for sql_type, py_type in _PY_TYPES:
        if isinstance(column.type, sql_type):
            kind = py_type
            break
    return kind | None if column.nullable and kind is not Any else kind


def row_model(model: type[Any], name: str | None = None, **extra: Any) -> type[BaseModel]:
    """A response model with the columns of ORM `model`, in table order (the order `row`
    answers in), plus `extra` fields as `name=(type, default)`: the output schema of a
    route that answers with `row(obj)` (and more), published in the OpenAPI document."""
    fields: dict[str, Any] = {c.key: (_python_type(c), ...) for c in model.__table__.columns}
    fields.update(extra)
    config = ConfigDict(extra="allow")
    return create_model(name or model.__name__ + "Out", __config__=config, **fields)
