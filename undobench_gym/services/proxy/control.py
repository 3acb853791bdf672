"""The proxy's control API on its own port (never the agent's): episodes, plans, wire log.

It runs uvicorn in a thread of the mitmdump process and shares `EpisodeState` under its
lock, so the agent-facing event loop never waits on it. Every route, health included,
answers only the stack's token (`undobench_gym.contract.stack_auth`, from the process environment).
"""

from __future__ import annotations

import os
import threading
from typing import Any

import uvicorn
from fastapi import FastAPI, HTTPException
from mitmproxy import ctx
from pydantic import BaseModel

from undobench_gym.contract import EpisodeStart, FaultPlan
from undobench_gym.contract.quiet_server import QuietServer
from undobench_gym.contract.stack_auth import TokenGuard, token_from_env
from undobench_gym.services.proxy.state import STATE, EpisodeState


class EpisodeIn(BaseModel):
    episode_id: str
    plan: dict[str, Any] | None = None
    then: list[dict[str, Any]] = []


class RoutesIn(BaseModel):
    tools: list[dict[str, Any]]


def create_control_app(state: EpisodeState, token: str | None = None) -> FastAPI:
    """With `token`, every request must carry it (`Authorization: Bearer TOKEN`)."""
    app = FastAPI(title="UndoBench fault proxy control")
    if token:
        app.add_middleware(TokenGuard, token=token)

    @app.get("/control/health")
    def health() -> dict[str, Any]:
        return {"ok": True, "episode_id": state.episode_id}

    @app.post("/control/tools")
    def tools(body: RoutesIn) -> dict[str, int]:
        state.set_routes(body.tools)
        return {"tools": len(body.tools)}

    @app.post("/control/episode")
    def episode(body: EpisodeIn) -> dict[str, Any]:
        try:
            start = EpisodeStart(
                episode_id=body.episode_id,
                plan=FaultPlan.from_json(body.plan) if body.plan else None,
                then=[FaultPlan.from_json(p) for p in body.then],
            )
        except (TypeError, ValueError) as exc:
            raise HTTPException(422, f"bad fault plan: {exc}") from exc
        state.begin(start.episode_id, start.plan, start.then)
        return {"episode_id": body.episode_id, "armed": start.plan is not None}

    @app.get("/control/wire")
    def wire(settle: float = 0.0) -> dict[str, Any]:
        """The episode's wire log; `settle` waits (up to that many seconds) until every
        call has its event, held flows included, so a verdict never misses one."""
        if settle > 0:
            state.wait_settled(min(settle, 60.0))
        return state.snapshot()

    return app


#: The proxy's exit status when its control API could not start.
CONTROL_FAILED_EXIT = 3


class ControlServer:
    def __init__(self, state: EpisodeState = STATE) -> None:
        self.state = state
        self.server: uvicorn.Server | None = None
        self.thread: threading.Thread | None = None

    def load(self, loader: object) -> None:
        loader.add_option(  # type: ignore[attr-defined]
            "undobench_control_port", int, 0, "port of the control API (0: disabled)"
        )
        loader.add_option(  # type: ignore[attr-defined]
            "undobench_control_host", str, "127.0.0.1", "host of the control API"
        )

    def running(self) -> None:
        port = ctx.options.undobench_control_port
        if not port or self.server is not None:
            return
        config = uvicorn.Config(
            create_control_app(self.state, token_from_env("fault proxy control API")),
            host=ctx.options.undobench_control_host,
            port=port,
            log_level="warning",
            access_log=False,
            lifespan="off",
        )
        self.server = QuietServer(config)
        self.thread = threading.Thread(target=self._serve, name="undobench-control", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        server = self.server
        assert server is not None
        try:
            server.run()
        finally:
            if not server.started and not server.should_exit:
                # uvicorn logged why (its port bound by another process first: errno 98)
                # and ended only this thread. A proxy without its control API serves no
                # episode: exit now, so that the runtime chooses other ports at once
                # instead of waiting out its readiness timeout (30 s, seen in a sweep).
                os._exit(CONTROL_FAILED_EXIT)

    def done(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
