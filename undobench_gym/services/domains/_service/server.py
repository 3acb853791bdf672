"""Entry point of one service process: public and admin apps on two ports, one event loop.

    python -m undobench_gym.services.domains._service.server --domain payments --data-dir D \
        --port 0 --admin-port 0

Prints one line ``READY <port> <admin_port>`` once both sockets listen, so a supervisor
can bind port 0 the first time and pass the same ports again on a crash restart.

The admin API answers only requests with the stack's token, which the runtime passes in
the environment (``UNDOBENCH_STACK_TOKEN``, see `undobench_gym.contract.stack_auth`).

With ``--fork-server`` the process is a zygote: it imports everything and binds both
sockets once, then forks the process that serves, and forks a fresh one each time that one
exits (a crash point, a kill). A crashed service is back in tens of milliseconds instead of
the ~1 s a new interpreter spends importing FastAPI, SQLAlchemy and the domain, and as the
listening sockets never close, a client that connects meanwhile waits in the backlog
instead of being refused. Every exit is still a real process death: the child's memory,
open transactions and connections die with it, and its replacement opens the data
directory afresh. The zygote reports on stdout ``SPAWN <pid>`` for each child and
``EXIT <pid> <code>`` for each exit (the code as `subprocess` gives it: -N for signal N),
and each child's ``/admin/health`` lists the exit codes before it, so a supervisor that
reads only HTTP (the docker runtime) counts them too.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import gc
import importlib
import os
import signal
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any, NoReturn

import httpx
import uvicorn
from sqlalchemy.orm import Session

from undobench_gym.contract import CRASH_EXIT_CODE
from undobench_gym.contract.quiet_server import QuietServer
from undobench_gym.contract.stack_auth import TOKEN_ENV, auth_headers, token_from_env
from undobench_gym.services.domains import DOMAIN_MODULES
from undobench_gym.services.domains._service.app import create_apps, reset_state
from undobench_gym.services.domains._service.context import DomainService, ServiceContext
from undobench_gym.services.domains._service.db import Meta


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


def _prepare(
    args: argparse.Namespace, domain: DomainService
) -> tuple[ServiceContext, list[uvicorn.Server]]:
    """Open the data directory, build both apps and their servers (not yet listening)."""
    ctx = ServiceContext.open(domain, Path(args.data_dir))
    if args.seed is not None and not _seeded(ctx):
        reset_state(ctx, args.seed)  # a local spin (docker compose) starts with data
    servers: list[uvicorn.Server] = [
        QuietServer(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))
        for app in create_apps(domain, ctx, token_from_env("service admin API"))
    ]
    return ctx, servers


async def _run(
    ctx: ServiceContext, servers: list[uvicorn.Server], socks: tuple[socket.socket, ...]
) -> None:
    tasks = [
        asyncio.create_task(server.serve(sockets=[sock]))
        for server, sock in zip(servers, socks, strict=True)
    ]
    public_port, admin_port = (sock.getsockname()[1] for sock in socks)
    ctx.ports = {"public": public_port, "admin": admin_port}
    while not all(s.started for s in servers):
        await asyncio.sleep(0.002)
    print(f"READY {public_port} {admin_port}", flush=True)
    await asyncio.gather(*tasks)


def _serve(
    ctx: ServiceContext, servers: list[uvicorn.Server], socks: tuple[socket.socket, ...]
) -> None:
    """Serve on the event loop uvicorn picks: uvloop (a core dependency) where it is
    installed, asyncio's otherwise; uvicorn picks httptools over h11 the same way."""
    with asyncio.Runner(loop_factory=servers[0].config.get_loop_factory()) as runner:
        runner.run(_run(ctx, servers, socks))


_PR_SET_PDEATHSIG = 1


#: A fork server gives up (exits 1, so its supervisor sees a failed start) after this many
#: servers in a row that died within `_QUICK_S` of their fork, other than at a crash point.
_QUICK_DEATHS, _QUICK_S = 5, 1.0


def _child(
    zygote: int,
    ctx: ServiceContext,
    servers: list[uvicorn.Server],
    socks: tuple[socket.socket, socket.socket],
    exits: list[int],
) -> NoReturn:
    """The forked server: dies with the zygote, serves until it exits, never returns."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != zygote:  # the zygote died before the death signal was armed
        os._exit(1)
    code = 0
    try:
        ctx.after_fork(exits)
        _serve(ctx, servers, socks)
    except KeyboardInterrupt:
        pass
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
    os._exit(code)


async def _warm(admin: Any) -> None:
    """Serve the admin API's reads once in the zygote, so that every child inherits what
    their first use builds and caches (SQLAlchemy's compiled statements for every table,
    FastAPI's and pydantic's lazy set-up): ~25 ms of CPU a child would pay after each
    crash. Reads only: the data directory is left as it is."""
    transport = httpx.ASGITransport(app=admin)
    headers = auth_headers(os.environ.get(TOKEN_ENV))
    async with httpx.AsyncClient(
        transport=transport, base_url="http://zygote", headers=headers
    ) as client:
        for path in ("/admin/health", "/admin/verdict"):  # what the env reads
            (await client.get(path)).raise_for_status()


def fork_server(args: argparse.Namespace) -> None:
    """Zygote loop (see the module docstring): fork a server, wait for it, report its
    exit, fork the next one; SIGTERM/SIGINT stop the child and then the zygote."""
    # Everything a child would otherwise do on its own before it can serve, done once here:
    # the imports, the apps (FastAPI's routing and pydantic's schemas take ~100 ms), the
    # servers' configuration (uvicorn imports its protocol classes lazily).
    ctx, servers = _prepare(args, load_domain(args.domain))
    for server in servers:
        server.config.load()
    _public, admin = servers
    asyncio.run(_warm(admin.config.loaded_app))
    ctx.engine.dispose()  # no database connection crosses a fork
    socks = (_bind(args.host, args.port), _bind(args.host, args.admin_port))
    exits: list[int] = []
    child = 0
    stopping = False

    def stop(_sig: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True
        if child:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    gc.collect()
    gc.freeze()  # keep the imported heap out of the children's copy-on-write faults
    zygote, quick = os.getpid(), 0
    while not stopping:
        forked = time.monotonic()
        child = os.fork()
        if child == 0:
            _child(zygote, ctx, servers, socks, exits)
        print(f"SPAWN {child}", flush=True)
        _pid, status = os.waitpid(child, 0)
        code = os.waitstatus_to_exitcode(status)
        exits.append(code)
        child = 0
        print(f"EXIT {_pid} {code}", flush=True)
        quick = quick + 1 if code != CRASH_EXIT_CODE and time.monotonic() - forked < _QUICK_S else 0
        if quick >= _QUICK_DEATHS and not stopping:
            print(f"fork server: {quick} servers died at start; giving up", file=sys.stderr)
            sys.exit(1)


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
    parser.add_argument(
        "--fork-server",
        action="store_true",
        help="stay up as a zygote that forks the server again whenever it exits",
    )
    args = parser.parse_args(argv)
    if args.fork_server:
        fork_server(args)
        return
    ctx, servers = _prepare(args, load_domain(args.domain))
    socks = (_bind(args.host, args.port), _bind(args.host, args.admin_port))
    try:
        _serve(ctx, servers, socks)
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
