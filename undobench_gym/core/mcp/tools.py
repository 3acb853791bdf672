"""The env's tools as MCP tools, and an env observation as an MCP tool result.

One rule each way, so the MCP front end cannot drift from the direct path:
- an `info["tools"]` entry (a function-tool schema with public annotations) becomes an MCP
  `Tool` with the same name, description and input schema; its annotations are the three
  MCP hints from the catalogue (`readOnlyHint`, `destructiveHint`, `idempotentHint`), or
  none at all when a run switches them off (the hint ablation). `compensatingHint` is the
  project's own label, not an MCP hint, and the REST route stays with the harness.
- an observation (JSON text) becomes a `CallToolResult` whose only content is that exact
  text, so an MCP client reads what an in-process agent reads. A transport error (the
  connection reset or timed out, as a real client sees it) or an invalid action is an
  error result (`isError: true`) with the same text; an HTTP answer, 4xx/5xx included, is
  the service's answer and a normal result.
- and back, for an MCP client that drives a function-calling model: an MCP `Tool` becomes
  the function-tool schema the model gets (`tool_schema`).
"""

from __future__ import annotations

import json
from typing import Any

from mcp import types

from undobench_gym.core.mcp.sdk import wire

#: The MCP hints the catalogue fills in; anything else in `annotations` stays private.
MCP_HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint")


def mcp_tool(schema: dict[str, Any], *, annotations: bool = True) -> types.Tool:
    """One `info["tools"]` entry as an MCP tool."""
    fn = schema["function"]
    hints = schema.get("annotations") if annotations else None
    notes = None
    if isinstance(hints, dict):
        notes = types.ToolAnnotations(**{k: hints[k] for k in MCP_HINTS if k in hints})
    return types.Tool(
        name=fn["name"],
        description=fn.get("description"),
        inputSchema=fn.get("parameters") or {"type": "object", "properties": {}},
        annotations=notes,
    )


def is_error(observation: str) -> bool:
    """A transport error or an invalid action: what a client cannot treat as an answer."""
    try:
        value = json.loads(observation)
    except json.JSONDecodeError:
        return False
    return isinstance(value, dict) and isinstance(value.get("error"), dict)


def tool_result(observation: str) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=observation)],
        isError=is_error(observation),
    )


def error_result(kind: str, message: str) -> types.CallToolResult:
    """An error the front end itself answers (no episode running, the episode is over)."""
    text = json.dumps({"error": {"type": kind, "message": message}})
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], isError=True)


def result_text(result: types.CallToolResult) -> str:
    """The observation text of a result (its text blocks joined)."""
    return "".join(b.text for b in result.content if isinstance(b, types.TextContent))


def tool_schema(tool: types.Tool) -> dict[str, Any]:
    """An MCP tool as the function-tool schema an LLM agent takes (the inverse of
    `mcp_tool`: the same name, description and parameters, in the same key order), with the
    hints it was listed with under `annotations`."""
    listed = wire(tool)  # the wire names (inputSchema, readOnlyHint) on either SDK line
    schema: dict[str, Any] = {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description or "",
            "parameters": listed["inputSchema"],
        },
    }
    if "annotations" in listed:
        schema["annotations"] = {k: v for k, v in listed["annotations"].items() if k in MCP_HINTS}
    return schema
