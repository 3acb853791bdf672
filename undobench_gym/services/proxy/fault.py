"""Inject the episode's faults at their planned boundaries.

`drop_request` answers or kills in the `request` hook, so the call never reaches the
service (PRE_MUTATION). `drop_response` lets the service commit, then loses the reply in
the `response` hook (POST_MUTATION_PRE_ACK), but only when the service did commit (a 2xx):
a refused call has no commit to lose, so its answer goes through and the fault is recorded
as not fired (`target`). `crash` arms a named crash point on the forwarded request; the
service exits there for real and the `error` hook presents the broken connection
(DURING_MUTATION). A fault only ever lands on a mutating call: the n-th call of a named
tool, or, for a later fault of a schedule (a cascade), the next mutating call after an
earlier fault fired. Each plan of the schedule takes one call at most, the first in order.
Failures look like a real gateway's, never like mitmproxy's own 502 page.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from mitmproxy import http

from undobench_gym.contract import CRASH_HEADER
from undobench_gym.services.proxy.state import STATE, EpisodeState

GATEWAY_BODIES = {
    502: "upstream connect error or disconnect/reset before headers. reset reason: "
    "connection termination",
    503: "upstream connect error or disconnect/reset before headers. reset reason: "
    "connection failure",
    504: "upstream request timeout",
}


def gateway_response(code: int) -> http.Response:
    return http.Response.make(code, GATEWAY_BODIES[code], {"content-type": "text/plain"})


class FaultInjector:
    def __init__(self, state: EpisodeState = STATE) -> None:
        self.state = state

    def _record(self, flow: http.HTTPFlow, stage: str, **extra: Any) -> None:
        k = int(flow.metadata.get("ub_plan", 0))
        plan = self.state.plans[k]
        record = {
            "scenario": plan.scenario,
            "action": plan.action,
            "stage": stage,
            "index": flow.metadata.get("ub_index"),
            "tool": flow.metadata.get("ub_tool"),
            "visible_error": plan.visible_error,
            **extra,
        }
        if len(self.state.plans) > 1:
            record["fault"] = k  # its place in the schedule (a cascade's records only)
        flow.metadata["ub_fault"] = record
        self.state.mark_fired(record, flow.metadata.get("ub_episode"), k)

    async def _present(
        self, flow: http.HTTPFlow, visible_error: str, timeout_s: float, pad_s: float = 0.0
    ) -> None:
        """Show the failure the way a client of a real gateway sees it, no earlier than
        `pad_s` after the request arrived."""
        if pad_s > 0:
            t0 = float(flow.metadata.get("ub_t0", time.monotonic()))
            wait = t0 + pad_s - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
        if visible_error == "http_503":
            flow.response = gateway_response(503)
        elif visible_error == "http_502":
            flow.response = gateway_response(502)
        elif visible_error == "http_504":
            flow.response = gateway_response(504)
        elif visible_error == "timeout":
            await asyncio.sleep(timeout_s)
            flow.kill()
        else:
            flow.kill()

    async def request(self, flow: http.HTTPFlow) -> None:
        if not self.state.plans or flow.metadata.get("ub_index") is None:
            return
        k = self.state.engage(
            flow.metadata["ub_index"],
            flow.metadata["ub_tool"],
            flow.metadata["ub_nth"],
            bool(flow.metadata.get("ub_read_only")),
        )
        if k is None:
            return
        plan = self.state.plans[k]
        flow.metadata["ub_plan"] = k
        if plan.action == "drop_request":
            flow.metadata["ub_forwarded"] = False
            self._record(flow, "request", committed=False)
            await self._present(flow, plan.visible_error, plan.timeout_s, plan.pad_s)
        elif plan.action in ("drop_response", "mark_ack"):
            flow.metadata["ub_drop_response"] = True
        elif plan.action == "crash":
            assert plan.crash_point is not None
            flow.request.headers[CRASH_HEADER] = plan.crash_point
            flow.metadata["ub_crash"] = plan.crash_point

    async def response(self, flow: http.HTTPFlow) -> None:
        if not self.state.plans or flow.response is None:
            return
        if flow.metadata.get("ub_episode") != self.state.episode_id:
            return  # a call of an earlier episode, finishing late: not this episode's fault
        plan = self.state.plans[int(flow.metadata.get("ub_plan", 0))]
        if flow.metadata.pop("ub_drop_response", False):
            status = flow.response.status_code
            flow.metadata["ub_upstream_status"] = status
            if not 200 <= status < 300:
                self._missed(flow, "refused", status)
                return
            if plan.action == "mark_ack":
                # The env crashes the worker on this acknowledgement; the wire is untouched.
                self._record(flow, "post_ack", upstream_status=status, committed=True)
                return
            self._record(flow, "response", upstream_status=status, committed=True)
            await self._present(flow, plan.visible_error, plan.timeout_s, plan.pad_s)
        elif flow.metadata.pop("ub_crash", None):
            # The service answered: the operation never reached its crash point.
            status = flow.response.status_code
            flow.metadata["ub_upstream_status"] = status
            self._missed(flow, "no_crash" if 200 <= status < 300 else "refused", status)

    def _missed(self, flow: http.HTTPFlow, reason: str, status: int) -> None:
        """The targeted call was made but the fault could not happen as planned."""
        self.state.note_target(
            {
                "reason": reason,
                "index": flow.metadata.get("ub_index"),
                "tool": flow.metadata.get("ub_tool"),
                "upstream_status": status,
            },
            flow.metadata.get("ub_episode"),
            int(flow.metadata.get("ub_plan", 0)),
        )

    async def error(self, flow: http.HTTPFlow) -> None:
        crash_point = flow.metadata.pop("ub_crash", None)
        if crash_point and self.state.plans:
            plan = self.state.plans[int(flow.metadata.get("ub_plan", 0))]
            self._record(
                flow, "crash", crash_point=crash_point, error=flow.error.msg if flow.error else None
            )
            if plan.visible_error == "timeout":
                await asyncio.sleep(plan.timeout_s)
        # Kill instead of letting mitmproxy answer with its own tell-tale 502 page:
        # the client of a backend that died mid-request sees the connection drop.
        if flow.killable:
            flow.kill()
