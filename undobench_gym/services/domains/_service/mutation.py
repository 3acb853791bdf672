"""Commit-log rows and Idempotency-Key handling for mutating routes.

The idempotency semantics follow the IETF httpapi Idempotency-Key draft: the same key
with the same payload replays the stored response, the same key with another payload is
422, and a key whose first request is still in flight is 409. There is no library for the
server side of that draft, so it is written here.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import HTTPException, Request
from fastapi.responses import JSONResponse
from sqlalchemy import delete
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from undobench_gym.contract import IDEMPOTENCY_HEADER
from undobench_gym.services.domains._service.actor import ACTOR
from undobench_gym.services.domains._service.context import ServiceContext, get_ctx, now
from undobench_gym.services.domains._service.db import CommitLog, IdempotencyRecord, canonical_json


def effect_meta(
    op: str,
    effect_class: str,
    identity: list[str],
    idempotency: str = "none",
    compensation: bool = False,
    preconditions: list[str] | None = None,
    *,
    resumption: bool = False,
) -> dict[str, Any]:
    """The `openapi_extra` a mutating route declares; the env builds its tool catalogue from it.
    `preconditions` name the arguments that make the call conditional on the state the
    client saw (refused, never applied, when it changed): a re-send guarded by one is safe.
    `resumption` marks a route that finishes a half-done composite (a no-op on a finished
    one)."""
    meta: dict[str, Any] = {
        "op": op,
        "effect_class": effect_class,
        "identity": identity,
        "idempotency": idempotency,
        "compensation": compensation,
    }
    if preconditions:
        meta["preconditions"] = preconditions
    if resumption:
        meta["resumption"] = True
    return {"x-undobench": meta}


READ_ONLY: dict[str, Any] = {"x-undobench": {"read_only": True}}


def record_commit(
    session: Session,
    *,
    op: str,
    effect_class: str,
    identity: dict[str, Any],
    args: dict[str, Any],
    key: str | None = None,
    compensation: bool = False,
    ref: str | None = None,
    undoes: dict[str, Any] | None = None,
) -> None:
    """Append the commit-log row inside the caller's transaction."""
    session.add(
        CommitLog(
            op=op,
            effect_class=effect_class,
            identity=canonical_json(identity),
            args=json.loads(canonical_json(args)),
            at=now(session),
            idempotency_key=key,
            compensation=compensation,
            actor=ACTOR.get(),
            ref=ref,
            undoes=undoes,
        )
    )


@dataclass
class KeyClaim:
    key: str
    route: str


def honoured_key(request: Request, native: bool) -> str | None:
    ctx = get_ctx(request)
    key = request.headers.get(IDEMPOTENCY_HEADER)
    if not key:
        return None
    if len(key) > 255:
        raise HTTPException(400, {"type": "invalid_request", "message": "Idempotency-Key too long"})
    mode = ctx.idempotency_mode
    if mode == "all" or (mode == "native" and native):
        return key
    return None


def claim_key(
    ctx: ServiceContext, key: str | None, route: str, payload: dict[str, Any]
) -> KeyClaim | JSONResponse | None:
    """Claim a key before the mutation; returns a replayed response if it was used already."""
    if key is None:
        return None
    digest = hashlib.sha256(canonical_json(payload).encode()).hexdigest()
    try:
        return _claim(ctx, key, route, digest)
    except IntegrityError:
        # Another request inserted the same key between our read and our write.
        return _in_flight()


def _in_flight() -> JSONResponse:
    return JSONResponse(
        status_code=409,
        content={
            "error": {
                "type": "idempotency_error",
                "message": "A request with this Idempotency-Key is still being processed",
            }
        },
    )


def _claim(ctx: ServiceContext, key: str, route: str, digest: str) -> KeyClaim | JSONResponse:
    with Session(ctx.engine) as s, s.begin():
        rec = s.get(IdempotencyRecord, (key, route))
        if rec is None:
            s.add(
                IdempotencyRecord(
                    key=key, route=route, payload_hash=digest, state="in_flight", owner=ctx.instance
                )
            )
            return KeyClaim(key=key, route=route)
        if rec.payload_hash != digest:
            return JSONResponse(
                status_code=422,
                content={
                    "error": {
                        "type": "idempotency_error",
                        "message": "Idempotency-Key was already used with a different payload",
                    }
                },
            )
        if rec.state == "in_flight" and rec.owner not in ("", ctx.instance):
            # The process that claimed the key died mid-request (a crash restart). Re-running
            # could repeat a half-applied composite, so say what happened instead.
            return JSONResponse(
                status_code=409,
                content={
                    "error": {
                        "type": "idempotency_interrupted",
                        "message": "The first request with this Idempotency-Key was interrupted "
                        "before it finished and may have partly applied. Check the resource, "
                        "then retry with a new key if it is still needed.",
                    }
                },
            )
        if rec.state == "in_flight":
            return _in_flight()
        return JSONResponse(
            status_code=rec.status_code or 200,
            content=json.loads(rec.body or "null"),
            headers={"Idempotent-Replayed": "true"},
        )


def complete_key(session: Session, claim: KeyClaim | None, status: int, body: Any) -> None:
    if claim is None:
        return
    rec = session.get(IdempotencyRecord, (claim.key, claim.route))
    if rec is not None:
        rec.state = "done"
        rec.status_code = status
        rec.body = canonical_json(body)


def release_key(ctx: ServiceContext, claim: KeyClaim | None) -> None:
    """A request that failed validation did nothing: let the key be used again."""
    if claim is None:
        return
    with Session(ctx.engine) as s, s.begin():
        s.execute(
            delete(IdempotencyRecord).where(
                IdempotencyRecord.key == claim.key, IdempotencyRecord.route == claim.route
            )
        )


def run_mutation(
    request: Request,
    *,
    route: str,
    native: bool,
    payload: dict[str, Any],
    apply: Callable[[Session, str | None], tuple[int, Any]],
) -> JSONResponse:
    """Run a single-transaction mutation under Idempotency-Key semantics.

    `apply(session, key)` performs the mutation and writes the commit-log row; the stored
    idempotent response is written in that same transaction.
    """
    ctx = get_ctx(request)
    key = honoured_key(request, native)
    claim = claim_key(ctx, key, route, payload)
    if isinstance(claim, JSONResponse):
        return claim
    try:
        with Session(ctx.engine) as s, s.begin():
            status, body = apply(s, key)
            complete_key(s, claim, status, body)
    except Exception:  # rolled back: nothing happened, so the key may be used again
        release_key(ctx, claim)
        raise
    return JSONResponse(status_code=status, content=body)


def error(status: int, kind: str, message: str) -> HTTPException:
    return HTTPException(status_code=status, detail={"type": kind, "message": message})
