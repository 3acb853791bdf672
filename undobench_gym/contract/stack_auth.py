"""The per-stack secret that closes the admin and control APIs to everyone but the harness.

A runtime makes one token per stack (`new_token`) and hands it to the stack's processes in
their environment (`TOKEN_ENV`: never on a command line, which every local user can read in
/proc); the service's admin app and the proxy's control app answer only requests that carry
it (`TokenGuard`, every path: health, OpenAPI document and the writer's route included).
The agent-facing API is not behind it. A process started without the variable (a test
that launches a service by hand) serves its admin API open, and says so on stderr.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The environment variable that carries a stack's token to its service and proxy.
TOKEN_ENV = "UNDOBENCH_STACK_TOKEN"
SCHEME = "Bearer"


def new_token() -> str:
    return secrets.token_urlsafe(32)


def auth_headers(token: str | None) -> dict[str, str]:
    """The header a harness request carries (none for a stack without a token)."""
    return {"Authorization": f"{SCHEME} {token}"} if token else {}


def token_from_env(what: str) -> str | None:
    """This process's stack token; None (and a line on stderr) when it has none."""
    token = os.environ.get(TOKEN_ENV) or None
    if token is None:
        print(f"{what}: {TOKEN_ENV} is not set: the API is open to local clients", file=sys.stderr)
    return token


def authorized(header: str | None, token: str) -> bool:
    scheme, _, given = (header or "").partition(" ")
    if scheme.lower() != SCHEME.lower():
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())


class TokenGuard:
    """ASGI middleware: 401 for every HTTP request without `Authorization: Bearer TOKEN`.
    Plain ASGI (no Starlette import), so that the harness's side of this module stays
    light."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            header = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not authorized(header.decode("latin-1"), self.token):
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(_REFUSAL)).encode()),
                            (b"www-authenticate", SCHEME.encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": _REFUSAL})
                return
        await self.app(scope, receive, send)


_REFUSAL = json.dumps(
    {"error": {"type": "unauthorized", "message": "this API needs the stack's token"}}
).encode()
