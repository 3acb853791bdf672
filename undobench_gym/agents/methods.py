"""The recovery-method registry: the CLI's --method names, each with its wrapper stack, where
it can act and the env options it needs, so that a new method is ONE `MethodSpec` entry.

Where a method can act is judged per pair (`applicable`, from the episode's public tool
schemas and the targeted tool) and per workflow (`applicable_methods`, for the derivation
table). The wrappers themselves live in `undobench_gym/agents/recovery/`, one module per method."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from undobench_gym.agents.catalog_view import workflow_schemas, workflow_spec, workflow_specs
from undobench_gym.agents.public_tools import PublicTool, public_tools
from undobench_gym.agents.recovery import (
    CheckpointResume,
    ClientJournal,
    IdempotencyKeys,
    NaiveRetry,
    RecoveryWrapper,
    Saga,
    VerifyBeforeRetry,
)
from undobench_gym.agents.recovery.derive import (
    compensation_for,
    compensations,
    resumptions,
    verifiers_for,
)
from undobench_gym.contract.errors import UndoBenchError
from undobench_gym.contract.specs import WorkflowSpec

__all__ = [
    "BUILTIN",
    "DESCRIPTIONS",
    "METHODS",
    "MethodSpec",
    "agent_transcript",
    "applicable",
    "applicable_methods",
    "capabilities",
    "method",
    "register",
    "server_idempotency_for",
    "unregister",
    "workflow_schemas",
    "workflow_spec",
    "workflow_specs",
    "wrap",
]

Env = gym.Env[str, str]
#: Whether a method can act on a fault that targets this mutating tool, given the episode's
#: public tools (the target is never read-only: `applicable` has ruled that out).
Applies = Callable[[PublicTool, dict[str, PublicTool]], bool]


@dataclass(frozen=True)
class MethodSpec:
    """One recovery method, all the harness needs to run it and to compare it fairly."""

    name: str
    description: str
    #: The wrapper stack around the env (the env itself for no middleware).
    wrap: Callable[[Env], Env]
    #: The per-pair applicability rule (a pair where it cannot act is left out of contrasts).
    applies: Applies
    #: The env's server-side keys: "native" (as each endpoint offers) or "all" (B2-K).
    server_idempotency: str = "native"
    #: The no-middleware reference: it applies to every pair, whatever the target.
    reference: bool = False


def _any_mutating(target: PublicTool, tools: dict[str, PublicTool]) -> bool:
    return True


def _takes_key(target: PublicTool, tools: dict[str, PublicTool]) -> bool:
    return target.accepts_key


def _compensable(target: PublicTool, tools: dict[str, PublicTool]) -> bool:
    return compensation_for(target, tools) is not None


def _verifiable(target: PublicTool, tools: dict[str, PublicTool]) -> bool:
    return bool(verifiers_for(target, tools))


def _bare(env: Env) -> Env:
    return env


def _keys_and_retry(env: Env) -> Env:
    return IdempotencyKeys(NaiveRetry(env))


def _saga(env: Env) -> Env:
    return Saga(NaiveRetry(env))


def _journal_with_probes(env: Env) -> Env:
    return ClientJournal(env, probes=True)


#: The contract's methods, in the order the CLI, the tables and the reports list them.
BUILTIN = (
    MethodSpec(
        "bare", "no middleware: the agent sees every fault", _bare, _any_mutating, reference=True
    ),
    MethodSpec(
        "B0",
        "naive retry: re-send after a transport error or 5xx (2 times at most)",
        NaiveRetry,
        _any_mutating,
    ),
    MethodSpec(
        "B1",
        "checkpoint/resume: harness-side checkpoints replay acknowledged steps after a crash",
        CheckpointResume,
        _any_mutating,
    ),
    MethodSpec(
        "B2",
        "idempotency keys on the endpoints that accept them, plus B0's retries",
        _keys_and_retry,
        _takes_key,
    ),
    MethodSpec(
        "B2-K",
        "B2 with server-side keys on every mutating endpoint (env option)",
        _keys_and_retry,
        _any_mutating,
        server_idempotency="all",
    ),
    MethodSpec(
        "B3",
        "saga: B0's retries, then real compensating calls for committed steps",
        _saga,
        _compensable,
    ),
    MethodSpec(
        "B5",
        "client journal: intent ids as keys, bounded retry, no reads",
        ClientJournal,
        _any_mutating,
    ),
    MethodSpec(
        "B5-P",
        "client journal plus a read before each mutation and a read-back before a re-send",
        _journal_with_probes,
        _verifiable,
    ),
    MethodSpec(
        "B6",
        "verify-before-retry: read before, re-send only when reading back shows no effect",
        VerifyBeforeRetry,
        _verifiable,
    ),
)

_REGISTRY: dict[str, MethodSpec] = {}
#: The registered names, in registration order (rebound by `register`/`unregister`: read
#: it as `methods.METHODS` to see methods registered after your import).
METHODS: tuple[str, ...] = ()
#: name -> one-line description (updated in place by `register`/`unregister`).
DESCRIPTIONS: dict[str, str] = {}


def register(spec: MethodSpec) -> MethodSpec:
    """Add a method (a plug-in or a test); its name must be new."""
    global METHODS
    if spec.name in _REGISTRY:
        raise UndoBenchError(f"method {spec.name!r} is already registered")
    _REGISTRY[spec.name] = spec
    METHODS = tuple(_REGISTRY)
    DESCRIPTIONS[spec.name] = spec.description
    return spec


def unregister(name: str) -> MethodSpec:
    """Remove a registered method (a test's teardown) and return its spec."""
    global METHODS
    spec = method(name)
    del _REGISTRY[name]
    del DESCRIPTIONS[name]
    METHODS = tuple(_REGISTRY)
    return spec


def method(name: str) -> MethodSpec:
    """The registered method `name`, or an error that lists the available ones."""
    spec = _REGISTRY.get(name)
    if spec is None:
        raise UndoBenchError(f"unknown method {name!r}; available: {', '.join(METHODS)}")
    return spec


for builtin in BUILTIN:
    register(builtin)


def server_idempotency_for(name: str) -> str:
    """The env option a method needs ("all" for B2-K: server-side keys on every mutating
    endpoint); "native" for a name that is not registered, as for any plain method."""
    spec = _REGISTRY.get(name)
    return spec.server_idempotency if spec is not None else "native"


def wrap(env: Env, name: str) -> Env:
    """`env` wrapped in the method's stack (for B2-K, `env` must have server_idempotency="all")."""
    return method(name).wrap(env)


def agent_transcript(env: Env) -> list[dict[str, Any]] | None:
    """What the agent saw in the last episode, from the outermost recovery wrapper (None
    under `bare`: there the env's transcript is what the agent saw)."""
    layer: Any = env
    while isinstance(layer, gym.Wrapper):
        if isinstance(layer, RecoveryWrapper):
            return layer.agent_transcript()
        layer = layer.env
    return None


def applicable(name: str, tools_schemas: list[dict[str, Any]], target_tool: str | None) -> bool:
    """Whether the method can act on a pair whose fault targets `target_tool`, judged from
    the episode's public tool schemas (`info["tools"]`) alone.

    Every method needs a mutating target (a fault on anything else is not one a method
    recovers from; the reference, `bare`, always applies). Then the method's own rule:
    `B0`, `B1`, `B2-K` and `B5` always apply (retry, harness protocol, server keys,
    journal); `B2` when the targeted tool accepts an idempotency key; `B3` when a
    compensation for the targeted tool can be derived; `B5-P` and `B6` when a read that can
    show its effect can be.
    """
    spec = method(name)
    if spec.reference:
        return True
    tools = public_tools(tools_schemas)
    target = tools.get(target_tool) if target_tool else None
    if target is None or target.read_only:
        return False
    return spec.applies(target, tools)


def capabilities(tools_schemas: list[dict[str, Any]]) -> dict[str, Any]:
    """What the mutating tools among these public schemas offer a recovery method."""
    tools = public_tools(tools_schemas)
    mutating: list[PublicTool] = [t for t in tools.values() if not t.read_only]
    probed = {t.name: [v.tool for v in verifiers_for(t, tools)] for t in mutating}
    return {
        "mutating": [t.name for t in mutating],
        "keys": [t.name for t in mutating if t.accepts_key],
        "idempotent": [t.name for t in mutating if t.idempotent],
        "probes": {name: found for name, found in probed.items() if found},
        "compensations": {f: c.tool for f, c in compensations(tools).items()},
        "resumptions": {f: r.tool for f, r in resumptions(tools).items()},
    }


def applicable_methods(workflow: WorkflowSpec | str) -> list[str]:
    """The methods that apply to at least one mutating tool of `workflow` (`applicable` with
    each mutating tool as the target, on the schemas of the method's own env: B2-K's has
    keys everywhere)."""
    modes = {"native"} | {spec.server_idempotency for spec in _REGISTRY.values()}
    schemas = {mode: workflow_schemas(workflow, mode) for mode in modes}
    targets = capabilities(schemas["native"])["mutating"]
    return [
        name
        for name, spec in _REGISTRY.items()
        if spec.reference
        or any(applicable(name, schemas[spec.server_idempotency], t) for t in targets)
    ]
