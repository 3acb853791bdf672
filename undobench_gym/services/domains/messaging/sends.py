"""Chat messages and SMS: each a single transaction, each a message that cannot be unsent
(a chat message can be deleted from its channel, after everyone there has seen it)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy.orm import Session

from undobench_gym.services.domains._service.kit import (
    Effect,
    KeyHeader,
    error,
    get_or_404,
    new_id,
    now,
    row,
    run_mutation,
    write_route,
)
from undobench_gym.services.domains.messaging.common import PHONE_PATTERN, PathId
from undobench_gym.services.domains.messaging.models import Channel, ChatMessage, Sms
from undobench_gym.services.domains.messaging.views import ChatMessageOut, SmsOut

router = APIRouter(prefix="/v1")
#: A post is the same post whatever its wording: the channel is its identity.
POST_CHAT = Effect("chat.post", "irreversible_send", ("channel_id",))
#: Deleting a message undoes its post as far as the world allows (it was seen): a repair,
#: if the post was not wanted.
DELETE_CHAT = Effect("chat.delete", "set", ("channel_id", "message_id"), compensation=True)
#: The same text to the same phone, however worded.
SEND_SMS = Effect("sms.send", "irreversible_send", ("to",), "native")


class ChatIn(BaseModel):
    text: str = Field(min_length=1, max_length=2000)


@write_route(
    router,
    "POST",
    "/channels/{channel_id}/messages",
    "post_chat_message",
    POST_CHAT,
    ChatMessageOut,
    201,
)
def post_chat_message(request: Request, channel_id: PathId, body: ChatIn) -> JSONResponse:
    """Post a message to a chat channel. Everyone in the channel sees it at once; every
    call posts a new message."""
    payload = {"channel_id": channel_id, "text": body.text}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        get_or_404(s, Channel, channel_id, "channel")
        m = ChatMessage(id=new_id(s, "msg"), channel_id=channel_id, text=body.text, posted=now(s))
        s.add(m)
        POST_CHAT.commit(s, payload, key, ref=m.id)
        s.flush()
        return 201, row(m)

    return run_mutation(
        request, route="post_chat_message", native=POST_CHAT.native, payload=payload, apply=apply
    )


@write_route(
    router,
    "DELETE",
    "/channels/{channel_id}/messages/{message_id}",
    "delete_chat_message",
    DELETE_CHAT,
    ChatMessageOut,
)
def delete_chat_message(request: Request, channel_id: PathId, message_id: PathId) -> JSONResponse:
    """Delete a message from a chat channel. Whoever read it has read it; the channel no
    longer shows it. 404 if the channel has no such message (already deleted included)."""
    payload = {"channel_id": channel_id, "message_id": message_id}

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        m = s.get(ChatMessage, message_id)
        if m is None or m.channel_id != channel_id:
            raise error(404, "message_not_found", f"#{channel_id} has no message {message_id}")
        answer = row(m)
        s.delete(m)
        DELETE_CHAT.commit(s, payload, key, undoes={"op": POST_CHAT.op, "ref": message_id})
        s.flush()
        return 200, answer

    return run_mutation(
        request,
        route="delete_chat_message",
        native=DELETE_CHAT.native,
        payload=payload,
        apply=apply,
    )


class SmsIn(BaseModel):
    to: str = Field(pattern=PHONE_PATTERN, description="E.164 phone number, e.g. +15551234567")
    body: str = Field(min_length=1, max_length=480)


@write_route(router, "POST", "/sms", "send_sms", SEND_SMS, SmsOut, 201)
def send_sms(request: Request, body: SmsIn, idempotency_key: KeyHeader = None) -> JSONResponse:
    """Send a text message to a phone number. Every call without a key sends a new SMS.
    Accepts an Idempotency-Key: a retry with the same key is not sent again and replays
    the first response."""

    def apply(s: Session, key: str | None) -> tuple[int, Any]:
        m = Sms(id=new_id(s, "sms"), to=body.to, body=body.body, sent=now(s))
        s.add(m)
        SEND_SMS.commit(s, body.model_dump(), key)
        s.flush()
        return 201, row(m)

    return run_mutation(
        request, route="send_sms", native=SEND_SMS.native, payload=body.model_dump(), apply=apply
    )
