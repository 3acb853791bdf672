"""LLM agents: F1 (native tool calls) and F2 (ReAct text) over pluggable model backends."""

from .backends import OpenAIBackend, ProviderError, ProviderUnavailable, TransientProviderError
from .base import LLMAgent, LLMConfig
from .f1_tool_calling import ToolCallingAgent
from .f2_react import ReActAgent

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
