"""Pager routes and webhook subscriptions. Page transitions fire webhook events, which
are delivered over HTTP after the transition committed (see `webhooks`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from undobench_gym.services.domains._service.kit import (
    Effect,
    error,
    flush_or_409,
    get_ctx,
    get_or_404,
    new_id,
    now,
    row,
    run_mutation,
    write_route,
)
from undobench_gym.services.domains.messaging import webhooks
from undobench_gym.services.domains.messaging.common import Id, PathId
from undobench_gym.services.domains.messaging.models import (
    Page,
    PagerService,
    WebhookEndpoint,
    WebhookSubscription,
)
from undobench_gym.services.domains.messaging.views import (
    PageOut,
    PageTriggerOut,
    WebhookSubscriptionOut,
)

router = APIRouter(prefix="/v1")
#: One page per dedup key (the alert): a repeat joins it.
#: A page is the alert it carries: its service, and its summary judged by content (the
#: workflow's `mentions`), not the client-chosen dedup key. It rings a phone, so a second
#: one is a second real-world effect; the dedup key is the service's guard against that.
TRIGGER_PAGE = Effect("page.trigger", "irreversible_send", ("service_id",), "constraint")
ACKNOWLEDGE_PAGE = Effect("page.acknowledge", "set", ("page_id",))
#: Resolving a live page undoes its trigger as far as the world allows (the engineer was
#: paged): a repair, if the page was not wanted.
RESOLVE_PAGE = Effect("page.resolve", "set", ("page_id",), compensation=True)
#: An endpoint subscribes to an event once.
SUBSCRIBE = Effect("webhook.subscribe", "create_unique", ("endpoint_id", "event"), "constraint")

Event = tuple[str, str, dict[str, Any]]
#: A mutation's transaction that also notes the webhook events it raises.
Apply = Callable[[Session, str | None, list[Event]], tuple[int, Any]]
#: Moves a page on (its row given): the commit-log args, or None if it was there already.
Move = Callable[[Session, Page], dict[str, Any] | None]


def _firing(
    request: Request, route: str, effect: Effect, payload: dict[str, Any], apply: Apply
) -> JSONResponse:
    """Run the mutation, then deliver the events it raised once it committed (none on an
    idempotent replay: `apply` did not run)."""
    events: list[Event] = []
    resp = run_mutation(
        request,
        route=route,
        native=effect.native,
        payload=payload,
        apply=lambda s, key: apply(s, key, events),
    )
    ctx = get_ctx(request)
    for event, ref, data in events:
        webhooks.fire(ctx, event, ref, data)
    return resp


class PageIn(BaseModel):
    service_id: Id
    summary: str = Field(min_length=1, max_length=255)
    severity: str = Field(pattern="^(critical|high|low)$")
    dedup_key: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")


@write_route(router, "POST", "/pages", "trigger_page", TRIGGER_PAGE, PageTriggerOut, 201)
def trigger_page(request: Request, body: PageIn) -> JSONResponse:
    """Page the on-call engineer of a service. The dedup key identifies the alert: a
    trigger whose dedup key already has a page joins that page (200, `deduplicated`: true)
    instead of paging again. Subscribers of page.triggered get a webhook."""

    def apply(s: Session, key: str | None, events: list[Event]) -> tuple[int, Any]:
        found = s.scalar(select(Page).where(Page.dedup_key == body.dedup_key))
        if found is not None:
            return 200, {**row(found), "deduplicated": True}
        get_or_404(s, PagerService, body.service_id, "pager service")
        created = now(s)
        p = Page(
            id=new_id(s, "pg"),
            status="triggered",
            resolution_note=None,
            created=created,
            updated=created,
            **body.model_dump(),
        )
        s.add(p)
        TRIGGER_PAGE.commit(s, body.model_dump(), key, ref=p.id)
        flush_or_409(s, f"Dedup key {body.dedup_key} is taken")
        events.append(("page.triggered", p.dedup_key, row(p)))
        return 201, {**row(p), "deduplicated": False}

    return _firing(request, "trigger_page", TRIGGER_PAGE, body.model_dump(), apply)


def _move(
    request: Request,
    route: str,
    effect: Effect,
    event: str,
    payload: dict[str, Any],
    move: Move,
    *,
    undoes_trigger: bool = False,
) -> JSONResponse:
    """Move the page `payload` names on in one transaction and answer with it; a move that
    changed it writes `effect`'s commit-log row (naming the trigger it undoes, with
    `undoes_trigger`) and raises `event`."""

    def apply(s: Session, key: str | None, events: list[Event]) -> tuple[int, Any]:
        p = get_or_404(s, Page, payload["page_id"], "page")
        args = move(s, p)
        if args is not None:
            undoes = {"op": TRIGGER_PAGE.op, "ref": p.id} if undoes_trigger else None
            effect.commit(s, args, key, undoes=undoes)
            events.append((event, p.dedup_key, row(p)))
        return 200, row(p)

    return _firing(request, route, effect, payload, apply)


@write_route(
    router, "POST", "/pages/{page_id}/acknowledge", "acknowledge_page", ACKNOWLEDGE_PAGE, PageOut
)
def acknowledge_page(request: Request, page_id: PathId) -> JSONResponse:
    """Acknowledge a triggered page (stops its escalation). Acknowledging again is
    harmless; a resolved page cannot be acknowledged (409). Subscribers of
    page.acknowledged get a webhook."""

    def move(s: Session, p: Page) -> dict[str, Any] | None:
        if p.status == "resolved":
            raise error(409, "page_resolved", f"Page {page_id} is already resolved")
        if p.status != "triggered":
            return None
        p.status, p.updated = "acknowledged", now(s)
        return {"page_id": page_id}

    payload = {"page_id": page_id}
    return _move(request, "acknowledge_page", ACKNOWLEDGE_PAGE, "page.acknowledged", payload, move)


class ResolveIn(BaseModel):
    note: str = Field(min_length=1, max_length=500)


@write_route(router, "POST", "/pages/{page_id}/resolve", "resolve_page", RESOLVE_PAGE, PageOut)
def resolve_page(request: Request, page_id: PathId, body: ResolveIn) -> JSONResponse:
    """Resolve a page with a resolution note. Resolving a resolved page changes nothing.
    Subscribers of page.resolved get a webhook when the page becomes resolved."""

    def move(s: Session, p: Page) -> dict[str, Any] | None:
        if p.status == "resolved":
            return None
        args = {"page_id": page_id, "note": body.note, "previous": p.status}
        p.status, p.resolution_note, p.updated = "resolved", body.note, now(s)
        return args

    payload = {"page_id": page_id, **body.model_dump()}
    return _move(
        request, "resolve_page", RESOLVE_PAGE, "page.resolved", payload, move, undoes_trigger=True
    )


class SubscriptionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    endpoint_id: str = Field(pattern=webhooks.ENDPOINT_PATTERN)
    event: str = Field(pattern=webhooks.EVENT_PATTERN)


@write_route(
    router,
    "POST",
    "/webhook-subscriptions",
    "create_webhook_subscription",
    SUBSCRIBE,
    WebhookSubscriptionOut,
    201,
)
def create_webhook_subscription(request: Request, body: SubscriptionIn) -> JSONResponse:
    """Subscribe one of this workspace's webhook endpoints (see list_webhook_endpoints;
    URLs are not accepted) to an event: page.triggered, page.acknowledged or
    page.resolved. Later events of that kind are delivered to it. An endpoint subscribes
    to an event once: a repeat is refused (409)."""

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        get_or_404(s, WebhookEndpoint, body.endpoint_id, "webhook endpoint")
        q = select(WebhookSubscription).where(
            WebhookSubscription.endpoint_id == body.endpoint_id,
            WebhookSubscription.event == body.event,
        )
        found = s.scalar(q)
        if found is not None:
            raise error(
                409,
                "resource_exists",
                f"Endpoint {body.endpoint_id} is already subscribed to {body.event} "
                f"({found.id}); see list_webhook_subscriptions",
            )
        sub = WebhookSubscription(id=new_id(s, "whs"), created=now(s), **body.model_dump())
        s.add(sub)
        SUBSCRIBE.commit(s, body.model_dump(), key)
        flush_or_409(s, "The subscription exists already")
        return 201, row(sub)

    return run_mutation(
        request,
        route="create_webhook_subscription",
        native=SUBSCRIBE.native,
        payload=body.model_dump(),
        apply=apply,
    )
