"""Reading actions out of model text: ReAct `Action:` lines (F2) and tool calls written as
text by local backends (F1 on hf/vllm). Nothing here repairs bad JSON: what cannot be read
goes to the env as it is, and the env answers with its own invalid-action observation."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_ACTION = re.compile(r"action\s*:", re.IGNORECASE)
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*")
_HERMES = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)


def balanced_object(text: str, start: int = 0) -> tuple[str, int] | None:
    """The first `{...}` at or after `start` whose braces balance (string-aware), with the
    index just past it; None when no object closes."""
    i = text.find("{", start)
    while i != -1:
        depth, in_str, escaped = 0, False, False
        for j in range(i, len(text)):
            ch = text[j]
            if in_str:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == '"':
                    in_str = False
            elif ch == '"':
                in_str = True
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    return text[i : j + 1], j + 1
        return None  # the first "{" never closes, so no later one can be a whole object
    return None


@dataclass(frozen=True)
class ReactParse:
    """`action` is the parsed object, or None; `raw` is what goes to the env when it is None."""

    action: dict[str, Any] | None
    raw: str


def parse_react(text: str, *, json_actions: bool = False) -> ReactParse:
    """The first JSON object after the last `Action:` marker, code fences tolerated. With
    `json_actions` (replies constrained to `{"thought", "tool", "arguments"}`) a reply
    without the marker is read as that object."""
    markers = list(_ACTION.finditer(text))
    if not markers and json_actions:
        return _json_action(text)
    if not markers:
        return ReactParse(None, text.strip())
    return _first_object(_FENCE.sub("", text[markers[-1].end() :]))


def _first_object(text: str) -> ReactParse:
    """The first balanced JSON object in `text`, parsed; else what goes to the env."""
    found = balanced_object(text)
    if found is None:
        return ReactParse(None, text.strip())
    try:
        value = json.loads(found[0])
    except json.JSONDecodeError:
        return ReactParse(None, found[0])
    return ReactParse(value if isinstance(value, dict) else None, found[0])


@dataclass(frozen=True)
class TextToolCall:
    name: str
    arguments: str  # raw JSON text, as a chat-completions server would return it


def _as_call(obj: Any) -> TextToolCall | None:
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    return TextToolCall(obj["name"], args if isinstance(args, str) else json.dumps(args))


def parse_text_tool_calls(text: str) -> tuple[str, list[TextToolCall]]:
    """Tool calls a model wrote as text: Hermes/Qwen `<tool_call>{...}</tool_call>` blocks, or
    one bare `{"name": ..., "arguments"|"parameters": ...}` object (Llama 3 JSON style).
    Returns (the remaining content, the calls). A block whose JSON is broken still becomes a
    call named by what can be read, with its raw text as arguments, so the env reports it."""
    calls: list[TextToolCall] = []
    if "<tool_call>" in text:
        for m in _HERMES.finditer(text):
            body = m.group(1).strip()
            value = _loads_call(body)
            if value is not None:
                call = _as_call(value)
            else:
                name = re.search(r'"name"\s*:\s*"([^"]*)"', body)
                call = TextToolCall(name.group(1) if name else "", body)
            if call is not None:
                calls.append(call)
        return text[: text.find("<tool_call>")].strip(), calls
    stripped = _FENCE.sub("", text).strip()
    # Qwen2.5 also copies only the template's opening `{{`: one stray brace, then the call.
    for body in (stripped, stripped[1:] if stripped.startswith("{{") else ""):
        found = balanced_object(body) if body.startswith("{") else None
        if found is not None and not body[found[1] :].strip():
            call = _as_call(_loads_call(found[0]))
            if call is not None:
                return "", [call]
    return text.strip(), []


def _loads_call(body: str) -> Any:
    """A call object, also when written with doubled outer braces: Qwen2.5's own chat
    template shows the format as `{{"name": ..., "arguments": ...}}` (Jinja-escaped braces
    printed literally), and its models copy them."""
    doubled = body.startswith("{{")
    for candidate in (
        body,
        body[1:-1] if doubled and body.endswith("}}") else "",
        body[1:] if doubled else "",
    ):
        if not candidate:
            continue
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            continue
    return None


def _json_action(text: str) -> ReactParse:
    parsed = _first_object(_FENCE.sub("", text))
    value = parsed.action
    if value is None or "tool" not in value:
        return ReactParse(None, parsed.raw)
    return ReactParse({"tool": value["tool"], "arguments": value.get("arguments", {})}, parsed.raw)
