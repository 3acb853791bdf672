"""Who made a mutation: the agent (through the fault proxy) or the stack's concurrent
writer, another client of the same service that calls the same routes through
the admin port. Commit-log rows carry the actor, so that the oracles never count the
writer's effects as the agent's."""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

#: The actor of the request being served; None: the agent (the proxied public port).
ACTOR: ContextVar[str | None] = ContextVar("undobench_actor", default=None)
#: The admin path under which the public API answers as the concurrent writer.
WRITER_PREFIX = "/admin/writer"
WRITER = "writer"


class AsActor:
    """The public app, served under the admin app on behalf of `actor`: the same routes,
    transactions and commit log, with every row the request commits tagged `actor`.
    (Sync routes run in a worker thread that inherits the request's context.)"""

    def __init__(self, app: Any, actor: str) -> None:
        self.app = app
        self.actor = actor

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        token = ACTOR.set(self.actor)
        try:
            await self.app(scope, receive, send)
        finally:
            ACTOR.reset(token)
