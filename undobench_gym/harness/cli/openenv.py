"""`undobench openenv`: serve one domain as an OpenEnv environment (HTTP and WebSocket) for
any OpenEnv client, TRL's OpenEnv integration included (docs/training.md)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from undobench_gym.contract.errors import UndoBenchError


def add(sub: Any) -> None:
    o = sub.add_parser(
        "openenv",
        help="serve a domain as an OpenEnv environment (HTTP/WebSocket)",
        description="Serve one domain's env on openenv-core: each WebSocket session gets its "
        "own stack; reset(seed, fault, workflow) starts a paired episode as gym.make does, "
        "step({tool, arguments}) is one call through the fault proxy, and the last step "
        "carries the reward and the verdict. Listens on 127.0.0.1 only. Needs the rl extra.",
    )
    o.add_argument("--domain", required=True, help="e.g. payments (or Payments)")
    o.add_argument("--port", type=int, default=8000)
    o.add_argument("--max-sessions", type=int, default=4, help="concurrent sessions (stacks)")
    o.add_argument("--runtime", default="process", choices=["process", "docker"])
    o.add_argument("--max-steps", type=int, default=20)
    o.set_defaults(func=serve_openenv)


def serve_openenv(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from undobench_gym.harness.rl.openenv_server import StackPool, create_app
    except ImportError as exc:
        raise UndoBenchError(
            f"undobench openenv needs the rl extra ({exc.name} is missing): "
            "pip install 'undobench-gym[rl]'"
        ) from exc
    pool = StackPool(args.domain.lower(), runtime=args.runtime, max_steps=args.max_steps)
    app = create_app(pool, max_sessions=args.max_sessions)
    print(f"undobench openenv: {args.domain} on http://127.0.0.1:{args.port}", file=sys.stderr)
    try:
        uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")
    finally:
        pool.close()
    return 0
