"""Turn an agent's action into a validated tool call and that call into one HTTP request.

A bad action never raises: it becomes an `ActionError` the env shows as an observation.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from jsonschema import Draft202012Validator

from undobench_gym.core.catalog import FINISH, FINISH_TOOL, ToolSpec

MAX_ACTION_CHARS = 64 * 1024


@dataclass(frozen=True)
class ToolCall:
    tool: str
    arguments: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"tool": self.tool, "arguments": self.arguments}


@dataclass(frozen=True)
class ActionError:
    message: str
    details: tuple[str, ...] = ()

    def observation(self) -> dict[str, Any]:
        err: dict[str, Any] = {"type": "invalid_action", "message": self.message}
        if self.details:
            err["details"] = list(self.details)
        return {"error": err}


@dataclass(frozen=True)
class HttpRequest:
    method: str
    path: str
    params: dict[str, Any]
    json: dict[str, Any] | None
    headers: dict[str, str]


def _json_problem(value: Any) -> ActionError | None:
    """Too big, not serialisable, or holding what no request can carry: NaN/Infinity (not
    JSON) or a lone surrogate (no UTF-8 exists for it)."""
    try:
        text = json.dumps(value, default=str, allow_nan=False, ensure_ascii=False)
        text.encode()
        size = len(text)
    except UnicodeEncodeError:
        return ActionError("action holds text that is not valid Unicode (a lone surrogate)")
    except ValueError:
        return ActionError("action holds NaN or Infinity, which JSON does not allow")
    except TypeError:
        return ActionError("action is not JSON-serialisable")
    if size > MAX_ACTION_CHARS:
        return ActionError(f"action is {size} characters; the limit is {MAX_ACTION_CHARS}")
    return None


def parse_action(action: Any, tools: dict[str, ToolSpec]) -> ToolCall | ActionError:
    if isinstance(action, (bytes, bytearray)):
        try:
            action = action.decode()
        except UnicodeDecodeError:
            return ActionError("action bytes are not UTF-8")
    if isinstance(action, str):
        if len(action) > MAX_ACTION_CHARS:
            return ActionError(
                f"action is {len(action)} characters; the limit is {MAX_ACTION_CHARS}"
            )
        try:
            action = json.loads(action)
        except json.JSONDecodeError as exc:
            return ActionError(f"action is not valid JSON: {exc.msg} at position {exc.pos}")
    if not isinstance(action, dict):
        return ActionError(
            'an action is an object {"tool": name, "arguments": {...}}, '
            f"not {type(action).__name__}"
        )
    problem = _json_problem(action)
    if problem is not None:
        return problem
    tool = action.get("tool", action.get("name"))
    arguments = action.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            return ActionError("arguments is a string that is not valid JSON")
        problem = _json_problem(arguments)  # what the string held is checked too
        if problem is not None:
            return problem
    if not isinstance(tool, str):
        return ActionError('missing "tool": the name of one of the available tools')
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return ActionError('"arguments" must be an object')
    if tool == FINISH:
        return _finish_call(arguments)
    spec = tools.get(tool)
    if spec is None:
        close = difflib.get_close_matches(tool, list(tools), n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        return ActionError(
            f"unknown tool {tool[:80]!r}.{hint}",
            (f"available: {', '.join(sorted(tools))}, {FINISH}",),
        )
    errors = sorted(
        Draft202012Validator(spec.check_schema).iter_errors(arguments), key=lambda e: list(e.path)
    )
    if errors:
        details = tuple(
            f"{'/'.join(str(p) for p in e.path) or '(arguments)'}: {e.message[:200]}"
            for e in errors[:5]
        )
        return ActionError(f"invalid arguments for {tool}", details)
    key = arguments.get("idempotency_key")
    if isinstance(key, str) and not (key.isascii() and key.isprintable()):
        # The schema's pattern says so too, but Python's `$` also matches before a final
        # newline, and a header value with one would break the request.
        detail = "idempotency_key: printable ASCII only (it is sent as an HTTP header)"
        return ActionError(f"invalid arguments for {tool}", (detail,))
    return ToolCall(tool, arguments)


_FINISH_SCHEMA = Draft202012Validator(FINISH_TOOL["function"]["parameters"])


def _finish_call(arguments: dict[str, Any]) -> ToolCall | ActionError:
    """`finish` needs its status: an episode never ends as `done` by default."""
    errors = sorted(_FINISH_SCHEMA.iter_errors(arguments), key=lambda e: list(e.path))
    if errors:
        details = tuple(
            f"{'/'.join(str(p) for p in e.path) or '(arguments)'}: {e.message[:200]}"
            for e in errors[:5]
        )
        return ActionError(f"invalid arguments for {FINISH}", details)
    return ToolCall(FINISH, arguments)


def to_request(call: ToolCall, spec: ToolSpec, prefix: str) -> HttpRequest:
    args = dict(call.arguments)
    headers = {}
    key = args.pop("idempotency_key", None) if spec.accepts_key else None
    if key is not None:
        headers["Idempotency-Key"] = str(key)
    path = spec.path
    for name in spec.path_params:
        path = path.replace("{" + name + "}", quote(str(args[name]), safe=""))
    params = {n: args[n] for n in spec.query_params if args.get(n) is not None}
    body = {n: args[n] for n in spec.body_params if n in args}
    has_body = spec.method not in ("GET", "HEAD", "DELETE") or bool(body)
    known = {*spec.path_params, *spec.query_params, *spec.body_params}
    extra = {n: v for n, v in args.items() if n not in known}
    if extra and spec.passes_extra:  # passed on as a real client would send them
        if has_body:
            body.update(extra)
        else:
            params.update({n: v if isinstance(v, str) else json.dumps(v) for n, v in extra.items()})
    return HttpRequest(spec.method, f"/{prefix}{path}", params, body if has_body else None, headers)


def call_identity(
    call: ToolCall, spec: ToolSpec, by_content: Callable[[str, dict[str, Any]], Any] | None = None
) -> str:
    """The effect identity a call would have, from its arguments (for re-issue counting);
    `by_content(op, identity)` judges free text as the effect oracle does."""
    ident: Any = {f: call.arguments.get(f) for f in spec.identity}
    if by_content is not None and spec.op is not None:
        ident = by_content(spec.op, ident)
    return json.dumps([spec.op, ident], sort_keys=True, default=str)
