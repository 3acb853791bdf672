"""LLM agents: F1 (native tool calls) and F2 (ReAct text) over pluggable model backends."""

from undobench_gym.agents.llm.backends import (
    OpenAIBackend,
    ProviderError,
    ProviderUnavailable,
    TransientProviderError,
)
from undobench_gym.agents.llm.base import LLMAgent, LLMConfig
from undobench_gym.agents.llm.f1_tool_calling import ToolCallingAgent
from undobench_gym.agents.llm.f2_react import ReActAgent

__all__ = [
    "LLMAgent",
    "LLMConfig",
    "OpenAIBackend",
    "ProviderError",
    "ProviderUnavailable",
    "ReActAgent",
    "ToolCallingAgent",
    "TransientProviderError",
]
