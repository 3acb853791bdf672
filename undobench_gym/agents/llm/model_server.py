"""A real OpenAI-compatible model server on 127.0.0.1: llama.cpp (upstream `llama-server`,
or llama-cpp-python's server) with an instruct model that registry packages ship.

`undobench serve-model` runs one in the foreground; `--agent local:MODEL` makes the sweep
start one, point the agent at it as `openai:MODEL@URL`, and stop it when the sweep ends,
owning its lifetime like a stack's. Nothing is downloaded: the GGUF comes from an
installed package (`pip install -e '.[serve]'`) or a path.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from undobench_gym.agents.llm.models import SERVE_EXTRA, resolve_gguf
from undobench_gym.contract.errors import UndoBenchError
from undobench_gym.core.runtime.children import (
    PORT_ATTEMPTS,
    Child,
    free_port,
    log_tail,
    port_taken,
    spawn,
)

DEFAULT_CONTEXT = 4096
READY_TIMEOUT_S = 180.0
# llama-cpp-python's only chat format that returns OpenAI tool calls for a plain chat
# model. Its template writes no `tool` message into the prompt, so agents talking to it
# send tool results as user messages (`tool_results="user"`).
CHAT_FORMAT = "chatml-function-calling"
LLAMA_CPP_VERSION = "0.3.36"
# The two servers: upstream llama.cpp's C++ `llama-server` (the model's own Jinja chat
# template, native tool calls, parallel slots with prompt-prefix reuse), and
# llama-cpp-python's Python server (one request at a time; see docs/agents.md for what its
# chat handler gets wrong). `auto`: llama-server where it is built, else the Python one.
SERVER_KINDS = ("auto", "llama-server", "llama-cpp-python")
# llama-server's self-speculative decoding: drafts are read from the conversation itself (an
# id, a tool name, a JSON key the model copies from an observation), checked in one batch,
# and kept only where the model would have written them, so replies keep the model's own
# distribution. TYPE or TYPE:N,M (lookup n-gram length, longest draft), in tokens.
SPECULATIVE_TYPES = ("none", "ngram-simple", "ngram-map-k", "ngram-map-k4v")


def speculative_args(spec: str) -> list[str]:
    """`--spec-*` flags for `spec` (`none`, `TYPE` or `TYPE:N,M`); a clear error otherwise."""
    kind, _, sizes = spec.partition(":")
    if kind not in SPECULATIVE_TYPES:
        raise UndoBenchError(
            f"unknown speculative decoding {spec!r}: {', '.join(SPECULATIVE_TYPES)}"
            " (optionally TYPE:N,M, the lookup and draft lengths in tokens)"
        )
    if kind == "none":
        if sizes:
            raise UndoBenchError(f"speculative decoding {spec!r}: 'none' takes no sizes")
        return []
    args = ["--spec-type", kind]
    if sizes:
        try:
            n, m = (int(v) for v in sizes.split(","))
        except ValueError:
            raise UndoBenchError(
                f"speculative decoding {spec!r}: sizes are N,M (two whole numbers)"
            ) from None
        if not 1 <= n <= 64 or not 1 <= m <= 64:
            raise UndoBenchError(f"speculative decoding {spec!r}: N and M are from 1 to 64")
        args += [f"--spec-{kind}-size-n", str(n), f"--spec-{kind}-size-m", str(m)]
    return args


def llama_server_binary() -> Path | None:
    """`UNDOBENCH_LLAMA_SERVER`, else the binary `make serve-setup` keeps, else PATH's."""
    configured = os.environ.get("UNDOBENCH_LLAMA_SERVER")
    if configured:
        return Path(configured) if Path(configured).is_file() else None
    kept = (
        Path.home() / ".cache" / "undobench" / f"llama-server-{LLAMA_CPP_VERSION}" / "bin"
    ) / "llama-server"
    if kept.is_file():
        return kept
    found = shutil.which("llama-server")
    return Path(found) if found else None


def resolve_kind(kind: str) -> str:
    if kind not in SERVER_KINDS:
        raise UndoBenchError(f"unknown model server {kind!r}: {', '.join(SERVER_KINDS)}")
    if kind in ("auto", "llama-server") and llama_server_binary() is not None:
        return "llama-server"
    if kind == "llama-server":
        raise UndoBenchError(
            "llama-server is not built: make serve-setup (scripts/build_llama_server.sh "
            "builds it once, ~10 min on 2 cores), or set UNDOBENCH_LLAMA_SERVER to a binary"
        )
    if importlib.util.find_spec("llama_cpp") is None:
        raise UndoBenchError(
            f"serving a model needs llama-server or llama-cpp-python: {SERVE_EXTRA}"
        )
    return "llama-cpp-python"


class LlamaServer:
    """One model server process: started on a free port, ready when `GET /v1/models`
    answers, stopped by process group (and with its parent, if that dies first).

    `parallel` slots serve that many conversations at once (llama-server only: continuous
    batching, each slot with `context` tokens and its own prompt-prefix cache), so a sweep
    with that many episodes in flight keeps the cores busy while one of them waits on a
    tool call."""

    def __init__(
        self,
        model: str,
        *,
        port: int = 0,
        context: int = DEFAULT_CONTEXT,
        threads: int | None = None,
        parallel: int = 1,
        kind: str = "auto",
        log_dir: Path | None = None,
        speculative: str = "none",
    ) -> None:
        self.kind = resolve_kind(kind)
        self.speculative = speculative
        self._spec_args = speculative_args(speculative)
        if self._spec_args and self.kind != "llama-server":
            raise UndoBenchError(
                f"speculative decoding ({speculative}) needs llama-server: make serve-setup"
            )
        self.alias, self.gguf = resolve_gguf(model)
        self.port, self.context = port, context
        self.threads = threads or os.cpu_count() or 1
        self.parallel = max(1, parallel) if self.kind == "llama-server" else 1
        self.binary = llama_server_binary() if self.kind == "llama-server" else None
        # a work directory of our own is removed on stop, unless `keep_log` (a server that
        # died: its log is what the user reads next)
        self._own_dir = None if log_dir else Path(tempfile.mkdtemp(prefix="undobench-model-"))
        folder = log_dir or self._own_dir
        assert folder is not None
        self.keep_log = False
        self.child = Child("model-server", folder / "model-server.log")

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def agent_spec(self) -> str:
        return f"openai:{self.alias}@{self.base_url}"

    def command(self, port: int) -> list[str]:
        if self.kind == "llama-server":
            assert self.binary is not None
            return [
                str(self.binary),
                "--model",
                str(self.gguf),
                "--alias",
                self.alias,
                # the model's own chat template (tools, tool messages) and tool-call parser
                "--jinja",
                # every slot gets `context` tokens: the total is split between slots
                "--ctx-size",
                str(self.context * self.parallel),
                "--parallel",
                str(self.parallel),
                "--threads",
                str(self.threads),
                "--threads-batch",
                str(self.threads),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--no-webui",
                "--metrics",
                *self._spec_args,
            ]
        return [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(self.gguf),
            "--model_alias",
            self.alias,
            "--chat_format",
            CHAT_FORMAT,
            "--n_ctx",
            str(self.context),
            "--n_threads",
            str(self.threads),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ]

    def describe(self) -> dict[str, object]:
        """What a run records about its server (the manifest's `model_server`)."""
        return {
            "kind": self.kind,
            "model": self.alias,
            "gguf": self.gguf.name,
            "gguf_bytes": self.gguf.stat().st_size,
            "binary": str(self.binary) if self.binary else f"llama-cpp-python {LLAMA_CPP_VERSION}",
            "build": LLAMA_CPP_VERSION,
            "context_per_slot": self.context,
            "parallel": self.parallel,
            "threads": self.threads,
            "speculative": self.speculative,
        }

    def start(self, timeout: float = READY_TIMEOUT_S) -> str:
        fixed = self.port
        for attempt in range(PORT_ATTEMPTS):
            self.port = fixed or free_port()
            self.child.proc = spawn(self.command(self.port), self.child.log, capture_stdout=False)
            try:
                self._wait_ready(timeout)
                return self.base_url
            except UndoBenchError:
                self.child.stop()
                if fixed or not port_taken(self.child.log) or attempt == PORT_ATTEMPTS - 1:
                    self.stop()  # the error carries the log's tail
                    raise
        raise AssertionError("unreachable")

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        proc = self.child.proc
        assert proc is not None
        while time.monotonic() < deadline and proc.poll() is None:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.base_url}/models", timeout=2).is_success:
                    return
            time.sleep(0.2)
        state = f"exited with {proc.poll()}" if proc.poll() is not None else "not ready"
        raise UndoBenchError(
            f"model server {state} after {timeout:.0f}s. Log tail ({self.child.log}):\n"
            f"{log_tail(self.child.log)}"
        )

    def stop(self) -> None:
        self.child.stop()
        if self._own_dir is not None and not self.keep_log:
            shutil.rmtree(self._own_dir, ignore_errors=True)

    def __enter__(self) -> LlamaServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# The settings an agent needs for this server, set for the sweep's workers (they read
# UNDOBENCH_LLM_*). A user's own value wins.
def served_settings(server: LlamaServer) -> dict[str, str]:
    if server.kind == "llama-server":
        # Tool messages, `null` content, max_tokens and tool_choice "required" all work as
        # the API says: only the context size and a reply limit a CPU decodes in seconds.
        return {
            "UNDOBENCH_LLM_CONTEXT_TOKENS": str(server.context),
            "UNDOBENCH_LLM_MAX_TOKENS": "384",
            "UNDOBENCH_LLM_TIMEOUT_S": "600",
        }
    # llama-cpp-python: tool results as user messages (see CHAT_FORMAT), and a reply limit
    # enforced on a stream (the server ignores max_tokens while it writes tool-call
    # arguments).
    return {
        "UNDOBENCH_LLM_CONTEXT_TOKENS": str(server.context),
        "UNDOBENCH_LLM_TOOL_RESULTS": "user",
        "UNDOBENCH_LLM_MAX_TOKENS": "192",
        "UNDOBENCH_LLM_STREAM": "1",
        # A reply it does not stream (tool calls) can run to the context's end: let the
        # episode's time limit end it (truncated, scored), not the request's timeout.
        "UNDOBENCH_LLM_TIMEOUT_S": "900",
    }


class Served(dict[str, str]):
    """`local:` spec -> `openai:` spec, with what each server was (`describe()`)."""

    def __init__(self) -> None:
        super().__init__()
        self.servers: dict[str, dict[str, object]] = {}


@contextlib.contextmanager
def local_agents(specs: set[str], *, parallel: int = 1) -> Iterator[Served]:
    """Start a server for each `local:MODEL` spec, with `parallel` slots; yield spec ->
    `openai:` spec for the sweep, with the servers' settings in the environment; stop them
    all afterwards. `UNDOBENCH_MODEL_SERVER` picks the server (auto, llama-server,
    llama-cpp-python), `UNDOBENCH_MODEL_CONTEXT` a slot's context size and
    `UNDOBENCH_MODEL_THREADS` its CPU threads (default: every core; 1 keeps decoding steady
    on a machine that is also busy with other work, where threads that wait on each other
    lose most of their time) and `UNDOBENCH_MODEL_SPECULATIVE` llama-server's
    self-speculative decoding (`SPECULATIVE_TYPES`, default none)."""
    served = Served()
    wanted = sorted(s for s in specs if s.startswith("local:"))
    if not wanted:
        yield served
        return
    saved = dict(os.environ)
    servers: list[LlamaServer] = []
    kind = os.environ.get("UNDOBENCH_MODEL_SERVER", "auto")
    context = int(os.environ.get("UNDOBENCH_MODEL_CONTEXT", DEFAULT_CONTEXT))
    threads = int(os.environ.get("UNDOBENCH_MODEL_THREADS", 0)) or None
    speculative = os.environ.get("UNDOBENCH_MODEL_SPECULATIVE", "none")
    try:
        for spec in wanted:
            server = LlamaServer(
                spec.removeprefix("local:"),
                parallel=parallel,
                kind=kind,
                context=context,
                threads=threads,
                speculative=speculative,
            )
            servers.append(server)
            server.start()
            served[spec] = server.agent_spec()
            served.servers[spec] = server.describe()
            for key, value in served_settings(server).items():
                os.environ.setdefault(key, value)
        yield served
    finally:
        for server in servers:
            server.stop()
        os.environ.clear()
        os.environ.update(saved)
