"""`--agent` specs to agent objects.

scripted | openai:MODEL@BASE_URL | vllm:MODEL | hf:PATH | python:MODULE:CLASS |
cmd:TEMPLATE, with `framework` F1 (native tool calls; the default for openai and vllm) or F2
(ReAct text; the default for hf, whose small models rarely have a tool-aware chat template).

The MCP path (docs/mcp.md; the `mcp` extra, imported only when asked for): `cmd:TEMPLATE`
runs an agent program per episode against an MCP server; an LLM spec ending in
`#tools=mcp` lists and calls its tools through an MCP client session; `#annotations=off`
lists the tools without their hints (the ablation).
"""

from __future__ import annotations

import importlib
import os
import re
from typing import Any

from undobench_gym.agents.llm.backends import OpenAIBackend
from undobench_gym.agents.llm.base import LLMConfig
from undobench_gym.agents.llm.f1_tool_calling import ToolCallingAgent
from undobench_gym.agents.llm.f2_react import ReActAgent
from undobench_gym.agents.llm.local import HFBackend, VLLMBackend
from undobench_gym.agents.scripted import ScriptedAgent
from undobench_gym.contract.errors import UndoBenchError

FRAMEWORKS = ("F1", "F2")
SPECS = (
    "scripted, openai:MODEL@BASE_URL, local:MODEL (in a sweep), vllm:MODEL, hf:PATH, "
    "python:MODULE:CLASS or cmd:TEMPLATE (an MCP agent program)"
)
_OPENAI = re.compile(r"openai:(?P<model>.+?)@(?P<url>https?://\S+)")
_MODIFIER = re.compile(r"#(?P<key>tools|annotations)=(?P<value>[a-z]+)$")
_MODIFIERS = {"tools": ("direct", "mcp"), "annotations": ("on", "off")}


def split_modifiers(spec: str) -> tuple[str, dict[str, str]]:
    """`SPEC#tools=mcp#annotations=off` -> (SPEC, {"tools": "mcp", "annotations": "off"})."""
    found: dict[str, str] = {}
    while m := _MODIFIER.search(spec):
        key, value = m["key"], m["value"]
        if value not in _MODIFIERS[key]:
            raise UndoBenchError(f"{key}={value}: expected one of {', '.join(_MODIFIERS[key])}")
        found.setdefault(key, value)
        spec = spec[: m.start()]
    return spec, found


def _framework(framework: str | None, default: str) -> str:
    chosen = (framework or default).upper()
    if chosen not in FRAMEWORKS:
        raise UndoBenchError(
            f"unknown framework {framework!r}: F1 (native tool calls) or F2 (ReAct text)"
        )
    return chosen


def _llm(backend: Any, framework: str, config: Any) -> Any:
    cls = ToolCallingAgent if framework == "F1" else ReActAgent
    return cls(backend, config)


def make_agent(spec: str, framework: str | None = None, config: Any = None) -> Any:
    """`config` is an `llm.LLMConfig` for LLM agents (default: from UNDOBENCH_LLM_* env
    variables); `framework` applies to LLM agents only."""
    if framework is not None:
        _framework(framework, "F1")
    spec, mods = split_modifiers(spec)
    annotations = mods.get("annotations", "on") == "on"
    if spec.startswith("cmd:") or mods.get("tools") == "mcp" or not annotations:
        try:
            from undobench_gym.agents.mcp import specs as mcp_specs  # the `mcp` extra
        except ImportError as exc:
            raise UndoBenchError(
                f"{spec}: the MCP path needs the mcp extra: pip install -e '.[mcp]' ({exc})"
            ) from None
        if spec.startswith("cmd:"):
            return mcp_specs.command_agent(spec[4:], annotations=annotations, framework=framework)
        if not spec.startswith(("openai:", "vllm:", "hf:")):
            raise UndoBenchError(f"{spec}: #tools=mcp is for LLM agents (openai, vllm, hf)")
        inner = make_agent(spec, framework=framework, config=config)
        return mcp_specs.mcp_tools_agent(inner, annotations=annotations)
    if spec == "scripted":
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
    if spec.startswith("local:"):
        raise UndoBenchError(
            f"{spec}: a local model server is started by a sweep (undobench run --agent "
            f"{spec}) or by `undobench serve-model`; in Python, start "
            "agents.llm.model_server.LlamaServer and pass its agent_spec()"
        )
    if spec.startswith(("openai:", "vllm:", "hf:")):
        config = config or LLMConfig.from_env()
        kind, _, rest = spec.partition(":")
        if not rest:
            raise UndoBenchError(f"agent {spec!r} names no model; expected {SPECS}")
        if kind == "openai":
            m = _OPENAI.fullmatch(spec)
            model, url = (m["model"], m["url"]) if m else (rest, os.environ.get("OPENAI_BASE_URL"))
            if not url:
                raise UndoBenchError(
                    f"agent {spec!r}: expected openai:MODEL@BASE_URL, e.g. "
                    "openai:Qwen/Qwen2.5-7B-Instruct@http://127.0.0.1:8000/v1 "
                    "(or set OPENAI_BASE_URL)"
                )
            backend: Any = OpenAIBackend(
                model, url, timeout_s=config.timeout_s, stream=bool(config.stream)
            )
            return _llm(backend, _framework(framework, "F1"), config)
        if kind == "vllm":
            return _llm(VLLMBackend(rest), _framework(framework, "F1"), config)
        hf = HFBackend(rest, threads=config.hf_threads, prefix_cache=bool(config.hf_prefix_cache))
        return _llm(hf, _framework(framework, "F2"), config)
    raise UndoBenchError(f"agent {spec!r} is not available; use {SPECS}")
