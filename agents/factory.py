"""`--agent` specs to agent objects: scripted | python:MODULE:CLASS (more in later issues)."""

from __future__ import annotations

import importlib
from typing import Any

from undobench_gym.errors import UndoBenchError


def make_agent(spec: str, framework: str | None = None) -> Any:
    """`framework` (F1 native tool calls, F2 ReAct text) applies to LLM agents."""
    if spec == "scripted":
        from .scripted import ScriptedAgent

        return ScriptedAgent()
    if spec.startswith("python:"):
        try:
            _, module, cls = spec.split(":", 2)
            agent = getattr(importlib.import_module(module), cls)()
        except (ValueError, ImportError, AttributeError) as exc:
            raise UndoBenchError(
                f"cannot load agent {spec!r}: {exc} (expected python:MODULE:CLASS)"
            ) from exc
        if not hasattr(agent, "act") or not hasattr(agent, "name"):
            raise UndoBenchError(f"{spec}: an agent needs a `name` and an `act(observation)`")
        return agent
    raise UndoBenchError(
        f"agent {spec!r} is not available; use 'scripted' or 'python:MODULE:CLASS'"
    )
