"""A tool session whose calls become the actions of a harness loop.

The harness drives an episode by asking an agent for its next action and stepping the env
(`pairing.run_episode`: time limits, worker crashes, recovery methods and the trial record
all live there). An agent that acts through MCP turns this around: it calls a tool and
waits for the result. The bridge joins the two: an MCP `tools/call` (on the server's worker
thread) is handed to the harness as the next action and waits; the harness steps the env,
through whatever method wraps it, and the observation it gets is the call's result. So an
MCP agent is scored by exactly the code that scores an in-process one.

The step that ends an episode (a valid `finish`, the last step of the budget) is answered
when the harness closes the episode, with that step's observation: no further action is
asked for. A call still waiting when the episode ends without a step (the time limit) gets
an error result; later calls get one at once.
"""

from __future__ import annotations

import json
import queue
import threading
from typing import Any

from mcp import types

from undobench_gym.core.mcp.tools import error_result, tool_result

FINISH = "finish"
FINISHED = json.dumps({"finished": True})  # the env's observation for a valid finish
#: What an MCP call cannot carry, the project's own client sends as `{RAW: text}`: tool
#: arguments that are not a JSON object (to a tool), or a reply that is no action at all
#: (to `RAW_ACTION`). The env then answers with the invalid-action observation it gives
#: the direct path, so a malformed reply is scored the same either way.
RAW = "_undobench_raw"
RAW_ACTION = "_undobench_raw_action"


def to_action(name: str, arguments: dict[str, Any]) -> dict[str, Any] | str:
    raw = arguments.get(RAW)
    if len(arguments) == 1 and isinstance(raw, str):
        return raw if name == RAW_ACTION else {"tool": name, "arguments": raw}
    return {"tool": name, "arguments": arguments}


class Bridge:
    def __init__(self, tools: list[dict[str, Any]]) -> None:
        self._tools = list(tools)
        self._actions: queue.Queue[dict[str, Any] | str] = queue.Queue()
        self._reply: queue.Queue[str | None] | None = None
        self._pending_finish = False
        self._closed = False
        self._state = threading.Lock()
        self._one_call = threading.Lock()

    # ---- the MCP side (server worker threads) ------------------------------------------

    def tools(self) -> list[dict[str, Any]]:
        return self._tools

    def call(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        with self._one_call:
            reply: queue.Queue[str | None] = queue.Queue(maxsize=1)
            with self._state:
                if self._closed:
                    return error_result("episode", "the task is over")
                self._reply, self._pending_finish = reply, name == FINISH
                self._actions.put(to_action(name, arguments))
            observation = reply.get()
            if observation is None:
                return error_result("episode", "the task is over (step or time limit)")
            return tool_result(observation)

    # ---- the harness side ----------------------------------------------------------------

    def next_action(self, timeout: float) -> dict[str, Any] | str | None:
        """The agent's next call, or None if it made none within `timeout` seconds."""
        try:
            return self._actions.get(timeout=timeout)
        except queue.Empty:
            return None

    def answer(self, observation: str) -> None:
        """The env's observation for the call handed out last."""
        with self._state:
            reply, self._reply = self._reply, None
        if reply is not None:
            reply.put(observation)

    def close(self, last_observation: str | None = None) -> None:
        """The episode is over: a waiting call gets the env's answer to it when the step
        it asked for ended the episode (`last_observation`; for a `finish` the env's
        answer is known anyway), else an error result; every later call an error result."""
        with self._state:
            self._closed = True
            reply, self._reply = self._reply, None
            finished = self._pending_finish
        if reply is not None:
            reply.put(last_observation or (FINISHED if finished else None))
