"""Model backends: one `complete()` call per model turn, the same reply shape for all.

`openai` talks to any OpenAI-compatible chat-completions server (vLLM, llama.cpp, SGLang,
a hosted API). Local backends (`hf`, `vllm` in-process) live in `local.py`. A backend raises
`TransientProviderError` for what is worth retrying (connection, timeout, 429, 5xx) and
`ProviderError` for what is not; the agent does the retrying, before any tool dispatch, and
raises `ProviderUnavailable` (an infrastructure error for the sweep) when retries run out.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Protocol

from undobench_gym.errors import ProviderError as ProviderError  # re-exported
from undobench_gym.errors import ProviderUnavailable as ProviderUnavailable
from undobench_gym.errors import UndoBenchError


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


@dataclass(frozen=True)
class Request:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    seed: int
    temperature: float
    max_tokens: int
    stop: list[str] | None = None


class Backend(Protocol):
    kind: str  # "openai" | "vllm" | "hf": the first part of the agent's name
    model: str

    def complete(self, request: Request) -> Reply: ...


class OpenAIBackend:
    """Chat completions over HTTP with the `openai` client (its own retries are off: the
    agent retries, counts, and never dispatches a tool call twice)."""

    kind = "openai"

    def __init__(
        self, model: str, base_url: str, *, timeout_s: float = 120.0, api_key: str | None = None
    ) -> None:
        try:
            import openai
        except ImportError as exc:
            raise UndoBenchError(
                "openai:MODEL@BASE_URL needs the openai client: pip install 'undobench-gym[llm]'"
            ) from exc
        self.model, self.base_url = model, base_url
        self._openai = openai
        self._client = openai.OpenAI(
            base_url=base_url,
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY",
            max_retries=0,
            timeout=timeout_s,
        )

    def complete(self, request: Request) -> Reply:
        oa = self._openai
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": request.messages,
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
            "seed": request.seed,
        }
        if request.tools:
            kwargs["tools"] = request.tools
            kwargs["tool_choice"] = "auto"
        if request.stop:
            kwargs["stop"] = request.stop
        try:
            resp = self._client.chat.completions.create(**kwargs)
        except oa.APITimeoutError as exc:
            raise TransientProviderError(f"timeout: {exc}", "timeout") from exc
        except oa.APIConnectionError as exc:
            raise TransientProviderError(f"connection: {exc}", "connection") from exc
        except oa.RateLimitError as exc:
            raise TransientProviderError(f"rate limited: {exc}", "rate_limit") from exc
        except oa.APIStatusError as exc:
            if exc.status_code >= 500:
                raise TransientProviderError(
                    f"HTTP {exc.status_code}: {exc}", "server_error"
                ) from exc
            raise ProviderError(
                f"{self.base_url} refused the request (HTTP {exc.status_code}): {exc}. "
                f"Check that the model name {self.model!r} is one `GET /models` lists and, "
                "for F1, that the server enables tool calls (vLLM: --enable-auto-tool-choice "
                "--tool-call-parser NAME)."
            ) from exc
        if not resp.choices:
            raise TransientProviderError("the reply has no choices", "empty_reply")
        choice = resp.choices[0]
        msg = choice.message
        calls = [
            ToolCallOut(c.id or "", c.function.name or "", c.function.arguments or "")
            for c in (msg.tool_calls or [])
            if getattr(c, "function", None) is not None
        ]
        usage = resp.usage
        return Reply(
            content=msg.content,
            tool_calls=calls,
            finish_reason=choice.finish_reason,
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
        )
