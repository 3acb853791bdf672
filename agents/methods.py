"""Recovery method names (the CLI's --method) to wrapper stacks, and where each method can
act: per pair (`applicable`, from the episode's public tool schemas and the targeted tool)
and per workflow (`applicable_methods`, for the derivation table)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from undobench_gym.errors import UndoBenchError
from undobench_gym.specs import WorkflowSpec

from .public_tools import PublicTool, public_tools
from .recovery_checkpoint import CheckpointResume
from .recovery_common import RecoveryWrapper
from .recovery_derive import compensation_for, compensations, verifiers_for
from .recovery_journal import ClientJournal
from .recovery_saga import Saga
from .recovery_verify import VerifyBeforeRetry
from .wrappers import IdempotencyKeys, NaiveRetry

METHODS = ("bare", "B0", "B1", "B2", "B2-K", "B3", "B5", "B5-P", "B6")
#: Every method in the contract is available; kept so older imports keep working.
PLANNED: tuple[str, ...] = ()
DESCRIPTIONS = {
    "bare": "no middleware: the agent sees every fault",
    "B0": "naive retry: re-send after a transport error or 5xx (2 times at most)",
    "B1": "checkpoint/resume: harness-side checkpoints replay acknowledged steps after a crash",
    "B2": "idempotency keys on the endpoints that accept them, plus B0's retries",
    "B2-K": "B2 with server-side keys on every mutating endpoint (env option)",
    "B3": "saga: B0's retries, then real compensating calls for committed steps",
    "B5": "client journal: intent ids as keys, bounded retry, no reads",
    "B5-P": "client journal plus a read before each mutation and a read-back before a re-send",
    "B6": "verify-before-retry: read before, re-send only when reading back shows no effect",
}


def server_idempotency_for(method: str) -> str:
    """B2-K is an env option: server-side keys on every mutating endpoint."""
    return "all" if method == "B2-K" else "native"


def wrap(env: gym.Env[str, str], method: str) -> gym.Env[str, str]:
    """`env` wrapped in `method`'s stack (for B2-K, `env` must have server_idempotency="all")."""
    if method == "bare":
        return env
    if method == "B0":
        return NaiveRetry(env)
    if method == "B1":
        return CheckpointResume(env)
    if method in ("B2", "B2-K"):
        return IdempotencyKeys(NaiveRetry(env))
    if method == "B3":
        return Saga(NaiveRetry(env))
    if method in ("B5", "B5-P"):
        return ClientJournal(env, probes=method == "B5-P")
    if method == "B6":
        return VerifyBeforeRetry(env)
    raise UndoBenchError(f"unknown method {method!r}; available: {', '.join(METHODS)}")


def agent_transcript(env: gym.Env[str, str]) -> list[dict[str, Any]] | None:
    """What the agent saw in the last episode, from the outermost recovery wrapper (None
    under `bare`: there the env's transcript is what the agent saw)."""
    layer: Any = env
    while isinstance(layer, gym.Wrapper):
        if isinstance(layer, RecoveryWrapper):
            return layer.agent_transcript()
        layer = layer.env
    return None


def applicable(method: str, tools_schemas: list[dict[str, Any]], target_tool: str | None) -> bool:
    """Whether `method` can act on a pair whose fault targets `target_tool`, judged from the
    episode's public tool schemas (`info["tools"]`) alone.

    Every method needs a mutating target (a fault on anything else is not one a method
    recovers from; `bare` is the reference and always applies). Then `B0`, `B1`, `B2-K`
    and `B5` always apply (retry, harness protocol, server keys, journal); `B2` when the
    targeted tool accepts an idempotency key; `B3` when a compensation for the targeted
    tool can be derived; `B5-P` and `B6` when a read that can show its effect can be.
    """
    if method not in METHODS:
        raise UndoBenchError(f"unknown method {method!r}; available: {', '.join(METHODS)}")
    if method == "bare":
        return True
    tools = public_tools(tools_schemas)
    target = tools.get(target_tool) if target_tool else None
    if target is None or target.read_only:
        return False
    if method == "B2":
        return target.accepts_key
    if method == "B3":
        return compensation_for(target, tools) is not None
    if method in ("B5-P", "B6"):
        return bool(verifiers_for(target, tools))
    return True


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
    }


# ---- CLI side: the harness's workflows, seen through the public schemas ---------------


def workflow_spec(workflow_id: str) -> WorkflowSpec:
    """The harness's workflow (for running pairs; never given to a wrapper)."""
    from undobench_gym import catalog

    return catalog.find_workflow(workflow_id)


def workflow_specs() -> list[WorkflowSpec]:
    """Every registered workflow (for tables over all of them)."""
    from undobench_gym import catalog

    return catalog.all_workflows()


def workflow_schemas(
    workflow: WorkflowSpec | str, server_idempotency: str = "native"
) -> list[dict[str, Any]]:
    """The tool schemas an episode of `workflow` offers, built the way `reset` builds
    `info["tools"]` (`ToolSpec.openai_schema()`, with keys on every mutating tool under
    server_idempotency="all"), so the CLI derives exactly what a wrapper would."""
    from undobench_gym import catalog

    spec = catalog.find_workflow(workflow) if isinstance(workflow, str) else workflow
    tools = catalog.domain(spec.domain).tools
    out = []
    for name in spec.tools:
        tool = tools[name].with_key() if server_idempotency == "all" else tools[name]
        out.append(tool.openai_schema())
    return out


def applicable_methods(workflow: WorkflowSpec | str) -> list[str]:
    """The methods that apply to at least one mutating tool of `workflow` (`applicable` with
    each mutating tool as the target; B2-K judged on its own env's schemas)."""
    native = workflow_schemas(workflow)
    keyed = workflow_schemas(workflow, "all")
    targets = capabilities(native)["mutating"]
    return [
        m
        for m in METHODS
        if m == "bare" or any(applicable(m, keyed if m == "B2-K" else native, t) for t in targets)
    ]
