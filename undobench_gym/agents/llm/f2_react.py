"""F2: a ReAct loop over plain chat completions (no `tools` parameter).

The system prompt lists the tools (name, description, JSON schema) and asks for
`Thought: ...` then `Action: {"tool": ..., "arguments": {...}}`. The action is the first JSON
object after the last `Action:` (balanced braces, code fences tolerated). A reply that does
not parse goes to the env as raw text, so the env answers with an invalid-action
observation; parse failures are counted in `stats["parse_failures"]`. Generation stops at
"Observation:" so the model cannot invent a tool result.
"""

from __future__ import annotations

from typing import Any

from undobench_gym.agents.llm.base import LLMAgent
from undobench_gym.agents.llm.parsing import parse_react
from undobench_gym.agents.llm.prompt import action_schema, observation_message, react_system_prompt

STOP = ["\nObservation:"]


class ReActAgent(LLMAgent):
    framework = "F2"

    @property
    def json_actions(self) -> bool:
        """tool_choice "required": every reply is one JSON action, schema-constrained where
        the server takes a JSON schema (else the same prompt, read by the same parser)."""
        return self.config.tool_choice == "required"

    def system_prompt(self, tools: list[dict[str, Any]]) -> str:
        return react_system_prompt(tools, json_actions=self.json_actions)

    def initial_messages(self, info: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {"role": "system", "content": self.system_prompt(self.conv.tools)},
            {"role": "user", "content": info["task"]},
        ]

    def act(self, observation: str) -> dict[str, Any] | str:
        conv = self.conv
        if conv.acted:
            conv.messages.append({"role": "user", "content": observation_message(observation)})
        schema = action_schema(conv.tools) if self.json_actions else None
        reply = self.complete(tools=None, stop=None if schema else STOP, response_schema=schema)
        if schema is not None and not reply.constrained:
            self.count("unconstrained_replies")
        text = reply.content or ""
        conv.messages.append({"role": "assistant", "content": text})
        conv.acted = True
        self.count("actions")
        parsed = parse_react(text, json_actions=self.json_actions)
        if parsed.action is None:
            self.count("parse_failures")
            return parsed.raw
        return parsed.action
