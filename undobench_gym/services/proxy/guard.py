"""Strip harness headers a client sends: only the proxy itself may arm a fault."""

from __future__ import annotations

from mitmproxy import http

from undobench_gym.contract import HEADER_PREFIX


class HeaderGuard:
    def request(self, flow: http.HTTPFlow) -> None:
        for name in [n for n in flow.request.headers if n.lower().startswith(HEADER_PREFIX)]:
            del flow.request.headers[name]
