"""The public view of a tool: everything a recovery method may know about it.

Built from one entry of `info["tools"]` as `reset` returns it, which is what every agent
gets: `function` (name, description, JSON-schema parameters, an `idempotency_key` property
where the endpoint takes an Idempotency-Key), `annotations` (MCP tool annotations:
`readOnlyHint`, `destructiveHint`, `idempotentHint`, plus `compensatingHint` and
`resumingHint`) and `http`
(method and path template, as in the service's public OpenAPI document). Nothing here
knows the harness's effect identity, operation names or oracle multiplicities.

A missing annotation takes the MCP default (not read-only, destructive, not idempotent:
the assumptions that make a method cautious); a schema without `http` gives a tool no
derivation rule can use (no verifier, no compensation), but B0, B2 and B5 still work.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

#: The finish tool's name: every episode offers it, and it is not a service call.
FINISH = "finish"
KEY_ARG = "idempotency_key"
#: Methods whose non-path arguments travel in the query string (the rest send a JSON body).
QUERY_METHODS = ("GET", "HEAD", "DELETE")

Effect = Literal["read_only", "set", "create_unique", "irreversible_send", "additive"]
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class PublicTool:
    """One tool as a client of the service sees it."""

    name: str
    description: str
    method: str  # "" when the schema names no route
    path: str  # the route template, e.g. /v1/charges/{charge_id}
    path_params: tuple[str, ...]
    query_params: tuple[str, ...]
    body_params: tuple[str, ...]
    required: frozenset[str]
    read_only: bool
    destructive: bool
    idempotent: bool
    compensating: bool
    accepts_key: bool
    parameters: dict[str, Any] = field(hash=False, compare=False)
    resuming: bool = False  # finishes a record a crash left half-done (`resumingHint`)

    @property
    def effect(self) -> Effect:
        """The effect class the hints imply (MCP sense): idempotent and destructive is a
        `set` (overwrites), idempotent only a `create_unique` (a repeat adds nothing),
        destructive only an `irreversible_send`, neither an `additive` effect."""
        if self.read_only:
            return "read_only"
        if self.idempotent:
            return "set" if self.destructive else "create_unique"
        return "irreversible_send" if self.destructive else "additive"

    @property
    def carried(self) -> frozenset[str]:
        """The arguments a call of this tool can send (the key excluded: it is no content)."""
        return frozenset((*self.path_params, *self.query_params, *self.body_params))

    @property
    def is_item(self) -> bool:
        """The route addresses one resource: its path ends in a path parameter."""
        return self.path.rstrip("/").endswith("}")

    @property
    def routed(self) -> bool:
        return bool(self.method and self.path)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _flag(annotations: dict[str, Any], name: str, default: bool) -> bool:
    value = annotations.get(name)
    return value if isinstance(value, bool) else default


def from_schema(schema: Any) -> PublicTool | None:
    """The public view of one `info["tools"]` entry; None for the finish tool or an entry
    that names no function."""
    if not isinstance(schema, dict):
        return None
    fn = schema.get("function")
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or fn["name"] == FINISH:
        return None
    params = _dict(fn.get("parameters"))
    props = _dict(params.get("properties"))
    notes = _dict(schema.get("annotations"))
    http = _dict(schema.get("http"))
    method = str(http.get("method") or "").upper()
    path = str(http.get("path") or "")
    in_path = tuple(n for n in _PLACEHOLDER.findall(path) if n in props)
    rest = tuple(n for n in props if n not in in_path and n != KEY_ARG)
    read_only = _flag(notes, "readOnlyHint", False)
    return PublicTool(
        name=fn["name"],
        description=str(fn.get("description") or ""),
        method=method,
        path=path,
        path_params=in_path,
        query_params=rest if method in QUERY_METHODS else (),
        body_params=() if method in QUERY_METHODS else rest,
        required=frozenset(n for n in params.get("required", []) if isinstance(n, str)),
        read_only=read_only,
        destructive=not read_only and _flag(notes, "destructiveHint", True),
        idempotent=read_only or _flag(notes, "idempotentHint", False),
        compensating=_flag(notes, "compensatingHint", False),
        accepts_key=KEY_ARG in props,
        parameters=params,
        resuming=_flag(notes, "resumingHint", False),
    )


def public_tools(schemas: Iterable[Any]) -> dict[str, PublicTool]:
    """Name -> public view, for every service tool among `schemas` (finish left out)."""
    tools = {}
    for schema in schemas:
        tool = from_schema(schema)
        if tool is not None:
            tools[tool.name] = tool
    return tools
