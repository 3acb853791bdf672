"""`undobench mcp`: serve one env's tools over MCP (stdio or streamable HTTP) for any
MCP-speaking agent, with episode control on a separate local endpoint (docs/mcp.md)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from undobench_gym.agents import methods


def add(sub: Any) -> None:
    m = sub.add_parser(
        "mcp",
        help="serve an env's tools over MCP (stdio or streamable HTTP)",
        description="Serve the tools of one domain over the Model Context Protocol: each "
        "tools/call is one env step through the fault proxy. Episodes are started and "
        "ended by the harness, never by the agent: at start-up (with no option, the "
        "domain's first TEST workflow, seed 1, no fault, so that an MCP client sees the "
        "tools at once; --seed, --workflow and --fault choose another; --no-episode starts "
        "none), or through the control endpoint printed on stderr (POST /reset, POST "
        "/finish, GET /episode). Everything listens on 127.0.0.1 only.",
    )
    m.add_argument("--domain", required=True, help="e.g. payments (or Payments)")
    m.add_argument("--workflow", default=None, help="workflow id (default: drawn per seed)")
    m.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    m.add_argument("--port", type=int, default=0, help="HTTP port (default: a free one)")
    m.add_argument("--control-port", type=int, default=0, help="control port (default: free)")
    m.add_argument(
        "--control-file",
        default=None,
        metavar="PATH",
        help="write {control, mcp} URLs here as JSON once serving (for scripts)",
    )
    m.add_argument(
        "--no-annotations",
        action="store_true",
        help="list tools without readOnlyHint/destructiveHint/idempotentHint (ablation)",
    )
    m.add_argument("--method", default="bare", help=", ".join(methods.METHODS))
    m.add_argument("--runtime", default="process", choices=["process", "docker"])
    m.add_argument("--max-steps", type=int, default=20)
    m.add_argument("--seed", type=int, default=None, help="start an episode with this seed")
    m.add_argument("--fault", default=None, help="with --seed: the fault scenario id")
    m.add_argument(
        "--no-episode",
        action="store_true",
        help="start no episode: a harness starts them through the control endpoint",
    )
    m.add_argument(
        "--record",
        default=None,
        metavar="PATH",
        help="on exit, end the episode and write its verdict and record here as JSON",
    )
    m.set_defaults(func=serve_mcp)


def default_workflow(domain: str) -> str:
    """The episode an MCP client gets with no option: the domain's first TEST workflow
    (its first workflow of any split where it has none in TEST)."""
    from undobench_gym.contract.errors import UndoBenchError
    from undobench_gym.core.catalog import all_workflows

    ids = [w.id for w in all_workflows("test") if w.domain == domain]
    ids = ids or [w.id for w in all_workflows(None) if w.domain == domain]
    if not ids:
        raise UndoBenchError(f"no workflow for domain {domain!r}")
    return ids[0]


def _log(message: str) -> None:
    print(f"undobench mcp: {message}", file=sys.stderr, flush=True)  # stdout may be MCP


#: Sets the control endpoint's token (else a new random one, written to --control-file or,
#: without one, to stderr).
CONTROL_TOKEN_ENV = "UNDOBENCH_MCP_CONTROL_TOKEN"


def serve_mcp(args: argparse.Namespace) -> int:
    import anyio

    from undobench_gym.contract.errors import UndoBenchError
    from undobench_gym.core.env import UndoBenchEnv
    from undobench_gym.core.mcp.control import ControlServer
    from undobench_gym.core.mcp.host import EpisodeHost
    from undobench_gym.core.mcp.server import HttpServer, build_server, serve_stdio

    if args.fault is not None and args.seed is None:
        raise UndoBenchError("--fault needs --seed (or use POST /reset on the control endpoint)")
    if args.no_episode and args.seed is not None:
        raise UndoBenchError("--no-episode and --seed contradict each other")
    workflow = args.workflow
    if args.seed is None and not args.no_episode:
        workflow = workflow or default_workflow(args.domain.lower())
        args.seed = 1
    methods.method(args.method)  # a clear error for an unknown method, before any stack
    env = UndoBenchEnv(
        args.domain.lower(),
        workflow=args.workflow,
        runtime=args.runtime,
        server_idempotency=methods.server_idempotency_for(args.method),
        max_steps=args.max_steps,
    )

    def stop(_sig: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    host = EpisodeHost(methods.wrap(env, args.method), workflow=args.workflow)
    server = build_server(host, annotations=not args.no_annotations)
    try:
        token = os.environ.get(CONTROL_TOKEN_ENV) or None
        with ControlServer(host, args.control_port, token) as control:
            if args.seed is not None:
                host.reset(args.seed, fault=args.fault, workflow=workflow)
                _log(f"episode: {workflow or 'drawn'} seed {args.seed} fault {args.fault}")
            http = HttpServer(server, args.port).start() if args.transport == "http" else None
            # Announced once both endpoints accept connections.
            urls = {"control": control.url, "mcp": http.url if http else "stdio"}
            if args.control_file:  # whole or absent: a reader never sees half of it
                tmp = Path(args.control_file + ".tmp")
                tmp.touch(mode=0o600)  # the token is in it: its owner's alone
                tmp.write_text(json.dumps({**urls, "token": control.token}))
                tmp.replace(args.control_file)
                where = f"token in {args.control_file}"
            else:
                where = "token given" if token else f"token {control.token}"
            _log(f"control endpoint {control.url} ({where}); MCP on {urls['mcp']}")
            try:
                if http is not None:
                    http.wait()
                else:
                    anyio.run(serve_stdio, server)
            except KeyboardInterrupt:
                pass
            finally:
                if http is not None:
                    http.stop()
            if args.record and host.public().get("task") is not None:
                Path(args.record).write_text(json.dumps(host.finish(), default=str))
    finally:
        env.close()
    return 0
