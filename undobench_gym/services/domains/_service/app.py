"""App factory: the public API (behind the fault proxy) and the admin API (never proxied)."""

from __future__ import annotations

import hashlib
import json
import math
import os
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy import delete, insert, select
from sqlalchemy.orm import Session
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from undobench_gym.contract import IDEMPOTENCY_MODES, LABEL_PREFIX
from undobench_gym.contract.stack_auth import TokenGuard
from undobench_gym.services.domains._service.actor import WRITER, WRITER_PREFIX, AsActor
from undobench_gym.services.domains._service.context import (
    DomainService,
    ServiceContext,
    scalar_rows,
)
from undobench_gym.services.domains._service.db import (
    CommitLog,
    IdempotencyRecord,
    Meta,
    canonical_json,
)

MAX_BODY_BYTES = 1 << 20


class _NonFiniteNumber(Exception):
    pass


def _no_constant(name: str) -> Any:
    raise _NonFiniteNumber(f"{name} is not a JSON number")


def _json_problem(body: bytes) -> str | None:
    """What makes `body` JSON that Python reads but nothing downstream should take: NaN or
    Infinity (not JSON numbers), or an escaped lone surrogate (no UTF-8 exists for it, so
    SQLite and every response encoder would fail on it)."""
    try:
        value = json.loads(body or b"null", parse_constant=_no_constant)
        json.dumps(value, ensure_ascii=False).encode()
    except _NonFiniteNumber as exc:
        return str(exc)
    except UnicodeEncodeError:
        return "a string holds a lone surrogate escape (\\ud800-\\udfff): not Unicode text"
    except ValueError:
        return None  # malformed JSON: the route's validation answers it (422)
    return None


class BodyLimit:
    """Refuse oversized bodies with 413 before they are parsed, and JSON that Python reads
    but RFC 8259 text cannot hold (NaN, Infinity, lone surrogates) with 422.

    A plain ASGI middleware, written by hand: Starlette's `BaseHTTPMiddleware` runs every
    request through a task group and memory streams, which cost the service more CPU per
    call than this check itself."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
            await _TOO_LARGE(scope, receive, send)
            return
        if "json" not in headers.get("content-type", ""):
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size, more = 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away before its body arrived
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > MAX_BODY_BYTES:  # chunked: no content-length to refuse it by
                await _TOO_LARGE(scope, receive, send)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        problem = _json_problem(body)
        if problem is not None:
            await JSONResponse(
                status_code=422, content={"error": {"type": "invalid_json", "message": problem}}
            )(scope, receive, send)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


_TOO_LARGE = JSONResponse(
    status_code=413, content={"error": {"type": "payload_too_large", "message": "body over 1 MiB"}}
)


def _without_labels(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _without_labels(v) for k, v in node.items() if not k.startswith(LABEL_PREFIX)}
    if isinstance(node, list):
        return [_without_labels(v) for v in node]
    return node


def public_openapi(app: FastAPI, title: str) -> dict[str, Any]:
    """The API document a client of the real service would get: the routes and schemas,
    without the effect labels the harness builds its catalogue from (`app.openapi()`),
    nor the harness's name."""
    doc: dict[str, Any] = _without_labels(app.openapi())
    doc["info"] = {**doc.get("info", {}), "title": title.removeprefix("UndoBench ") + " API"}
    return doc


def _json_safe(value: Any) -> Any:
    """Validation errors echo the input; a NaN or Infinity in it is not JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode()
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


async def _validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    return JSONResponse(
        status_code=422, content={"detail": _json_safe(jsonable_encoder(exc.errors()))}
    )


def create_public_app(ctx: ServiceContext) -> FastAPI:
    # FastAPI's own /openapi.json, /docs and /redoc would show the labels (and /docs
    # loads its UI from a CDN): serve the plain document only.
    app = FastAPI(
        title=ctx.domain.title, version="1.0.0", openapi_url=None, docs_url=None, redoc_url=None
    )
    app.state.ctx = ctx
    app.add_middleware(BodyLimit)
    app.add_exception_handler(RequestValidationError, _validation_error)
    for router in ctx.domain.routers:
        app.include_router(router)
    document = public_openapi(app, ctx.domain.title)

    @app.get("/openapi.json", include_in_schema=False)
    def openapi() -> dict[str, Any]:
        return document

    return app


class ResetRequest(BaseModel):
    seed: int = Field(ge=0, lt=2**63)
    #: Answer with the reset state's hash (a whole state dump: the env, which reads the
    #: state at the verdict anyway, asks for none).
    hash: bool = True


class ConfigRequest(BaseModel):
    idempotency_mode: str | None = None
    #: Whether armed crash points exit the process (off: they are ignored).
    crash_points: bool | None = None


def dump_state(ctx: ServiceContext) -> dict[str, Any]:
    with Session(ctx.engine) as s:
        tables = {t.name: scalar_rows(s, t) for t in ctx.domain.tables}
        extra = ctx.domain.extra_state(s)
    state: dict[str, Any] = {"tables": tables, "extra": extra}
    state["partial"] = ctx.domain.partial_state(state)
    state["hash"] = hashlib.sha256(canonical_json({"t": tables, "e": extra}).encode()).hexdigest()
    return state


def commit_rows(ctx: ServiceContext) -> list[dict[str, Any]]:
    with Session(ctx.engine) as s:
        rows = s.scalars(select(CommitLog).order_by(CommitLog.seq)).all()
        return [
            {
                "seq": r.seq,
                "op": r.op,
                "effect_class": r.effect_class,
                "identity": r.identity,
                "args": r.args,
                "at": r.at,
                "idempotency_key": r.idempotency_key,
                "compensation": r.compensation,
                # Only where set: other rows keep their old shape.
                **({"actor": r.actor} if r.actor else {}),
                **({"ref": r.ref} if r.ref else {}),
                **({"undoes": r.undoes} if r.undoes else {}),
            }
            for r in rows
        ]


def reset_state(ctx: ServiceContext, seed: int) -> None:
    """Restore the seeded initial state in place: no restart, milliseconds. The first
    reset to a seed builds it; later ones copy the image that one left (pristine.py)."""
    if not ctx.pristine.restore(seed, ctx.engine):
        with Session(ctx.engine) as s, s.begin():
            ctx.domain.wipe_extra(s)
            for table in reversed(ctx.domain.tables):
                s.execute(delete(table))
            for model in (CommitLog, IdempotencyRecord, Meta):
                s.execute(delete(model))
            # written now, not at the flush: counters and ids read it with plain SQL
            s.execute(insert(Meta), [{"key": "seed", "value": str(seed)}])
            ctx.domain.seed(s, seed)
        ctx.pristine.save(seed, ctx.engine)
    if ctx.domain.seed_files is not None:
        ctx.domain.seed_files(ctx.data_dir, seed)


def create_admin_app(
    ctx: ServiceContext, public: FastAPI | None = None, token: str | None = None
) -> FastAPI:
    """The admin API; with `public`, also the public API under `/admin/writer`, on behalf
    of the concurrent writer (never through the fault proxy, never the agent's calls).
    With `token`, every request (health and the writer's included) must carry it."""
    app = FastAPI(title=f"{ctx.domain.title} admin", version="1.0.0")
    app.state.ctx = ctx
    if token:
        app.add_middleware(TokenGuard, token=token)
    app.add_exception_handler(RequestValidationError, _validation_error)
    router = APIRouter(prefix="/admin")

    @router.get("/health")
    def health() -> dict[str, Any]:
        return {
            "ok": True,
            "domain": ctx.domain.name,
            "pid": os.getpid(),
            "boot": ctx.boot,
            "exits": ctx.exits,
        }

    @router.post("/reset")
    def reset(body: ResetRequest) -> dict[str, Any]:
        reset_state(ctx, body.seed)
        return {"ok": True, "hash": dump_state(ctx)["hash"] if body.hash else None}

    @router.get("/state")
    def state() -> dict[str, Any]:
        return dump_state(ctx)

    @router.get("/commit-log")
    def commit_log() -> list[dict[str, Any]]:
        return commit_rows(ctx)

    @router.get("/verdict")
    def verdict() -> dict[str, Any]:
        """What an episode's verdict reads, in one request: the state and the commit log."""
        return {"state": dump_state(ctx), "commit_log": commit_rows(ctx)}

    @router.post("/config")
    def config(body: ConfigRequest) -> Any:
        if body.idempotency_mode is not None:
            if body.idempotency_mode not in IDEMPOTENCY_MODES:
                return JSONResponse(
                    status_code=422,
                    content={"error": f"idempotency_mode must be one of {IDEMPOTENCY_MODES}"},
                )
            ctx.set_idempotency_mode(body.idempotency_mode)
        if body.crash_points is not None:
            ctx.crash_points_enabled = body.crash_points
        return {"idempotency_mode": ctx.idempotency_mode, "crash_points": ctx.crash_points_enabled}

    app.include_router(router)
    for extra in ctx.domain.admin_routers:
        app.include_router(extra)
    if public is not None:
        app.mount(WRITER_PREFIX, AsActor(public, WRITER))
    return app


def create_apps(
    domain: DomainService, ctx: ServiceContext, token: str | None = None
) -> tuple[FastAPI, FastAPI]:
    public = create_public_app(ctx)
    return public, create_admin_app(ctx, public, token)
