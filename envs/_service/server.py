"""Entry point of one service process: public and admin apps on two ports, one event loop.

    python -m undobench_gym.envs._service.server --domain payments --data-dir D \
        --port 0 --admin-port 0

Prints one line ``READY <port> <admin_port>`` once both sockets listen, so a supervisor
can bind port 0 the first time and pass the same ports again on a crash restart.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import socket
import sys
from pathlib import Path

import uvicorn
from sqlalchemy.orm import Session

from .. import DOMAIN_MODULES
from .app import create_apps, reset_state
from .context import DomainService, ServiceContext
from .db import Meta


def load_domain(name: str) -> DomainService:
    if name not in DOMAIN_MODULES:
        raise SystemExit(f"unknown domain {name!r}; known: {', '.join(sorted(DOMAIN_MODULES))}")
    module = importlib.import_module(DOMAIN_MODULES[name] + ".service")
    domain: DomainService = module.DOMAIN
    return domain


def _seeded(ctx: ServiceContext) -> bool:
    with Session(ctx.engine) as s:
        return s.get(Meta, "seed") is not None


def _bind(host: str, port: int) -> socket.socket:
    # proto=IPPROTO_TCP matters: asyncio sets TCP_NODELAY on accepted sockets only when the
    # listening socket says TCP, and without it Nagle + delayed ACK add 40 ms per response.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


async def _serve(args: argparse.Namespace) -> None:
    domain = load_domain(args.domain)
    ctx = ServiceContext.open(domain, Path(args.data_dir))
    if args.seed is not None and not _seeded(ctx):
        reset_state(ctx, args.seed)  # a local spin (docker compose) starts with data
    public, admin = create_apps(domain, ctx)
    public_sock = _bind(args.host, args.port)
    admin_sock = _bind(args.host, args.admin_port)
    servers = [
        uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))
        for app in (public, admin)
    ]
    tasks = [
        asyncio.create_task(servers[0].serve(sockets=[public_sock])),
        asyncio.create_task(servers[1].serve(sockets=[admin_sock])),
    ]
    ctx.ports = {"public": public_sock.getsockname()[1], "admin": admin_sock.getsockname()[1]}
    while not all(s.started for s in servers):
        await asyncio.sleep(0.01)
    print(f"READY {public_sock.getsockname()[1]} {admin_sock.getsockname()[1]}", flush=True)
    await asyncio.gather(*tasks)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--domain", required=True)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--admin-port", type=int, default=0)
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed the state on first start (kept across restarts)",
    )
    args = parser.parse_args(argv)
    try:
        asyncio.run(_serve(args))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
