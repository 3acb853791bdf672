"""Pager routes and webhook subscriptions. Page transitions fire webhook events, which
are delivered over HTTP after the transition committed (see `webhooks`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from .._service.kit import (
    effect_meta,
    error,
    flush_or_409,
    get_ctx,
    get_or_404,
    new_id,
    now,
    record_commit,
    row,
    run_mutation,
)
from . import webhooks
from .common import Id, PathId
from .models import Page, PagerService, WebhookEndpoint, WebhookSubscription
from .views import PageOut, PageTriggerOut, WebhookSubscriptionOut

router = APIRouter(prefix="/v1")
Event = tuple[str, str, dict[str, Any]]


def _with_events(request: Request, response: JSONResponse, events: list[Event]) -> JSONResponse:
    """Deliver the events the committed mutation raised (none on an idempotent replay)."""
    ctx = get_ctx(request)
    for event, ref, data in events:
        webhooks.fire(ctx, event, ref, data)
    return response


class PageIn(BaseModel):
    service_id: Id
    summary: str = Field(min_length=1, max_length=255)
    severity: str = Field(pattern="^(critical|high|low)$")
    dedup_key: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")


@router.post(
    "/pages",
    operation_id="trigger_page",
    status_code=201,
    openapi_extra=effect_meta("page.trigger", "create_unique", ["dedup_key"], "constraint"),
    response_model=PageTriggerOut,
)
def trigger_page(request: Request, body: PageIn) -> JSONResponse:
    """Page the on-call engineer of a service. The dedup key identifies the alert: a
    trigger whose dedup key already has a page joins that page (200, `deduplicated`: true)
    instead of paging again. Subscribers of page.triggered get a webhook."""
    events: list[Event] = []

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
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
        record_commit(
            s,
            op="page.trigger",
            effect_class="create_unique",
            identity={"dedup_key": body.dedup_key},
            args=body.model_dump(),
            key=key,
        )
        flush_or_409(s, f"Dedup key {body.dedup_key} is taken")
        events.append(("page.triggered", p.dedup_key, row(p)))
        return 201, {**row(p), "deduplicated": False}

    resp = run_mutation(
        request, route="trigger_page", native=False, payload=body.model_dump(), apply=apply
    )
    return _with_events(request, resp, events)


@router.post(
    "/pages/{page_id}/acknowledge",
    operation_id="acknowledge_page",
    openapi_extra=effect_meta("page.acknowledge", "set", ["page_id"]),
    response_model=PageOut,
)
def acknowledge_page(request: Request, page_id: PathId) -> JSONResponse:
    """Acknowledge a triggered page (stops its escalation). Acknowledging again is
    harmless; a resolved page cannot be acknowledged (409). Subscribers of
    page.acknowledged get a webhook."""
    events: list[Event] = []

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        p = get_or_404(s, Page, page_id, "page")
        if p.status == "resolved":
            raise error(409, "page_resolved", f"Page {page_id} is already resolved")
        if p.status == "triggered":
            p.status, p.updated = "acknowledged", now(s)
            identity = {"page_id": page_id}
            record_commit(
                s,
                op="page.acknowledge",
                effect_class="set",
                identity=identity,
                args=identity,
                key=key,
            )
            events.append(("page.acknowledged", p.dedup_key, row(p)))
        return 200, row(p)

    resp = run_mutation(
        request, route="acknowledge_page", native=False, payload={"page_id": page_id}, apply=apply
    )
    return _with_events(request, resp, events)


class ResolveIn(BaseModel):
    note: str = Field(min_length=1, max_length=500)


@router.post(
    "/pages/{page_id}/resolve",
    operation_id="resolve_page",
    openapi_extra=effect_meta("page.resolve", "set", ["page_id"]),
    response_model=PageOut,
)
def resolve_page(request: Request, page_id: PathId, body: ResolveIn) -> JSONResponse:
    """Resolve a page with a resolution note. Resolving a resolved page changes nothing.
    Subscribers of page.resolved get a webhook when the page becomes resolved."""
    events: list[Event] = []

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        p = get_or_404(s, Page, page_id, "page")
        if p.status != "resolved":
            previous = p.status
            p.status, p.resolution_note, p.updated = "resolved", body.note, now(s)
            record_commit(
                s,
                op="page.resolve",
                effect_class="set",
                identity={"page_id": page_id},
                args={"page_id": page_id, "note": body.note, "previous": previous},
                key=key,
            )
            events.append(("page.resolved", p.dedup_key, row(p)))
        return 200, row(p)

    payload = {"page_id": page_id, **body.model_dump()}
    resp = run_mutation(request, route="resolve_page", native=False, payload=payload, apply=apply)
    return _with_events(request, resp, events)


class SubscriptionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    endpoint_id: str = Field(pattern=webhooks.ENDPOINT_PATTERN)
    event: str = Field(pattern=webhooks.EVENT_PATTERN)


@router.post(
    "/webhook-subscriptions",
    operation_id="create_webhook_subscription",
    status_code=201,
    openapi_extra=effect_meta(
        "webhook.subscribe", "create_unique", ["endpoint_id", "event"], "constraint"
    ),
    response_model=WebhookSubscriptionOut,
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
        record_commit(
            s,
            op="webhook.subscribe",
            effect_class="create_unique",
            identity=body.model_dump(),
            args=body.model_dump(),
            key=key,
        )
        flush_or_409(s, "The subscription exists already")
        return 201, row(sub)

    return run_mutation(
        request,
        route="create_webhook_subscription",
        native=False,
        payload=body.model_dump(),
        apply=apply,
    )
