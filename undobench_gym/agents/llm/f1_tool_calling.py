"""F1: native tool calling over chat completions (`tools=` in the request).

Per step: the env's observation answers the pending tool call as a `tool` message, the model
is asked once, and the FIRST tool call of its reply is the action. The harness dispatches
exactly one call per step and never dispatches a call twice, so extra calls in the same
reply are not queued: each is answered with a `tool` message saying it was not executed
(the API needs an answer for every tool_call_id). A reply without a tool call gets the user
nudge "Call one of the tools, or finish."; after `max_text_replies` such replies in a row
the agent finishes with status "escalated" and the text as summary: a text reply is a
message to the human who gave the task, so the episode hands over to them (a safe
abstention when it left no harm; an agent that means "done" or "gave up" says so with
`finish`). Tool-call arguments that
are not a JSON object go to the env as the raw string, so the env answers with its own
invalid-action observation (they are counted, never repaired).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from undobench_gym.agents.llm.backends import Reply, ToolCallOut
from undobench_gym.agents.llm.base import LLMAgent
from undobench_gym.agents.llm.parsing import parse_text_tool_calls
from undobench_gym.agents.llm.prompt import (
    EXTRA_CALL_NOT_EXECUTED,
    NUDGE,
    SYSTEM_PROMPT,
    tool_result_message,
)
from undobench_gym.contract.seeding import stable_id

SUMMARY_LIMIT = 2000  # the finish tool's summary maxLength


class ToolCallingAgent(LLMAgent):
    framework = "F1"

    def initial_messages(self, info: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": info["task"]},
        ]

    def act(self, observation: str) -> dict[str, Any]:
        conv = self.conv
        if conv.pending:
            self._answer_pending(observation)
        text_replies = 0
        while True:
            reply = self.complete(tools=conv.tools, tool_choice=self.config.tool_choice)
            if not reply.tool_calls and self.config.text_tool_calls:
                reply = self._read_text_call(reply)
            if reply.tool_calls:
                break
            text = (reply.content or "").strip()
            conv.messages.append({"role": "assistant", "content": reply.content or ""})
            self.count("text_replies")
            text_replies += 1
            if text_replies >= self.config.max_text_replies:
                self.count("escalated_after_text")
                self.count("actions")
                return {
                    "tool": "finish",
                    "arguments": {
                        "status": "escalated",
                        "summary": text[:SUMMARY_LIMIT] or "(no reply)",
                    },
                }
            conv.messages.append({"role": "user", "content": NUDGE})
            self.count("nudges")
        calls: list[dict[str, Any]] = []
        for i, call in enumerate(reply.tool_calls):
            # Some servers leave ids empty; the API needs them to pair results with calls.
            call_id = call.id or stable_id("call", conv.task_instance, conv.turn, i, length=24)
            calls.append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
            )
        # "" rather than null beside tool_calls: the API allows both, llama-cpp-python's
        # chat templates fail on null (HTTP 500), and every server takes "".
        conv.messages.append(
            {"role": "assistant", "content": reply.content or "", "tool_calls": calls}
        )
        conv.pending_names = [c["function"]["name"] for c in calls]
        conv.pending = [c["id"] for c in calls]
        self.count("extra_tool_calls", len(calls) - 1)
        self.count("actions")
        first_call = reply.tool_calls[0]
        return {"tool": first_call.name, "arguments": self._arguments(first_call.arguments)}

    def _read_text_call(self, reply: Reply) -> Reply:
        """A tool call the model wrote as text rather than in its template's tool-call
        markup (Qwen2.5-Coder writes a fenced `{"name": ..., "arguments": ...}` instead of
        `<tool_call>`, so the server returns it as content). Read as an agent framework
        would (vLLM's and llama.cpp's parsers read the markup only), when the whole reply
        is that call and it names an offered tool; counted in `text_tool_calls`."""
        _content, calls = parse_text_tool_calls(reply.content or "")
        offered = {t["function"]["name"] for t in self.conv.tools}
        if not calls or any(c.name not in offered for c in calls):
            return reply
        self.count("text_tool_calls")
        out = [
            ToolCallOut(
                stable_id("call", self.conv.task_instance, self.conv.turn, i, length=24),
                c.name,
                c.arguments,
            )
            for i, c in enumerate(calls)
        ]
        return replace(reply, content=None, tool_calls=out, finish_reason="tool_calls")

    def _answer_pending(self, observation: str) -> None:
        conv = self.conv
        first, *extra = conv.pending
        if self.config.tool_results == "user":
            # The same words in a user message, for servers whose template drops tool messages.
            name = conv.pending_names[0] if conv.pending_names else "the tool call"
            text = tool_result_message(name, observation)
            if extra:
                text += (
                    f"\n\n({len(extra)} further call(s) of that turn: {EXTRA_CALL_NOT_EXECUTED})"
                )
            conv.messages.append({"role": "user", "content": text})
        else:
            conv.messages.append({"role": "tool", "tool_call_id": first, "content": observation})
            for call_id in extra:
                conv.messages.append(
                    {"role": "tool", "tool_call_id": call_id, "content": EXTRA_CALL_NOT_EXECUTED}
                )
        conv.pending, conv.pending_names = [], []

    def _arguments(self, raw: str) -> dict[str, Any] | str:
        if not raw.strip():
            return {}
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            self.count("malformed_arguments")
            return raw
        if not isinstance(value, dict):
            self.count("malformed_arguments")
            return raw
        return value
