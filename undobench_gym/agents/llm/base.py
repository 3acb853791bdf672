"""What F1 and F2 share: configuration, seeded sampling, provider retries, stats, and the
checkpoint/restore of the conversation (for POST_ACK_PRE_CHECKPOINT)."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from undobench_gym.agents.llm.backends import (
    Backend,
    ProviderError,
    ProviderUnavailable,
    Reply,
    Request,
    TransientProviderError,
)
from undobench_gym.agents.llm.context import estimate_tokens, fit
from undobench_gym.agents.llm.prompt import PROMPT_VERSION, loose_schema, prompt_digest
from undobench_gym.contract.errors import UndoBenchError
from undobench_gym.contract.seeding import derive_seed

ENV_PREFIX = "UNDOBENCH_LLM_"
TOOL_CHOICES = ("auto", "required")
TOOL_RESULTS = ("tool", "user")
# "... you requested 4352 tokens (4096 in the messages, 256 in the completion)" (OpenAI,
# llama-cpp-python, vLLM word it alike)
_COUNTED = re.compile(r"(\d+) in the messages")
RECORDED = (
    "temperature",
    "max_tokens",
    "max_text_replies",
    "tool_choice",
    "tool_results",
    "text_tool_calls",
    "replay",
)


@dataclass(frozen=True)
class LLMConfig:
    """Sampling and retry settings; `from_env()` reads UNDOBENCH_LLM_<FIELD> (upper case)."""

    temperature: float = 0.0
    max_tokens: int = 1024
    max_text_replies: int = 2  # F1: consecutive replies without a tool call before handing over
    retries: int = 4  # provider retries per model turn (so at most retries + 1 requests)
    backoff_s: float = 0.5  # first wait; doubles per retry
    backoff_max_s: float = 8.0
    timeout_s: float = 120.0  # per request
    hf_threads: int = 0  # hf: torch CPU threads (0: torch's default; 1 is faster on a busy CPU)
    # hf: keep the key/value cache of the last conversation and re-use its longest common
    # prefix with the next request (1), or encode every prompt from scratch (0)
    hf_prefix_cache: int = 1
    # "auto" (the measured default) or "required": a tool call every turn (F1: the
    # server's tool_choice; F2: JSON-schema constrained actions where the server can)
    tool_choice: str = "auto"
    # F1: how tool results go back, "tool" messages (the API's way) or "user" messages
    # (for servers whose chat template drops tool messages, as llama-cpp-python's
    # chatml-function-calling does)
    tool_results: str = "tool"
    # The server's context window in tokens (0: ask the server, else do not trim)
    context_tokens: int = 0
    # Stream replies (openai: backend), cut at max_tokens by the agent (1) or not (0)
    stream: int = 0
    # F1: a reply whose whole content is one tool call written as JSON text (fenced or
    # bare, or Hermes blocks the server did not parse) is read as that call (1) or as a
    # text reply (0)
    text_tool_calls: int = 1
    # The fault episode takes the control episode's reply to a request it sends unchanged
    # (1), so that a pair's two episodes are the same until the fault shows, or samples it
    # again (0: a batching server's noise can then part them before the fault)
    replay: int = 1

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> LLMConfig:
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = env.get(ENV_PREFIX + f.name.upper())
            if raw is None:
                continue
            kind = {"int": int, "float": float, "str": str}[
                str(getattr(f.type, "__name__", f.type))
            ]
            try:
                values[f.name] = kind(raw)
            except ValueError:
                raise UndoBenchError(
                    f"{ENV_PREFIX}{f.name.upper()}={raw!r} is not a valid {kind.__name__}"
                ) from None
        config = cls(**values)
        config.check()
        return config

    def check(self) -> None:
        if self.temperature < 0 or self.max_tokens < 1 or self.max_text_replies < 1:
            raise UndoBenchError(
                "LLM config: temperature must be >= 0, max_tokens and max_text_replies >= 1"
            )
        if self.retries < 0 or self.backoff_s < 0 or self.timeout_s <= 0 or self.hf_threads < 0:
            raise UndoBenchError(
                "LLM config: retries, backoff_s, hf_threads must be >= 0 and timeout_s > 0"
            )
        if self.tool_choice not in TOOL_CHOICES:
            raise UndoBenchError(
                f"LLM config: tool_choice is one of {', '.join(TOOL_CHOICES)}, "
                f"not {self.tool_choice!r}"
            )
        if self.tool_results not in TOOL_RESULTS:
            raise UndoBenchError(
                f"LLM config: tool_results is one of {', '.join(TOOL_RESULTS)}, "
                f"not {self.tool_results!r}"
            )
        if self.context_tokens < 0:
            raise UndoBenchError("LLM config: context_tokens must be >= 0 (0: ask the server)")

    def record(self) -> dict[str, Any]:
        """What a trial records of the settings that change the agent's behaviour."""
        recorded = {f.name: getattr(self, f.name) for f in fields(self) if f.name in RECORDED}
        return recorded | {"prompt": f"{PROMPT_VERSION}:{prompt_digest()}"}


def turn_seed(task_instance: str, turn: int) -> int:
    """The sampling seed of one model turn: the same in the control and the fault episode of
    a pair (task_instance is shared) until their conversations diverge."""
    return derive_seed(task_instance, "llm-turn", turn) % 2**31


STAT_KEYS = (
    "requests",
    "provider_errors",
    "retries",
    "prompt_tokens",
    "completion_tokens",
    "actions",
    "text_replies",
    "nudges",
    "escalated_after_text",
    "extra_tool_calls",
    "malformed_arguments",
    "parse_failures",
    "unconstrained_replies",
    "trimmed_messages",
    "compacted_tool_schemas",
    "context_refits",
    "text_tool_calls",
    "cached_prompt_tokens",
    "replayed_replies",
)


def request_key(request: Request) -> str:
    """What makes two model requests the same request: every field the server reads."""
    text = json.dumps(
        [
            request.messages,
            request.tools,
            request.seed,
            request.temperature,
            request.max_tokens,
            request.stop,
            request.tool_choice,
            request.response_schema,
        ],
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Conversation:
    """Everything an episode's agent remembers; checkpoint() deep-copies it."""

    task_instance: str = ""
    tools: list[dict[str, Any]] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    turn: int = 0
    pending: list[str] = field(default_factory=list)  # F1: tool_call ids awaiting results
    pending_names: list[str] = field(default_factory=list)  # F1: their tool names
    acted: bool = False  # F2: an action was returned, so the next observation answers it


def model_tools(schemas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tool schemas as a model server takes them: `type` and `function` only. The MCP
    hints and the REST route beside them in `info["tools"]` are not part of the
    chat-completions tool format (a strict server rejects them), and the prompt stays the
    one the published runs used. Length and pattern limits stay with the env's check
    (`loose_schema`: servers that compile schemas into grammars die on them)."""
    return [
        {
            "type": schema.get("type", "function"),
            "function": {
                **schema["function"],
                "parameters": loose_schema(schema["function"].get("parameters", {})),
            },
        }
        for schema in schemas
        if isinstance(schema, dict) and isinstance(schema.get("function"), dict)
    ]


class LLMAgent:
    """Base of F1/F2. `stats` counts over the agent's life, `episode_stats` per episode."""

    framework = ""
    #: Each turn samples with the seed of the task instance and the turn (`turn_seed`), the
    #: same in the control and the fault episode, so the control does not depend on the
    #: scenario: a sweep runs one control for a workflow's scenarios of one method and seed
    #: (`undobench run --own-controls` to not). Not `deterministic`: a server's batching may
    #: still move the logits, so two runs of one seed are two samples.
    seeded_controls = True

    def __init__(
        self,
        backend: Backend,
        config: LLMConfig | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.backend = backend
        self.config = config or LLMConfig()
        self.config.check()
        self.model = backend.model
        self.name = f"{backend.kind}:{backend.model}@{self.framework}"
        self.stats: Counter[str] = Counter({k: 0 for k in STAT_KEYS})
        self.episode_stats: Counter[str] = Counter({k: 0 for k in STAT_KEYS})
        self.conv = Conversation()
        self._sleep = sleep
        self._replies: dict[str, Reply] | None = None
        self._record_replies = False

    def use_replies(self, replies: dict[str, Any] | None, *, record: bool = False) -> None:
        """The harness's reply memo of one control episode (`pairing.run_pair`): the control
        episode records into it (`record`), and its fault episodes answer a request they
        send unchanged from it instead of sampling again. A server that batches requests
        does not reproduce a seeded sample bit for bit, so without this the two episodes
        can part before the fault and the pair is no counterfactual. Only the control's
        replies are kept: two fault episodes never share theirs. None: no memo."""
        self._replies = replies if self.config.replay else None
        self._record_replies = record

    # ---- harness protocol ---------------------------------------------------------

    def reset_task(self, info: dict[str, Any]) -> None:
        self.episode_stats = Counter({k: 0 for k in STAT_KEYS})
        self.conv = Conversation(
            task_instance=str(info["task_instance"]), tools=model_tools(info["tools"])
        )
        self.conv.messages = self.initial_messages(info)

    def checkpoint(self) -> Conversation:
        return copy.deepcopy(self.conv)

    def restore(self, state: Conversation) -> None:
        self.conv = copy.deepcopy(state)

    def initial_messages(self, info: dict[str, Any]) -> list[dict[str, Any]]:
        raise NotImplementedError

    # ---- shared machinery ---------------------------------------------------------

    def count(self, key: str, n: int = 1) -> None:
        self.stats[key] += n
        self.episode_stats[key] += n

    # F2 writes the tools into its system prompt, and renders it again for trimming.
    system_prompt: Callable[[list[dict[str, Any]]], str] | None = None

    def context_window(self) -> int:
        """Tokens the server's context holds: the configured size, else what the server
        reports (0: unknown, so nothing is trimmed)."""
        if self.config.context_tokens:
            return self.config.context_tokens
        if self._window is None:
            probe = getattr(self.backend, "context_window", None)
            self._window = int(probe()) if callable(probe) else 0
        return self._window

    _window: int | None = None

    def complete(
        self,
        *,
        tools: list[dict[str, Any]] | None,
        stop: list[str] | None = None,
        tool_choice: str = "auto",
        response_schema: dict[str, Any] | None = None,
    ) -> Reply:
        """One model turn, retried with bounded exponential backoff on transient provider
        errors. Nothing has been dispatched yet, so a retry cannot repeat a tool call."""
        seed = turn_seed(self.conv.task_instance, self.conv.turn)
        self.conv.turn += 1
        refits = 0
        while True:
            fitted = fit(
                self.conv.messages,
                tools,
                window=self.context_window(),
                max_tokens=self.config.max_tokens,
                tool_list=self.conv.tools,
                system_prompt=self.system_prompt,
                scale=self._token_scale,
            )
            request = Request(
                messages=copy.deepcopy(fitted.messages),
                tools=fitted.tools,
                seed=seed,
                temperature=self.config.temperature,
                max_tokens=fitted.max_tokens,
                stop=stop,
                tool_choice=tool_choice,
                response_schema=response_schema,
            )
            memo = self._replies
            key = request_key(request) if memo is not None else ""
            if memo is not None and key in memo:
                self.count("replayed_replies")
                return copy.deepcopy(memo[key])
            try:
                reply = self._send(request)
            except ProviderError as exc:
                # The server counted more tokens than the estimate: learn its ratio and
                # fit again, twice at most (a window too small for the task, the tools
                # and the current observation still fails: the agent's give-up).
                counted = _COUNTED.search(str(exc))
                if counted is None or refits >= 2 or not self.context_window():
                    raise
                estimate = estimate_tokens(fitted.messages, fitted.tools)
                self._token_scale *= max(1.25, 1.1 * int(counted[1]) / max(estimate, 1))
                refits += 1
                self.count("context_refits")
                continue
            self.count("trimmed_messages", fitted.trimmed_messages)
            self.count("compacted_tool_schemas", int(fitted.compacted_tools))
            if memo is not None and self._record_replies:
                memo[key] = copy.deepcopy(reply)
            return reply

    _token_scale = 1.0  # server tokens per estimated token, learnt from context errors

    def _send(self, request: Request) -> Reply:
        attempt = 0
        while True:
            self.count("requests")
            try:
                reply = self.backend.complete(request)
            except TransientProviderError as exc:
                self.count("provider_errors")
                if attempt >= self.config.retries:
                    raise ProviderUnavailable(
                        f"{self.name}: the model provider kept failing ({exc.kind}: {exc}) "
                        f"after {attempt} retries; check the server, or raise "
                        f"{ENV_PREFIX}RETRIES"
                    ) from exc
                self._sleep(min(self.config.backoff_max_s, self.config.backoff_s * 2**attempt))
                attempt += 1
                self.count("retries")
                continue
            self.count("prompt_tokens", reply.prompt_tokens)
            self.count("completion_tokens", reply.completion_tokens)
            self.count("cached_prompt_tokens", reply.cached_tokens)
            return reply
