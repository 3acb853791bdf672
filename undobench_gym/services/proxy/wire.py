"""Number every call of the episode and write one wire event per call."""

from __future__ import annotations

import time

from mitmproxy import http

from undobench_gym.services.proxy.state import STATE, EpisodeState


class CallCounter:
    """Gives each request its global call index and, when it maps to a tool, its n-th."""

    def __init__(self, state: EpisodeState = STATE) -> None:
        self.state = state

    def request(self, flow: http.HTTPFlow) -> None:
        route = self.state.classify(flow.request.method, flow.request.path)
        tool = route.tool if route else None
        index, nth = self.state.next_call(tool)
        flow.metadata["ub_index"] = index
        flow.metadata["ub_tool"] = tool
        flow.metadata["ub_nth"] = nth
        flow.metadata["ub_read_only"] = bool(route and route.read_only)
        flow.metadata["ub_t0"] = time.monotonic()
        flow.metadata["ub_episode"] = self.state.episode_id


class WireCapture:
    """Records what happened on the wire; runs after fault injection in the addon chain."""

    def __init__(self, state: EpisodeState = STATE) -> None:
        self.state = state

    def _event(self, flow: http.HTTPFlow, outcome: str, status: int | None) -> None:
        t0 = flow.metadata.get("ub_t0", time.monotonic())
        self.state.add_event(
            {
                "index": flow.metadata.get("ub_index"),
                "tool": flow.metadata.get("ub_tool"),
                "nth": flow.metadata.get("ub_nth"),
                "method": flow.request.method,
                "path": flow.metadata.get("ub_public_path", flow.request.path),
                "read_only": flow.metadata.get("ub_read_only", False),
                "outcome": outcome,
                "status": status,
                "upstream_status": flow.metadata.get("ub_upstream_status"),
                "forwarded": flow.metadata.get("ub_forwarded", True),
                "fault": flow.metadata.get("ub_fault"),
                "ms": round((time.monotonic() - t0) * 1000, 3),
            },
            flow.metadata.get("ub_episode"),
        )

    def response(self, flow: http.HTTPFlow) -> None:
        if flow.metadata.get("ub_recorded"):
            return
        flow.metadata["ub_recorded"] = True
        if flow.error is not None:
            self._event(flow, "transport_error", None)
        else:
            assert flow.response is not None
            self._event(flow, "response", flow.response.status_code)

    def error(self, flow: http.HTTPFlow) -> None:
        if flow.metadata.get("ub_recorded"):
            return
        flow.metadata["ub_recorded"] = True
        self._event(flow, "transport_error", None)
