"""The catalogue: domains, their workflows, and tool schemas generated from OpenAPI.

One route, one tool. Domains are imported lazily by module path, so importing the
package starts nothing and imports no service code; a domain's OpenAPI document is kept
on disk (`openapi_cache`), so a later process builds its tools without importing the
service either.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import importlib
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from undobench_gym.contract.errors import UnknownWorkflowError
from undobench_gym.contract.specs import WorkflowSpec
from undobench_gym.core import openapi_cache
from undobench_gym.services.domains import DOMAIN_MODULES

DOMAINS: dict[str, str] = DOMAIN_MODULES
FINISH = "finish"
#: How an episode can end by the agent's word: the work is done, cannot be done, or is
#: handed over to a human (an escalation: a safe abstention when it left no harm).
FINISH_STATUSES = ("done", "gave_up", "escalated")


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    method: str
    path: str  # OpenAPI template, without the service prefix
    path_params: tuple[str, ...]
    query_params: tuple[str, ...]
    body_params: tuple[str, ...]
    accepts_key: bool  # declares an Idempotency-Key header
    read_only: bool
    effect_class: str | None
    idempotency: str  # native | constraint | none
    compensation: bool
    op: str | None
    identity: tuple[str, ...]
    parameters: dict[str, Any] = field(hash=False, compare=False)
    # The service ignores fields it does not know (no `extra="forbid"` on its body model,
    # or no body: unknown query parameters): the env passes them on instead of refusing.
    passes_extra: bool = False
    #: Arguments that make the call conditional on the state the client saw.
    preconditions: tuple[str, ...] = ()
    #: The call finishes a composite a crash left part-way (a no-op on a finished one).
    resumption: bool = False

    @functools.cached_property
    def check_schema(self) -> dict[str, Any]:
        """What the env checks arguments against: the advertised schema, no stricter than
        the service behind it (an extra field it would ignore is not an invalid action)."""
        if not self.passes_extra:
            return self.parameters
        return {k: v for k, v in self.parameters.items() if k != "additionalProperties"}

    def annotations(self) -> dict[str, bool]:
        """The effect labels every agent may see, as MCP tool annotations (2025-06-18
        `ToolAnnotations`): read-only; destructive (may overwrite or cannot be taken back,
        vs only adds); idempotent (a repeat with the same arguments has no further
        effect); plus `compensatingHint` (the call undoes an earlier effect: a refund, a
        rollback, a retraction) and, on the tools that have it, `resumingHint` (the call
        finishes a record that a crash left half-done, as a payout's resume does, and
        changes nothing on a finished one). Identity fields, operation names and the
        oracle's multiplicities stay private to the harness."""
        cls = self.effect_class
        hints = {
            "readOnlyHint": self.read_only,
            "destructiveHint": not self.read_only and cls in ("set", "irreversible_send"),
            "idempotentHint": self.read_only or cls in ("set", "create_unique"),
            "compensatingHint": self.compensation,
        }
        if self.resumption:  # only where true: every other tool's schema stays as it was
            hints["resumingHint"] = True
        return hints

    def openai_schema(self) -> dict[str, Any]:
        """The function-tool schema, with the public annotations and the REST route (both
        in the public OpenAPI document a client of the service gets). Send only `type`
        and `function` to a model server: `annotations` and `http` are for the agent."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
            "annotations": self.annotations(),
            "http": {"method": self.method, "path": self.path},
        }

    def with_key(self) -> ToolSpec:
        """The same tool with an optional idempotency_key argument (server_idempotency="all")."""
        if self.accepts_key or self.read_only:
            return self
        params = copy.deepcopy(self.parameters)
        params["properties"]["idempotency_key"] = KEY_PROPERTY
        return dataclasses.replace(self, accepts_key=True, parameters=params)


KEY_PROPERTY = {
    "type": "string",
    "minLength": 1,
    "maxLength": 255,
    "pattern": "^[\\x20-\\x7e]+$",  # it travels as an HTTP header: printable ASCII
    "description": "Idempotency-Key: a repeat with the same key and payload is not applied twice",
}

FINISH_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": FINISH,
        "description": (
            "End the task. Call it once: status done when the task is done, gave_up when it "
            "cannot be done, escalated to hand it over to a human (say in the summary what "
            "they must check, e.g. whether a change went through)."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "status": {"type": "string", "enum": list(FINISH_STATUSES)},
                "summary": {"type": "string", "maxLength": 2000},
            },
            "required": ["status"],
            "additionalProperties": False,
        },
    },
}


def _resolve(node: Any, components: dict[str, Any], depth: int = 0) -> Any:
    """Inline `$ref`s so each tool schema stands alone (function-calling APIs need that)."""
    if depth > 20:
        raise ValueError("OpenAPI schema nests too deeply")
    if isinstance(node, dict):
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            return _resolve(components[name], components, depth + 1)
        return {
            k: _resolve(v, components, depth + 1)
            for k, v in node.items()
            if not (k == "title" and isinstance(v, str))
        }
    if isinstance(node, list):
        return [_resolve(v, components, depth + 1) for v in node]
    return node


def tools_from_openapi(doc: dict[str, Any]) -> dict[str, ToolSpec]:
    components = doc.get("components", {}).get("schemas", {})
    tools: dict[str, ToolSpec] = {}
    for path, item in doc["paths"].items():
        for method, op in item.items():
            meta = op.get("x-undobench", {})
            props: dict[str, Any] = {}
            required: list[str] = []
            path_p: list[str] = []
            query_p: list[str] = []
            body_p: list[str] = []
            accepts_key = False
            for p in op.get("parameters", []):
                if p["in"] == "header":
                    if p["name"].lower() == "idempotency-key":
                        accepts_key = True
                        props["idempotency_key"] = KEY_PROPERTY
                    continue
                schema = _resolve(p.get("schema", {}), components)
                if p.get("description"):
                    schema["description"] = p["description"]
                props[p["name"]] = schema
                if p.get("required"):
                    required.append(p["name"])
                (path_p if p["in"] == "path" else query_p).append(p["name"])
            body = op.get("requestBody", {}).get("content", {}).get("application/json")
            passes_extra = True
            if body:
                schema = _resolve(body["schema"], components)
                passes_extra = schema.get("additionalProperties", True) is not False
                for name, sub in schema.get("properties", {}).items():
                    props[name] = sub
                    body_p.append(name)
                required.extend(schema.get("required", []))
            description = " ".join(
                x for x in (op.get("summary", ""), op.get("description", "")) if x
            ).strip()
            name = op["operationId"]
            tools[name] = ToolSpec(
                name=name,
                description=description,
                method=method.upper(),
                path=path,
                path_params=tuple(path_p),
                query_params=tuple(query_p),
                body_params=tuple(body_p),
                accepts_key=accepts_key,
                read_only=bool(meta.get("read_only", method.lower() in ("get", "head"))),
                effect_class=meta.get("effect_class"),
                idempotency=meta.get("idempotency", "none"),
                compensation=bool(meta.get("compensation", False)),
                op=meta.get("op"),
                identity=tuple(meta.get("identity", ())),
                parameters={
                    "type": "object",
                    "properties": props,
                    "required": required,
                    "additionalProperties": False,
                },
                passes_extra=passes_extra,
                preconditions=tuple(meta.get("preconditions", ())),
                resumption=bool(meta.get("resumption", False)),
            )
    return tools


@dataclass(frozen=True)
class Domain:
    name: str
    module: str
    workflows: tuple[WorkflowSpec, ...]
    tools: dict[str, ToolSpec] = field(hash=False)

    def proxy_routes(self) -> list[dict[str, Any]]:
        """The tool table the fault proxy names calls by (`--set undobench_tools=...`): it
        travels with the proxy's command line, so a restarted proxy still has it."""
        return [
            {
                "name": t.name,
                "method": t.method,
                "path": f"/{self.name}{t.path}",
                "read_only": t.read_only,
            }
            for t in self.tools.values()
        ]

    def fixture(self, seed: int) -> dict[str, Any]:
        fixture_module = importlib.import_module(self.module + ".fixture")
        result: dict[str, Any] = fixture_module.build_fixture(seed)
        return result


@cache
def domain(name: str) -> Domain:
    if name not in DOMAINS:
        known = ", ".join(sorted(DOMAINS))
        raise UnknownWorkflowError(f"unknown domain {name!r}; known domains: {known}")
    module = DOMAINS[name]
    doc = openapi_cache.load(name, module)
    if doc is None:
        doc = render_openapi(module)
        openapi_cache.save(name, module, doc)
    workflows = tuple(importlib.import_module(module + ".workflows").WORKFLOWS)
    return Domain(name=name, module=module, workflows=workflows, tools=tools_from_openapi(doc))


def render_openapi(module: str) -> dict[str, Any]:
    """The domain service's OpenAPI document, from its routes: imports the service."""
    from fastapi import FastAPI

    service = importlib.import_module(module + ".service").DOMAIN
    app = FastAPI(title=service.title, version="1.0.0")
    for router in service.routers:
        app.include_router(router)
    doc: dict[str, Any] = app.openapi()
    return doc


def all_workflows(split: str | None = None) -> list[WorkflowSpec]:
    out = [w for name in DOMAINS for w in domain(name).workflows]
    return [w for w in out if split is None or w.split == split]


def find_workflow(workflow_id: str, domain_name: str | None = None) -> WorkflowSpec:
    """The workflow with this id; `domain_name`, where the caller knows it, loads only that
    domain (a worker's first pair would otherwise load all eight: about 2 s)."""
    if domain_name in DOMAINS:
        for w in domain(domain_name).workflows:
            if w.id == workflow_id:
                return w
    workflows = {w.id: w for w in all_workflows()}
    if workflow_id in workflows:
        return workflows[workflow_id]
    import difflib

    close = difflib.get_close_matches(workflow_id, workflows, n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise UnknownWorkflowError(f"unknown workflow {workflow_id!r}.{hint} See `undobench tasks`.")
