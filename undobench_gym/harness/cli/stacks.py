"""The commands that look after the service stacks: `doctor`, `images`, `gc`."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import shutil
import sys
from typing import Any

from undobench_gym.contract.errors import UndoBenchError

#: What `doctor` imports to check the dependencies a stack needs.
DEPENDENCIES = (
    "fastapi",
    "sqlalchemy",
    "uvicorn",
    "mitmproxy.tools.main",
    "gymnasium",
)


def add(sub: Any) -> None:
    d = sub.add_parser("doctor", help="check dependencies, start one stack, report docker")
    d.add_argument(
        "--require-docker", action="store_true", help="fail when the docker runtime is not ready"
    )
    d.set_defaults(func=doctor)

    img = sub.add_parser("images", help="container images for the docker runtime")
    img_sub = img.add_subparsers(dest="images_command", required=True)
    b = img_sub.add_parser("build", help="build the stack image (content-hashed tag)")
    b.add_argument("--base", help="base image to use (pulled if missing), e.g. python:3.11-slim")
    b.add_argument(
        "--offline",
        action="store_true",
        help="make the base with debootstrap + docker import (no registry needed)",
    )
    b.add_argument("--force", action="store_true", help="rebuild even when up to date")
    b.set_defaults(func=images_build)

    c = img_sub.add_parser("compose", help="print docker-compose.yml for all domain stacks")
    c.set_defaults(func=images_compose)

    g = sub.add_parser(
        "gc",
        help="remove leftovers: workdirs of killed drivers; containers, networks, volumes "
        "(by label)",
    )
    g.set_defaults(func=gc)


# Handlers import the runtime when they run: --help stays fast; docker is an optional extra.


def images_build(args: argparse.Namespace) -> int:
    from undobench_gym.core.runtime.images import build

    result = build(
        base=args.base,
        offline=args.offline,
        force=args.force,
        log=lambda m: print(m, file=sys.stderr),
    )
    print(f"{result.tag} ({'built' if result.built else 'up to date'}; base {result.base})")
    return 0


def images_compose(args: argparse.Namespace) -> int:
    from undobench_gym.core.runtime.compose import render

    sys.stdout.write(render())
    return 0


def gc(args: argparse.Namespace) -> int:
    from undobench_gym.core.runtime.process import remove_stale_workdirs

    print(f"process runtime: removed {remove_stale_workdirs()} workdirs of dead drivers")
    try:
        from undobench_gym.core.runtime.docker import gc as docker_gc

        counts = docker_gc()
    except UndoBenchError as exc:
        print(f"docker runtime: skipped ({exc})")
        return 0
    print("docker runtime: " + ", ".join(f"removed {n} {kind}" for kind, n in counts.items()))
    return 0


def doctor(args: argparse.Namespace) -> int:
    ok = True
    for mod in DEPENDENCIES:
        try:
            importlib.import_module(mod)
            print(f"ok      {mod}")
        except Exception as exc:
            ok = False
            print(f"BROKEN  {mod}: {exc}")
    from undobench_gym.core.extras import missing

    absent = missing("eval")
    print(
        "ok      eval extra (reports)"
        if not absent
        else f"absent  eval extra (reports; missing {', '.join(absent)}): "
        "pip install 'undobench-gym[eval]'"
    )
    if ok:
        from undobench_gym.core.runtime.process import ProcessRuntime

        try:
            with ProcessRuntime("payments") as rt:
                rt.wait_healthy()
                print(f"ok      process runtime: stack up at {rt.endpoints.agent_url}")
        except UndoBenchError as exc:
            ok = False
            print(f"BROKEN  process runtime: {exc}")
    docker_ok = _doctor_docker()
    if args.require_docker:
        ok = ok and docker_ok
    return 0 if ok else 1


def _doctor_docker() -> bool:
    """Report what the docker runtime lacks, and how to fix it."""
    if importlib.util.find_spec("docker") is None:
        print("missing docker runtime: the docker SDK (pip install 'undobench-gym[docker]')")
        return False
    from undobench_gym.core.runtime.images import IMAGE_REPO, docker_client

    try:
        client = docker_client()
    except UndoBenchError as exc:
        hint = "" if shutil.which("dockerd") else " (no dockerd: apt-get install docker.io)"
        print(f"missing docker runtime: {exc}{hint}")
        return False
    print(f"ok      docker engine {client.version().get('Version')}")
    if not client.images.list(name=f"{IMAGE_REPO}:latest"):
        print(
            f"missing {IMAGE_REPO}:latest: run `undobench images build` "
            "(add --offline where no registry is reachable)"
        )
        return False
    print(f"ok      image {IMAGE_REPO}:latest")
    return True
