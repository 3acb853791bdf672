"""The env's HTTP side: the stack's runtime, the agent-facing proxy, and the admin and
control APIs (services' state and commit log, the proxy's episodes and wire log). Only the
admin and control requests carry the stack's token; an agent's call never does."""

from __future__ import annotations

from typing import Any

import httpx

from undobench_gym.contract import (
    AdminState,
    CommitRow,
    EpisodeStart,
    FaultPlan,
    IdempotencyMode,
    WireLog,
)
from undobench_gym.core.actions import HttpRequest
from undobench_gym.core.runtime import Runtime, make_runtime

#: How long past the client's own timeout the verdict waits for held flows' wire events.
WIRE_SETTLE_MARGIN_S = 2.0
#: The harness's own calls (reset, state dump, commit log, wire log) wait this long: the
#: agent's timeout (`timeout`, what a timeout fault costs) applies to the agent's calls only.
HARNESS_TIMEOUT_S = 30.0


class StackClient:
    """Starts the stack on first use; one HTTP client for every call the env makes."""

    def __init__(
        self, runtime_kind: str, domain: str, idempotency: IdempotencyMode, timeout: float
    ) -> None:
        self.runtime_kind = runtime_kind
        self.domain = domain
        self.idempotency = idempotency
        self.timeout = timeout
        self._runtime: Runtime | None = None
        self._http: httpx.Client | None = None

    @property
    def runtime(self) -> Runtime:
        if self._runtime is None:
            self._attach(make_runtime(self.runtime_kind, self.domain))
        assert self._runtime is not None
        return self._runtime

    def adopt(self, runtime: Runtime) -> None:
        """Use a runtime made for this domain elsewhere (the harness starts a worker's
        first stack while the worker loads its code): started if it is not yet, and
        configured for this client's idempotency mode like one of its own."""
        if self._runtime is not None:
            raise RuntimeError("this stack client already has a runtime")
        self._attach(runtime)

    def _attach(self, runtime: Runtime) -> None:
        self._runtime = runtime
        try:
            ep = runtime.start()  # a started runtime answers with its endpoints
            harness = max(HARNESS_TIMEOUT_S, self.timeout + WIRE_SETTLE_MARGIN_S + 5.0)
            self._http = httpx.Client(timeout=harness)
            for url in ep.admin_urls.values():
                self._http.post(
                    f"{url}/admin/config",
                    json={"idempotency_mode": self.idempotency},
                    headers=ep.auth,
                ).raise_for_status()
        except BaseException:
            self.close()
            raise

    @property
    def http(self) -> httpx.Client:
        self.runtime  # noqa: B018 - starts the stack (and the client) on first use
        assert self._http is not None
        return self._http

    def _json(self, method: str, url: str, **kw: Any) -> Any:
        """An admin or control request: with the stack's token."""
        resp = self.http.request(method, url, headers=self.runtime.endpoints.auth, **kw)
        resp.raise_for_status()
        return resp.json()

    def _admin(self, method: str, path: str, **kw: Any) -> Any:
        return self._json(method, self.runtime.endpoints.admin_urls[self.domain] + path, **kw)

    # ---- admin: the service's seeded state, its final state, its commit log -------------

    def reset_state(self, seed: int) -> None:
        self._admin("POST", "/admin/reset", json={"seed": seed, "hash": False})

    def state(self) -> AdminState:
        return AdminState.model_validate(self._admin("GET", "/admin/state"))

    def commit_log(self) -> list[CommitRow]:
        return [CommitRow.model_validate(r) for r in self._admin("GET", "/admin/commit-log")]

    def final_state(self) -> tuple[AdminState, list[CommitRow]]:
        """`state()` and `commit_log()` in one request (the verdict's read)."""
        both = self._admin("GET", "/admin/verdict")
        rows = [CommitRow.model_validate(r) for r in both["commit_log"]]
        return AdminState.model_validate(both["state"]), rows

    # ---- control: the proxy's episode and wire log ------------------------------------

    def start_episode(
        self, wire_id: str, plan: FaultPlan | None, then: tuple[FaultPlan, ...] = ()
    ) -> None:
        body = EpisodeStart(episode_id=wire_id, plan=plan, then=list(then))
        self._json(
            "POST",
            self.runtime.endpoints.control_url + "/control/episode",
            json=body.model_dump(mode="json", exclude=None if then else {"then"}),
        )

    def wire(self) -> WireLog:
        """The episode's wire log, once held flows (a `timeout` fault) are released."""
        settle = self.timeout + WIRE_SETTLE_MARGIN_S
        url = self.runtime.endpoints.control_url + "/control/wire"
        return WireLog.model_validate(self._json("GET", url, params={"settle": settle}))

    # ---- the agent's side: through the fault proxy --------------------------------------

    def send(self, req: HttpRequest) -> httpx.Response:
        """An agent's call, through the fault proxy."""
        return self.http.request(
            req.method,
            self.runtime.endpoints.agent_url + req.path,
            params=req.params,
            json=req.json,
            headers=req.headers,
            timeout=self.timeout,
        )

    # ---- the concurrent writer's side: the admin port, never the proxy -----------------

    def send_as_writer(self, req: HttpRequest) -> httpx.Response:
        """The concurrent writer's call: the same service API, under `/admin/writer` on
        the admin port, so the proxy never numbers, faults or logs it (the path loses the
        proxy's routing prefix, the domain's name)."""
        path = req.path.removeprefix(f"/{self.domain}")
        endpoints = self.runtime.endpoints
        return self.http.request(
            req.method,
            endpoints.admin_urls[self.domain] + "/admin/writer" + path,
            params=req.params,
            json=req.json,
            headers={**(req.headers or {}), **endpoints.auth},
        )

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None
        if self._runtime is not None:
            self._runtime.close()
            self._runtime = None
