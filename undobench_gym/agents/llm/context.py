"""Fitting a conversation into a small context window (4,096 tokens for the tiny models).

What is never cut: the system prompt's instructions, the task, and the newest message (the
current observation). What is cut, in this order, until the request fits: the tool
schemas' per-field descriptions and long tool descriptions; then the oldest observations,
replaced by a marker; then the reply's token limit, down to a floor. The conversation
itself is left whole (checkpoints and the paired prefix see the same messages): only the
request is trimmed, the same way every time for the same messages.

Tokens are estimated from characters (written by hand: servers do not share their
tokenizers through the chat API, and one request per estimate would double the traffic).
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# A first guess, on the safe side for JSON-heavy text; the agent learns the server's own
# ratio from its first context error (llama-cpp-python's chat templates HTML-escape every
# quote, which about doubles the tokens of a JSON observation).
CHARS_PER_TOKEN = 2.8
MESSAGE_OVERHEAD = 8  # role markers and separators a chat template adds per message
SAFETY_TOKENS = 64
MIN_REPLY_TOKENS = 96
DESCRIPTION_LIMIT = 160
TRIMMED = "[trimmed to fit the context window]"


def estimate_tokens(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, scale: float = 1.0
) -> int:
    chars = sum(len(json.dumps(m, ensure_ascii=False)) for m in messages)
    chars += len(json.dumps(tools, ensure_ascii=False)) if tools else 0
    return math.ceil(scale * chars / CHARS_PER_TOKEN) + MESSAGE_OVERHEAD * len(messages)


def compact_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same tools, same names and argument schemas, without per-field descriptions
    and with each tool's description cut to its first sentence (at most 160 chars)."""
    out = []
    for tool in tools:
        tool = copy.deepcopy(tool)
        fn = tool.get("function", tool)
        desc = str(fn.get("description", ""))
        first = desc.split(". ", 1)[0]
        fn["description"] = first[:DESCRIPTION_LIMIT]
        fn["parameters"] = _strip_descriptions(fn.get("parameters", {}))
        out.append(tool)
    return out


def _strip_descriptions(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            k: _strip_descriptions(v)
            for k, v in node.items()
            if not (k == "description" and isinstance(v, str))
        }
    if isinstance(node, list):
        return [_strip_descriptions(v) for v in node]
    return node


@dataclass
class Fitted:
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    max_tokens: int
    trimmed_messages: int = 0
    compacted_tools: bool = False
    scale: float = 1.0


def fit(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    *,
    window: int,
    max_tokens: int,
    tool_list: list[dict[str, Any]],
    system_prompt: Callable[[list[dict[str, Any]]], str] | None = None,
    protected: int = 2,
    scale: float = 1.0,
) -> Fitted:
    """Trim a request to `window` tokens. `tool_list` is the agent's tools; when they are
    written into the system prompt (F2), `system_prompt(tools)` renders it again with the
    compacted ones. The first `protected` messages (system prompt, task) and the last
    one are never cut."""
    out = Fitted(list(messages), tools, max_tokens, scale=scale)
    if window <= 0 or _fits(out, window):
        return out
    small = compact_tools(tool_list)
    out.compacted_tools = True
    if tools:
        out.tools = small
    if system_prompt is not None and out.messages and out.messages[0].get("role") == "system":
        out.messages[0] = {**out.messages[0], "content": system_prompt(small)}
    for i in range(protected, len(out.messages) - 1):
        if _fits(out, window):
            break
        message = out.messages[i]
        if message.get("role") in ("tool", "user") and message.get("content") != TRIMMED:
            out.messages[i] = {**message, "content": TRIMMED}
            out.trimmed_messages += 1
    used = estimate_tokens(out.messages, out.tools, scale) + SAFETY_TOKENS
    out.max_tokens = max(MIN_REPLY_TOKENS, min(max_tokens, window - used))
    return out


def _fits(f: Fitted, window: int) -> bool:
    return estimate_tokens(f.messages, f.tools, f.scale) + f.max_tokens + SAFETY_TOKENS <= window
