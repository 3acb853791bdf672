"""The harness's workflows as the public tool schemas their episodes offer (CLI side).

This is the one module of the agents package besides the gold-plan agent that reads the catalogue:
the CLI and the derivation table need a workflow's schemas without running an episode. It
builds them the way `reset` builds `info["tools"]`, so what is derived here is what a
wrapper derives; nothing here is ever given to a wrapper."""

from __future__ import annotations

from typing import Any

from undobench_gym.contract.specs import WorkflowSpec
from undobench_gym.core import catalog


def workflow_spec(workflow_id: str) -> WorkflowSpec:
    """The harness's workflow (for running pairs; never given to a wrapper)."""
    return catalog.find_workflow(workflow_id)


def workflow_specs() -> list[WorkflowSpec]:
    """Every registered workflow (for tables over all of them)."""
    return catalog.all_workflows()


def workflow_schemas(
    workflow: WorkflowSpec | str, server_idempotency: str = "native"
) -> list[dict[str, Any]]:
    """The tool schemas an episode of `workflow` offers, built the way `reset` builds
    `info["tools"]` (`ToolSpec.openai_schema()`, with keys on every mutating tool under
    server_idempotency="all"), so the CLI derives exactly what a wrapper would."""
    spec = catalog.find_workflow(workflow) if isinstance(workflow, str) else workflow
    tools = catalog.domain(spec.domain).tools
    out = []
    for name in spec.tools:
        tool = tools[name].with_key() if server_idempotency == "all" else tools[name]
        out.append(tool.openai_schema())
    return out
