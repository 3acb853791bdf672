"""The concurrent writer of an episode: when it acts, and what it sends.

Another client of the same services makes real HTTP calls between the agent's steps,
through the stack's admin port (`/admin/writer`, the public API on behalf of the writer),
never through the fault proxy: the proxy's call numbering, fault plans and wire log stay
the agent's alone, and the services tag the writer's commits as its own (`actor`). What it
did is logged on the episode, for the trial record (never in the agent's transcript)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

from undobench_gym.contract.errors import StackUnhealthyError
from undobench_gym.contract.specs import ConcurrentWriter, fill
from undobench_gym.core.actions import ToolCall, to_request
from undobench_gym.core.catalog import ToolSpec
from undobench_gym.core.stack_client import StackClient


@dataclass
class WriterRun:
    """One episode's writer: its spec, whether it has acted, and what it did."""

    spec: ConcurrentWriter
    acted: bool = False
    log: list[dict[str, Any]] = field(default_factory=list)

    def due(self, tool: str, nth: int) -> bool:
        """The agent just made its `nth` call of `tool`: is that the writer's trigger?"""
        return not self.acted and tool == self.spec.tool and nth == self.spec.nth

    def act(
        self,
        stack: StackClient,
        tools: dict[str, ToolSpec],
        domain: str,
        params: dict[str, Any],
        after_call: int | None,
    ) -> None:
        """Make the writer's calls, in order. `after_call`: the agent's call count when it
        acted (None: the agent never reached the trigger, and the writer acted at the end)."""
        self.acted = True
        for step in self.spec.actions:
            call = ToolCall(tool=step.tool, arguments=fill(step.arguments, params))
            req = to_request(call, tools[step.tool], domain)
            try:
                resp = stack.send_as_writer(req)
            except httpx.TransportError as exc:
                raise StackUnhealthyError(
                    f"the concurrent writer's {step.tool} call did not reach the stack: {exc}"
                ) from exc
            try:
                body: Any = resp.json()
            except ValueError:
                body = resp.text[:4000]
            self.log.append(
                {
                    "actor": "writer",
                    "after_call": after_call,
                    "trigger": {"tool": self.spec.tool, "nth": self.spec.nth},
                    "tool": step.tool,
                    "arguments": call.arguments,
                    "status": resp.status_code,
                    "body": body,
                }
            )
