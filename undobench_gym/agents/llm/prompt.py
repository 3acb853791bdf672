"""The one system prompt both frameworks use, and the ReAct tool listing of F2.

Deliberately neutral: it says what the agent is and how to end, and nothing about faults,
retries, idempotency or being benchmarked, so any recovery measured is the model's own.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

SYSTEM_PROMPT = (
    "You are an operations assistant. You carry out tasks on a company's systems by calling "
    "the tools you are given; each tool call is a request to a live service, and you see its "
    "result. Use the results to decide what to do next. "
    # v2: how a capable harness briefs a small model on multi-step work. Still
    # nothing about faults, retries or idempotency: only the task's own steps and how to
    # read a refused call's validation message.
    "A task usually needs several calls: do its steps in the order the task gives, one "
    "call at a time, with the exact identifiers, amounts and text that the task and the "
    "results give. If a call is refused because its arguments are invalid, read the "
    "message, correct the arguments and call the tool again. "
    # v3: the finish statuses, escalation included; still no advice on faults.
    "When the task is complete, call the `finish` tool with a status and a short summary: "
    '"done" when it is done, "gave_up" if it cannot be done, "escalated" to hand it over '
    "to a human (say in the summary what they must check)."
)
#: Recorded with every LLM trial (`agent_config.prompt`), so results name their prompt.
PROMPT_VERSION = "v3"


def prompt_digest() -> str:
    """SHA-256 (first 16 hex digits) of the system prompt and the F2 formats."""
    text = "\n".join([SYSTEM_PROMPT, REACT_FORMAT, REACT_JSON_FORMAT, NUDGE])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


NUDGE = "Call one of the tools, or finish."

EXTRA_CALL_NOT_EXECUTED = (
    "Not executed: one tool call is executed per turn, and this was not the first call of the turn."
)

REACT_FORMAT = """Reply in exactly this format, with one action per reply:

Thought: <your reasoning>
Action: {"tool": "<tool name>", "arguments": {<the tool's arguments>}}

The Action is a single JSON object. After each action you receive its result as
"Observation: ...". To end, use the finish tool, e.g.
Action: {"tool": "finish", "arguments": {"status": "done", "summary": "..."}}"""


def describe_tools(tools: list[dict[str, Any]]) -> str:
    """OpenAI function-tool schemas as plain text: name, description, JSON schema."""
    lines = []
    for tool in tools:
        fn = tool.get("function", tool)
        schema = json.dumps(fn.get("parameters", {}), sort_keys=True, separators=(",", ":"))
        lines.append(f"- {fn['name']}: {fn.get('description', '').strip()}\n  arguments: {schema}")
    return "\n".join(lines)


REACT_JSON_FORMAT = """Reply with exactly one JSON object per reply, one action each:

{"thought": "<your reasoning>", "tool": "<tool name>", "arguments": {<the tool's arguments>}}

After each action you receive its result as "Observation: ...". To end, use the finish tool:
{"thought": "...", "tool": "finish", "arguments": {"status": "done", "summary": "..."}}"""


def react_system_prompt(tools: list[dict[str, Any]], *, json_actions: bool = False) -> str:
    """`json_actions`: the reply is constrained to one JSON object (F2 with tool_choice
    "required" on a server that takes a JSON schema), so the prompt asks for that shape."""
    fmt = REACT_JSON_FORMAT if json_actions else REACT_FORMAT
    return f"{SYSTEM_PROMPT}\n\nTools:\n{describe_tools(tools)}\n\n{fmt}"


def action_schema(tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON schema of one F2 action: a thought, then one of the tools with its own
    argument schema (so a constrained server can only produce calls the env accepts)."""
    choices = []
    for tool in tools:
        fn = tool.get("function", tool)
        choices.append(
            {
                "type": "object",
                "properties": {
                    "thought": {"type": "string"},
                    "tool": {"const": fn["name"]},
                    "arguments": fn.get("parameters", {"type": "object"}),
                },
                "required": ["thought", "tool", "arguments"],
            }
        )
    return {"anyOf": choices}


def tool_result_message(tool: str, observation: str) -> str:
    """F1 with tool_results="user": a tool result as a user message."""
    return f"Result of {tool}: {observation}"


def observation_message(observation: str) -> str:
    return f"Observation: {observation}"


# Servers compile tool schemas into grammars (llama.cpp for tool calls and JSON output,
# vLLM's structured outputs). There, patterns are heavy, a long maxLength explodes
# (llama.cpp spells maxLength 2000 as 2000 nested optionals, and its server dies when the
# model picks that tool), and a string without one lets a small model write until the
# context is full (seen: 3,211 tokens of one customer id). So the model is offered each
# string with at most STRING_LIMIT characters and no pattern; the env still checks the
# service's own limits.
STRING_LIMIT = 512
_DROPPED = {"pattern", "format"}


#: A pattern that only lists literal words, `^(usd|eur|gbp)$`: the API's own enumeration.
_ALTERNATION = re.compile(r"\^\(?((?:[A-Za-z0-9_-]|\\\.)+(?:\|(?:[A-Za-z0-9_-]|\\\.)+)*)\)?\$")


def pattern_enum(pattern: str) -> list[str] | None:
    """The values a pattern of literal alternatives allows (`^(usd|eur|gbp)$` -> usd, eur,
    gbp), or None for any other pattern."""
    m = _ALTERNATION.fullmatch(pattern)
    return [v.replace("\\.", ".") for v in m.group(1).split("|")] if m else None


def loose_schema(node: Any) -> Any:
    """A JSON schema as the model is offered it: no pattern or format, and every string
    capped at STRING_LIMIT characters (types, enums, required fields, nesting stay). A
    pattern that only lists literal values becomes that `enum`: the model is told the
    values the service takes (`usd`, not `USD`), and an enum is a cheap grammar."""
    if isinstance(node, dict):
        out = {
            k: loose_schema(v)
            for k, v in node.items()
            if not (k in _DROPPED and isinstance(v, str))
        }
        values = pattern_enum(node["pattern"]) if isinstance(node.get("pattern"), str) else None
        if values and "enum" not in out:
            out["enum"] = values
        if out.get("type") == "string" and "enum" not in out and "const" not in out:
            limit = out.get("maxLength")
            out["maxLength"] = min(limit, STRING_LIMIT) if isinstance(limit, int) else STRING_LIMIT
        return out
    if isinstance(node, list):
        return [loose_schema(v) for v in node]
    return node
