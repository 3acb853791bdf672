"""An env tool schema as a Python method, the form TRL's environment mode reads tools in.

TRL (`GRPOTrainer(environment_factory=...)`) lists an environment's public methods and asks
transformers' `get_json_schema` for each one's schema, which it derives from the signature,
the type hints and a Google-style docstring. UndoBench tools exist only as JSON schemas (from
the services' OpenAPI documents), so each becomes a method whose signature, hints and
docstring say what the schema says; calling it sends one env step with the arguments as given
(the env validates them, so a bad call is an error observation, never an exception).
Nested object and array shapes shrink to `dict` and `list`: the chat template shows the model
the parameter names, types and descriptions, and the env still checks the full schema.
"""

from __future__ import annotations

import inspect
import json
import keyword
from collections.abc import Callable
from typing import Any

_JSON_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "object": dict,
    "array": list,
}


def _py_type(prop: dict[str, Any]) -> Any:
    kind = prop.get("type")
    if isinstance(kind, list):  # ["string", "null"]: the first non-null type
        kind = next((k for k in kind if k != "null"), "string")
    if kind is None and isinstance(prop.get("enum"), list) and prop["enum"]:
        kind = {str: "string", int: "integer", float: "number", bool: "boolean"}.get(
            type(prop["enum"][0]), "string"
        )
    return _JSON_TYPES.get(str(kind), str)


def _line(text: str) -> str:
    return " ".join(str(text).split()) or "(no description)"


def _docstring(fn: dict[str, Any], props: dict[str, Any]) -> str:
    lines = [_line(fn.get("description") or fn["name"]), ""]
    if props:
        lines.append("Args:")
        for name, prop in props.items():
            desc = _line(prop.get("description") or name)
            enum = prop.get("enum")
            if isinstance(enum, list) and enum:
                desc += f" (choices: {json.dumps(enum)})"
            lines.append(f"    {name}: {desc}")
    return "\n".join(lines)


def tool_method(schema: dict[str, Any], call: Callable[[Any, str, dict[str, Any]], str]) -> Any:
    """A method named after the tool of one `info["tools"]` entry; `call(self, name,
    arguments)` does the work. Raises ValueError for a schema no method can carry (a name or
    parameter that is not a Python identifier), which is a catalogue defect."""
    fn = schema["function"]
    name = str(fn["name"])
    params = fn.get("parameters") or {}
    props: dict[str, Any] = dict(params.get("properties") or {})
    required = set(params.get("required") or [])
    for n in [name, *props]:
        if not n.isidentifier() or keyword.iskeyword(n):
            raise ValueError(f"tool {name!r}: {n!r} cannot be a Python parameter name")
    hints: dict[str, Any] = {}
    sig_params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    # Required parameters first: a signature keeps defaulted ones after the others.
    for pname in sorted(props, key=lambda p: p not in required):
        typ = _py_type(props[pname])
        if pname in required:
            hints[pname] = typ
            sig_params.append(
                inspect.Parameter(pname, inspect.Parameter.KEYWORD_ONLY, annotation=typ)
            )
        else:
            hints[pname] = typ | None
            sig_params.append(
                inspect.Parameter(
                    pname, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=typ | None
                )
            )
    hints["return"] = str

    def method(self: Any, **arguments: Any) -> str:
        given = {k: v for k, v in arguments.items() if v is not None or k in required}
        return call(self, name, given)

    method.__name__ = name
    method.__qualname__ = name
    method.__doc__ = _docstring(fn, props)
    method.__annotations__ = hints
    method.__signature__ = inspect.Signature(sig_params, return_annotation=str)  # type: ignore[attr-defined]
    return method
