"""An agent that acts through MCP, as the harness's `Agent`.

Per episode (`reset_task`) it serves the episode's tools over MCP (a fresh server: no
session of an earlier episode can reach this one) and starts the agent with a *launcher*:
an external program (`command.CommandLauncher`, `--agent cmd:...`) or an in-process LLM
agent on an MCP client session (`client.ThreadLauncher`, `--tools mcp`). Each `act` hands
the harness the agent's next `tools/call` (the bridge), so the env, the recovery method,
the time limit and the record are the harness's as for any agent. The episode is scored
when the agent calls `finish` or when it exits without doing so (then as its give-up);
`end_episode` (called by the harness when an episode ends, however it ends) stops the
agent and the server, so nothing outlives its episode.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from undobench_gym.contract.errors import ProviderUnavailable
from undobench_gym.core.deadline import AgentOverTime
from undobench_gym.core.mcp.bridge import Bridge
from undobench_gym.core.mcp.server import HttpServer, build_server

#: An agent program that exits with this code (EX_TEMPFAIL) says its model provider was
#: unavailable: an infrastructure error, retried like a dead stack, not the agent's failure.
PROVIDER_EXIT = 75
#: Seconds an agent may take for one action when the harness sets no limit of its own.
DEFAULT_TIME_LIMIT_S = 600.0
POLL_S = 0.1


@dataclass
class EpisodeContext:
    """What a launcher gives the agent: the task and where its MCP server is."""

    task: str
    task_instance: str
    mcp_url: str | None = None
    server: Any = None  # the SDK server object, for an in-process client
    extra: dict[str, Any] = field(default_factory=dict)


class Running(Protocol):
    def exit_code(self) -> int | None:
        """None while the agent runs."""

    def stop(self) -> None: ...


class Launcher(Protocol):
    #: "http": the agent connects to a server on 127.0.0.1; "memory": it gets the server.
    transport: str

    def start(self, ctx: EpisodeContext) -> Running: ...


class McpAgent:
    """`name`, `model` and `framework` label the records like any agent's."""

    def __init__(
        self,
        launcher: Launcher,
        *,
        name: str,
        annotations: bool = True,
        model: str | None = None,
        framework: str | None = None,
        time_limit_s: float = DEFAULT_TIME_LIMIT_S,
    ) -> None:
        self.launcher = launcher
        self.name = name
        self.annotations = annotations
        self.model = model
        self.framework = framework
        self.time_limit_s = time_limit_s
        self._bridge: Bridge | None = None
        self._http: HttpServer | None = None
        self._running: Running | None = None
        self._waiting = False  # an action was handed out and awaits its observation

    def use_replies(self, replies: dict[str, Any] | None, *, record: bool = False) -> None:
        """An in-process agent's reply memo (`LLMAgent.use_replies`); an external program
        keeps its own sampling."""
        use = getattr(getattr(self.launcher, "agent", None), "use_replies", None)
        if callable(use):
            use(replies, record=record)

    def reset_task(self, info: dict[str, Any]) -> None:
        self.end_episode(None)  # a worker-crash restart: the old agent goes with its worker
        self._bridge = Bridge(info["tools"])
        server = build_server(self._bridge, annotations=self.annotations)
        ctx = EpisodeContext(str(info["task"]), str(info["task_instance"]), server=server)
        if self.launcher.transport == "http":
            self._http = HttpServer(server).start()
            ctx.mcp_url = self._http.url
        self._running = self.launcher.start(ctx)

    def act(self, observation: str) -> dict[str, Any] | str:
        bridge, running = self._bridge, self._running
        if bridge is None or running is None:
            raise RuntimeError("act() before reset_task()")
        if self._waiting:
            bridge.answer(observation)
            self._waiting = False
        deadline = time.monotonic() + self.time_limit_s
        while True:
            action = bridge.next_action(POLL_S)
            if action is not None:
                self._waiting = True
                return action
            code = running.exit_code()
            if code is not None:
                action = bridge.next_action(0)  # a last call sent just before it exited
                if action is not None:
                    self._waiting = True
                    return action
                error = getattr(running, "error", None)
                if isinstance(error, Exception):  # an in-process agent's own exception
                    raise error
                if code == PROVIDER_EXIT:
                    raise ProviderUnavailable(f"{self.name}: the agent's model provider failed")
                summary = f"the agent exited (code {code}) without calling finish"
                return {"tool": "finish", "arguments": {"status": "gave_up", "summary": summary}}
            if time.monotonic() > deadline:
                raise AgentOverTime(f"no tool call from the agent in {self.time_limit_s:g}s")

    def end_episode(self, last_observation: str | None = None) -> None:
        """Stop the agent and the server; a call still waiting gets `last_observation`
        (the env's answer to the step that ended the episode) when there is one."""
        bridge, running, http = self._bridge, self._running, self._http
        waiting = self._waiting
        self._bridge = self._running = self._http = None
        self._waiting = False
        if bridge is not None:
            bridge.close(last_observation if waiting else None)
        if running is not None:
            with contextlib.suppress(Exception):
                running.stop()
        if http is not None:
            with contextlib.suppress(Exception):
                http.stop()
