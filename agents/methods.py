"""Recovery method names (the CLI's --method) to wrapper stacks, and which methods apply to
which workflow, derived from its endpoints' capabilities."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from undobench_gym import catalog
from undobench_gym.catalog import ToolSpec
from undobench_gym.errors import UndoBenchError
from undobench_gym.specs import WorkflowSpec

from .recovery_checkpoint import CheckpointResume
from .recovery_derive import compensations, verifiers_for
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
    "B5-P": "client journal plus read-only probes before re-sending an unknown outcome",
    "B6": "verify-before-retry: re-send only when reading back shows the effect absent",
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


def workflow_tools(workflow: WorkflowSpec | str) -> dict[str, ToolSpec]:
    spec = catalog.find_workflow(workflow) if isinstance(workflow, str) else workflow
    tools = catalog.domain(spec.domain).tools
    return {name: tools[name] for name in spec.tools}


def capabilities(workflow: WorkflowSpec | str) -> dict[str, Any]:
    """What the workflow's mutating endpoints offer a recovery method."""
    tools = workflow_tools(workflow)
    mutating = [t for t in tools.values() if not t.read_only]
    probed = {t.name: [v.tool for v in verifiers_for(t, tools)] for t in mutating}
    return {
        "mutating": [t.name for t in mutating],
        "keys": [t.name for t in mutating if t.accepts_key],
        "constraints": [t.name for t in mutating if t.idempotency == "constraint"],
        "probes": {name: found for name, found in probed.items() if found},
        "compensations": {f: c.tool for f, c in compensations(tools).items()},
    }


def applicable_methods(workflow: WorkflowSpec | str) -> list[str]:
    """The methods that can act on this workflow, from its endpoints' capabilities.

    `bare`, `B0` and `B1` need nothing (B1 is a harness protocol); `B2-K` and `B5` need a
    mutating endpoint (the env adds keys; the journal applies to every mutation); `B2`
    needs one that accepts an Idempotency-Key natively; `B3` a derivable compensation;
    `B5-P` and `B6` a derivable read-only verifier for at least one mutating endpoint.
    """
    caps = capabilities(workflow)
    rules = {
        "bare": True,
        "B0": True,
        "B1": True,
        "B2": bool(caps["keys"]),
        "B2-K": bool(caps["mutating"]),
        "B3": bool(caps["compensations"]),
        "B5": bool(caps["mutating"]),
        "B5-P": bool(caps["probes"]),
        "B6": bool(caps["probes"]),
    }
    return [m for m in METHODS if rules[m]]
