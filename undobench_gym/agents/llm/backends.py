"""Model backends: one `complete()` call per model turn, the same reply shape for all.

`openai` talks to any OpenAI-compatible chat-completions server (vLLM, llama.cpp, SGLang,
a hosted API). Local backends (`hf`, `vllm` in-process) live in `local.py`. A backend raises
`TransientProviderError` for what is worth retrying (connection, timeout, 429, 5xx) and
`ProviderError` for what is not; the agent does the retrying, before any tool dispatch, and
raises `ProviderUnavailable` (an infrastructure error for the sweep) when retries run out.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from undobench_gym.contract.errors import ProviderError as ProviderError  # re-exported
from undobench_gym.contract.errors import ProviderUnavailable as ProviderUnavailable
from undobench_gym.contract.errors import UndoBenchError


class TransientProviderError(Exception):
    """A provider failure worth retrying: connection, timeout, rate limit, 5xx."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class ToolCallOut:
    id: str
    name: str
    arguments: str  # raw text, exactly as the model produced it


@dataclass(frozen=True)
class Reply:
    content: str | None
    tool_calls: list[ToolCallOut] = field(default_factory=list)
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    constrained: bool = False  # the server applied the request's response_schema
    # prompt tokens the server took from its prefix cache (usage.prompt_tokens_details)
    cached_tokens: int = 0


@dataclass(frozen=True)
class Request:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    seed: int
    temperature: float
    max_tokens: int
    stop: list[str] | None = None
    tool_choice: str = "auto"
    # F2 with tool_choice "required": the reply must be one JSON object of this schema
    response_schema: dict[str, Any] | None = None


# Words in an error body that say the request itself was refused, whatever the status: a
# server that answers a message shape it cannot render with HTTP 500 (llama-cpp-python
# does) would fail the same way on every retry.
_REFUSAL = re.compile(
    r"validation|invalid|not supported|unsupported|must be|expected|not allowed|"
    r"TypeError|ValueError|KeyError|AssertionError|template|schema|context window|"
    r"maximum context|too long|NoneType|object of type|has no attribute|not subscriptable|"
    r"unexpected keyword|required positional",
    re.IGNORECASE,
)


_FORMAT_REFUSED = re.compile(r"response_format|json_schema|json_object|schema", re.IGNORECASE)


def refused_request(status: int, body: str) -> bool:
    """Whether an HTTP error says the request was invalid (retrying cannot help)."""
    if status in (408, 409, 429) or status in (502, 503, 504):
        return False
    return status < 500 or bool(_REFUSAL.search(body))


def _response_formats(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The shapes servers take a JSON-schema constraint in, most standard first: OpenAI's
    `json_schema` (vLLM, SGLang, llama.cpp's server, hosted APIs), then `json_object` with
    a `schema` (llama-cpp-python's server)."""
    return [
        {"type": "json_schema", "json_schema": {"name": "action", "schema": schema}},
        {"type": "json_object", "schema": schema},
    ]


class Backend(Protocol):
    kind: str  # "openai" | "vllm" | "hf": the first part of the agent's name
    model: str

    def complete(self, request: Request) -> Reply: ...


class OpenAIBackend:
    """Chat completions over HTTP with the `openai` client (its own retries are off: the
    agent retries, counts, and never dispatches a tool call twice)."""

    kind = "openai"

    def __init__(
        self,
        model: str,
        base_url: str,
        *,
        timeout_s: float = 120.0,
        api_key: str | None = None,
        stream: bool = False,
    ) -> None:
        # stream: read the reply as it is made and stop at max_tokens ourselves. Some servers
        # ignore max_tokens (llama-cpp-python while it writes tool-call arguments); closing
        # the stream is also what stops a server's generation when the agent runs out of
        # time (a non-streamed one runs on, holding the server for the next request).
        self.stream = stream
        try:
            import openai
        except ImportError as exc:
            raise UndoBenchError(
                "openai:MODEL@BASE_URL needs the openai client: pip install 'undobench-gym[llm]'"
            ) from exc
        self.model, self.base_url = model, base_url
        self._openai = openai
        self._options: dict[str, Any] = {
            "base_url": base_url,
            "api_key": api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY",
            "max_retries": 0,
            "timeout": timeout_s,
        }
        self._client = openai.OpenAI(**self._options)

    def context_window(self) -> int:
        """The context size the server reports: vLLM's `max_model_len` in `GET /models`, or
        llama.cpp's `n_ctx` in `GET /props`; 0 when it reports none (llama-cpp-python,
        hosted APIs), and then nothing is trimmed unless configured."""
        with contextlib.suppress(Exception):
            for card in self._client.models.list().data:
                size = (card.model_extra or {}).get("max_model_len")
                if card.id == self.model and isinstance(size, int):
                    return size
        with contextlib.suppress(Exception):
            root = self.base_url.rstrip("/").removesuffix("/v1")
            props = httpx.get(f"{root}/props", timeout=5).json()
            return int(props["default_generation_settings"]["n_ctx"])
        return 0

    def complete(self, request: Request) -> Reply:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": request.messages,
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
            "seed": request.seed,
        }
        if request.tools:
            kwargs["tools"] = request.tools
            kwargs["tool_choice"] = request.tool_choice
        if request.stop:
            kwargs["stop"] = request.stop
        if request.response_schema is None:
            return self._create(kwargs, constrained=False)
        formats = _response_formats(request.response_schema)[self._format :]
        for shape in formats:
            try:
                return self._create({**kwargs, "response_format": shape}, constrained=True)
            except ProviderError as exc:
                if not _FORMAT_REFUSED.search(str(exc)):
                    raise
                self._format += 1  # this server refuses that shape: the next one, for good
        return self._create(kwargs, constrained=False)

    _format = 0  # index of the first response_format shape this server has not refused
    _stream_tools = True  # the server streams replies to requests with tools

    def _create(self, kwargs: dict[str, Any], *, constrained: bool) -> Reply:
        oa = self._openai
        try:
            if self.stream and (self._stream_tools or "tools" not in kwargs):
                try:
                    return self._streamed(kwargs, constrained=constrained)
                except (TransientProviderError, oa.APIConnectionError) as exc:
                    broken = isinstance(exc, oa.APIConnectionError) or exc.kind == "empty_stream"
                    if not broken:
                        raise
                    # A server that fails after it has answered a stream (llama-cpp-python
                    # on a full context, or on tool calls with tool_choice "auto") just
                    # closes it: the same request unstreamed gets its real error (a context
                    # overflow with the server's token count). Tool requests go unstreamed
                    # from here on. A server that is really down fails this one too.
                    if "tools" in kwargs:
                        self._stream_tools = False
                    # and on a new connection: the broken one may sit in the pool, reset
                    self._client.close()
                    self._client = oa.OpenAI(**self._options)
            resp = self._client.chat.completions.create(**kwargs)
        except oa.APITimeoutError as exc:
            raise TransientProviderError(f"timeout: {exc}", "timeout") from exc
        except oa.APIConnectionError as exc:
            raise TransientProviderError(f"connection: {exc}", "connection") from exc
        except oa.RateLimitError as exc:
            raise TransientProviderError(f"rate limited: {exc}", "rate_limit") from exc
        except oa.APIStatusError as exc:
            body = exc.response.text if exc.response is not None else str(exc)
            if not refused_request(exc.status_code, body):
                raise TransientProviderError(
                    f"HTTP {exc.status_code}: {exc}", "server_error"
                ) from exc
            raise ProviderError(
                f"{self.base_url} refused the request (HTTP {exc.status_code}): {body[:500]}. "
                f"Check that the model name {self.model!r} is one `GET /models` lists and, "
                "for F1, that the server enables tool calls (vLLM: --enable-auto-tool-choice "
                "--tool-call-parser NAME)."
            ) from exc
        usage = resp.usage
        return _reply(resp.choices, usage, constrained=constrained)

    def _streamed(self, kwargs: dict[str, Any], *, constrained: bool) -> Reply:
        """The reply read chunk by chunk (accumulated by the openai client's own stream
        state), cut at max_tokens chunks: one chunk a token on llama.cpp and vLLM."""
        from openai.lib.streaming.chat import ChatCompletionStreamState

        state: ChatCompletionStreamState[Any] = ChatCompletionStreamState()
        chunks, cut, usage = 0, False, None
        with self._client.chat.completions.create(**kwargs, stream=True) as stream:
            for chunk in stream:
                state.handle_chunk(chunk)
                usage = chunk.usage or usage
                chunks += 1
                if chunks >= kwargs["max_tokens"]:
                    cut = True
                    break
        if chunks == 0:
            raise TransientProviderError("the stream ended without a chunk", "empty_stream")
        snapshot = state.current_completion_snapshot
        reply = _reply(snapshot.choices, usage, constrained=constrained, chunks=chunks)
        return dataclasses.replace(reply, finish_reason="length") if cut else reply


def _reply(choices: Any, usage: Any, *, constrained: bool, chunks: int | None = None) -> Reply:
    """A completion (whole or accumulated from a stream) as a Reply; without usage a
    streamed reply counts its chunks as completion tokens."""
    if not choices:
        raise TransientProviderError("the reply has no choices", "empty_reply")
    choice = choices[0]
    msg = choice.message
    calls = [
        ToolCallOut(c.id or "", c.function.name or "", c.function.arguments or "")
        for c in (msg.tool_calls or [])
        if getattr(c, "function", None) is not None
    ]
    return Reply(
        content=msg.content,
        tool_calls=calls,
        finish_reason=choice.finish_reason,
        prompt_tokens=usage.prompt_tokens if usage else 0,
        completion_tokens=usage.completion_tokens if usage else (chunks or 0),
        constrained=constrained,
        cached_tokens=_cached_tokens(usage),
    )


def _cached_tokens(usage: Any) -> int:
    details = getattr(usage, "prompt_tokens_details", None) if usage else None
    cached = getattr(details, "cached_tokens", None) if details else None
    return int(cached) if isinstance(cached, int) else 0
