"""An LLM agent (F1 or F2) on an MCP client session: it lists the tools and calls them
through the SDK's `ClientSession` instead of being stepped by the harness.

`drive` is the whole loop, shared by the reference external agent (a separate process on
streamable HTTP, `reference.py`) and by `--tools mcp` (the same agent in a thread on an
in-memory session, `ThreadLauncher`). The agent gets what the direct path gives it: the
task, the tools as function schemas (converted back from the MCP listing: same names,
descriptions and parameters, with the hints the server listed), the pair's task instance
(its sampling seeds), and each result's text as the observation. Replies the protocol
cannot carry (arguments that are not a JSON object, text that is no action) travel in the
bridge's raw form, so the env answers them exactly as it answers the direct path.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import anyio
from mcp import ClientSession

from undobench_gym.agents.mcp.episode import EpisodeContext
from undobench_gym.core.mcp.bridge import RAW, RAW_ACTION
from undobench_gym.core.mcp.sdk import memory_session
from undobench_gym.core.mcp.tools import result_text, tool_schema

FINISH = "finish"


def _call(action: Any) -> tuple[str, dict[str, Any]]:
    """An agent's action as an MCP call (name, arguments)."""
    if not isinstance(action, dict) or not isinstance(action.get("tool"), str):
        text = action if isinstance(action, str) else json.dumps(action, default=str)
        return RAW_ACTION, {RAW: text}
    arguments = action.get("arguments")
    if isinstance(arguments, dict):
        return action["tool"], arguments
    if arguments is None:
        return action["tool"], {}
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments, default=str)
    return action["tool"], {RAW: raw}


def _over(observation: str) -> bool:
    """The server says the task is over (the harness ended the episode)."""
    try:
        value = json.loads(observation)
    except json.JSONDecodeError:
        return False
    error = value.get("error") if isinstance(value, dict) else None
    return isinstance(error, dict) and error.get("type") == "episode"


async def drive(
    session: ClientSession,
    agent: Any,
    task: str,
    task_instance: str,
    stop: threading.Event | None = None,
) -> str:
    """Run `agent` to the end of its episode; returns how it ended ("finished", "over" or
    "stopped"). `session` is initialized. The agent's model calls are blocking, so they
    run in a worker thread."""
    tools = [tool_schema(t) for t in (await session.list_tools()).tools]
    names = sorted(t["function"]["name"] for t in tools if t["function"]["name"] != FINISH)
    observation = json.dumps({"task": task, "tools": [*names, FINISH]})  # as env.reset's
    info = {"task": task, "tools": tools, "observation": observation}
    agent.reset_task({**info, "task_instance": task_instance})
    while stop is None or not stop.is_set():
        action = await anyio.to_thread.run_sync(agent.act, observation)
        name, arguments = _call(action)
        observation = result_text(await session.call_tool(name, arguments))
        if name == FINISH and json.loads(observation) == {"finished": True}:
            return "finished"
        if _over(observation):
            return "over"
    return "stopped"


def leaf(exc: BaseException) -> BaseException:
    """The error itself, out of the exception groups the SDK's task groups wrap it in."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class _Thread:
    def __init__(self, thread: threading.Thread, stop: threading.Event) -> None:
        self.thread, self.stop_event = thread, stop
        self.code: int | None = None
        #: What the agent raised, re-raised in the harness's thread so that it is sorted
        #: as on the direct path (a provider outage is infrastructure, the rest the agent's).
        self.error: BaseException | None = None

    def exit_code(self) -> int | None:
        return None if self.thread.is_alive() else (self.code if self.code is not None else 0)

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(timeout=30)


class ThreadLauncher:
    """`--tools mcp`: the in-process agent, on an in-memory session with the episode's
    server (the SDK's memory transport: no port, same protocol messages)."""

    transport = "memory"

    def __init__(self, agent: Any) -> None:
        self.agent = agent

    def start(self, ctx: EpisodeContext) -> _Thread:
        stop = threading.Event()

        async def main() -> None:
            async with memory_session(ctx.server) as session:
                await drive(session, self.agent, ctx.task, ctx.task_instance, stop)

        def run() -> None:
            try:
                anyio.run(main)
            except BaseException as exc:
                handle.error, handle.code = leaf(exc), 1

        thread = threading.Thread(target=run, name="mcp-agent", daemon=True)
        handle = _Thread(thread, stop)
        thread.start()
        return handle
