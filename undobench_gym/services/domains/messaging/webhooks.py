"""Webhook delivery over real HTTP, and the receiving endpoints that are part of the stack.

Subscriptions name a receiver endpoint id, never a URL: the service builds the URL itself,
`http://127.0.0.1:{admin port}/receiver/{endpoint_id}`, so deliveries only ever reach the
receiver router mounted on this service's own admin app (never proxied). The receiver logs
every request in `msg_received`, a domain table, so the receiving side's view is part of the
final state.

Delivery happens after the triggering mutation committed, one request per subscription.
The delivery row and its `webhook.deliver` commit row are written right after the receiver
answered: a crash inside that window (none is armed there) would leave a received request
without the sender's record of it.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from typing import Annotated, Any

import httpx
from fastapi import APIRouter, Path, Request
from fastapi.responses import JSONResponse
from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from undobench_gym.contract.stack_auth import TOKEN_ENV, auth_headers
from undobench_gym.services.domains._service.kit import (
    Effect,
    ServiceContext,
    get_ctx,
    new_id,
    now,
    row,
)
from undobench_gym.services.domains.messaging.models import (
    Received,
    WebhookDelivery,
    WebhookEndpoint,
    WebhookSubscription,
)

ENDPOINT_PATTERN = r"^[a-z0-9][a-z0-9-]{0,39}$"
EVENTS = ("page.triggered", "page.acknowledged", "page.resolved")
EVENT_PATTERN = "^(" + "|".join(e.replace(".", r"\.") for e in EVENTS) + ")$"
DELIVERY_TIMEOUT_S = 2.0
MAX_RECEIVED_BYTES = 64 * 1024
#: A delivered event: which receiver got which event about what (not a route's effect).
DELIVER = Effect("webhook.deliver", "irreversible_send", ("endpoint_id", "event", "ref"))

Deliver = Callable[[str, dict[str, Any], dict[str, str]], int]


_clients: dict[int, httpx.Client] = {}
_clients_lock = threading.Lock()


def _client() -> httpx.Client:
    """This process's delivery client. `httpx.post` builds a client, and with it an SSL
    context (~4 ms of CPU), per call. Keyed by pid, so a forked service never uses its
    parent's. No keep-alive: a pooled connection the receiver closed while idle could
    fail a delivery that a new connection makes, and deliveries are part of the verdict."""
    pid = os.getpid()
    with _clients_lock:
        if pid not in _clients:
            _clients[pid] = httpx.Client(
                timeout=DELIVERY_TIMEOUT_S, limits=httpx.Limits(max_keepalive_connections=0)
            )
        return _clients[pid]


def http_deliver(url: str, payload: dict[str, Any], headers: dict[str, str]) -> int:
    """POST one delivery for real; returns the receiver's status code."""
    return _client().post(url, json=payload, headers=headers).status_code


#: The delivery function. In-process tests (no listening port) replace it; the default,
#: and the only one a running service uses, is real HTTP.
deliver: Deliver = http_deliver


def receiver_url(ctx: ServiceContext, endpoint_id: str) -> str | None:
    """The receiver of an endpoint on this service's admin port (None until it listens)."""
    port = ctx.ports.get("admin")
    if port is None:
        return None
    return f"http://127.0.0.1:{port}/receiver/{endpoint_id}"


def fire(ctx: ServiceContext, event: str, ref: str, data: dict[str, Any]) -> list[dict[str, Any]]:
    """Deliver an event to every subscription; returns the delivery rows."""
    with Session(ctx.engine) as s:
        q = select(WebhookSubscription).where(WebhookSubscription.event == event)
        subs = [(w.id, w.endpoint_id) for w in s.scalars(q.order_by(WebhookSubscription.id))]
    out = []
    for sub_id, endpoint_id in subs:
        with Session(ctx.engine) as s, s.begin():
            delivery_id = new_id(s, "whd")
        payload = {"id": delivery_id, "event": event, "ref": ref, "data": data}
        headers = {"X-Webhook-Event": event, "X-Webhook-Delivery": delivery_id}
        # The receivers listen on this service's admin port, behind the stack's token.
        headers.update(auth_headers(os.environ.get(TOKEN_ENV)))
        url = receiver_url(ctx, endpoint_id)
        status: int | None = None
        if url is not None:
            try:
                status = deliver(url, payload, headers)
            except httpx.HTTPError:
                status = None
        delivered = status is not None and 200 <= status < 300
        with Session(ctx.engine) as s, s.begin():
            d = WebhookDelivery(
                id=delivery_id,
                subscription_id=sub_id,
                endpoint_id=endpoint_id,
                event=event,
                ref=ref,
                status="delivered" if delivered else "failed",
                response_status=status,
                attempted=now(s),
            )
            s.add(d)
            if delivered:
                sent = {"endpoint_id": endpoint_id, "event": event, "ref": ref}
                DELIVER.commit(s, {**sent, "delivery_id": delivery_id}, None)
            s.flush()
            out.append(row(d))
    return out


# ---- the receiving side (admin app only) -------------------------------------------

receiver = APIRouter()
EndpointId = Annotated[str, Path(pattern=ENDPOINT_PATTERN)]


def _refuse(status: int, message: str) -> JSONResponse:
    return JSONResponse(status_code=status, content={"error": message})


@receiver.post("/receiver/{endpoint_id}")
async def receive(request: Request, endpoint_id: EndpointId) -> JSONResponse:
    """A receiving endpoint: logs every delivery it gets in msg_received."""
    ctx = get_ctx(request)
    raw = await request.body()
    if len(raw) > MAX_RECEIVED_BYTES:
        return _refuse(413, "body too large")
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return _refuse(400, "body is not JSON")
    if not isinstance(body, dict):
        return _refuse(400, "body is not a JSON object")
    event = str(request.headers.get("x-webhook-event") or body.get("event") or "")[:32]
    delivery = str(request.headers.get("x-webhook-delivery") or body.get("id") or "")[:32]
    ref = str(body.get("ref") or "")[:64]
    got = Received(endpoint_id=endpoint_id, event=event, ref=ref, delivery_id=delivery, body=body)
    if not await run_in_threadpool(_store, ctx, got):
        return _refuse(404, f"no receiver {endpoint_id}")
    return JSONResponse(status_code=202, content={"received": True})


def _store(ctx: ServiceContext, got: Received) -> bool:
    with Session(ctx.engine) as s, s.begin():
        if s.get(WebhookEndpoint, got.endpoint_id) is None:
            return False
        got.received = now(s)
        s.add(got)
    return True
