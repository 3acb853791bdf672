"""Route one listener to a stack's services by the first path segment."""

from __future__ import annotations

import json

from mitmproxy import ctx, http

from undobench_gym.services.proxy.state import STATE, EpisodeState


class Router:
    def __init__(self, state: EpisodeState = STATE) -> None:
        self.state = state
        self.routes: dict[str, tuple[str, int]] = {}

    def load(self, loader: object) -> None:
        loader.add_option(  # type: ignore[attr-defined]
            "undobench_routes",
            str,
            "{}",
            'JSON map of path prefix to upstream, e.g. {"payments": "127.0.0.1:8001"}',
        )
        loader.add_option(  # type: ignore[attr-defined]
            "undobench_tools",
            str,
            "[]",
            "JSON list of tools ({name, method, path, read_only}) that name each call",
        )

    def configure(self, updated: set[str]) -> None:
        if "undobench_routes" in updated:
            self.set_routes(json.loads(ctx.options.undobench_routes))
        if "undobench_tools" in updated:
            self.state.set_routes(json.loads(ctx.options.undobench_tools))

    def set_routes(self, routes: dict[str, str]) -> None:
        parsed = {}
        for prefix, target in routes.items():
            host, _, port = target.rpartition(":")
            if not host or not port.isdigit():
                raise ValueError(f"route {prefix!r}: expected host:port, got {target!r}")
            parsed[prefix] = (host, int(port))
        self.routes = parsed

    def request(self, flow: http.HTTPFlow) -> None:
        flow.metadata.setdefault("ub_public_path", flow.request.path)
        if flow.response is not None or flow.error is not None:
            return  # answered or killed by the fault injector: nothing to forward
        prefix, _, rest = flow.request.path.lstrip("/").partition("/")
        target = self.routes.get(prefix)
        if target is None:
            flow.metadata["ub_forwarded"] = False
            flow.response = http.Response.make(
                404,
                json.dumps({"error": {"type": "not_found", "message": "No such API"}}),
                {"content-type": "application/json"},
            )
            return
        flow.request.scheme = "http"
        flow.request.host, flow.request.port = target
        flow.request.path = "/" + rest
