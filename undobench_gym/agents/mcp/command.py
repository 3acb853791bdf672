"""`--agent cmd:'<template>'`: any agent program, started once per episode.

The template is split like a shell command line (`shlex`, no shell runs it) and each
placeholder is replaced inside its own argument, so a task with spaces or quotes stays one
argument and nothing in it is ever interpreted:

    {task}            the task text
    {task_file}       a file holding the task text
    {task_instance}   the episode's opaque id (the same for the control and the fault
                      episode of a pair; a seed for the agent's sampling)
    {mcp_url}         the MCP server, streamable HTTP on 127.0.0.1
    {mcp_config}      a JSON file in the `mcpServers` format MCP clients read:
                      {"mcpServers": {"undobench": {"type": "http", "url": ...}}}
    {mcp_stdio_config} the same for an agent that launches its servers over stdio: the
                      command is a relay to the episode's server (undobench_gym.core.mcp.relay)
    {workdir}         a fresh directory for this episode (removed after it)

The same values are in the program's environment as UNDOBENCH_TASK, UNDOBENCH_TASK_FILE,
UNDOBENCH_TASK_INSTANCE, UNDOBENCH_MCP_URL, UNDOBENCH_MCP_CONFIG, UNDOBENCH_MCP_STDIO_CONFIG
and UNDOBENCH_WORKDIR.
The program runs in its own process group; its stdout and stderr go to `agent.log` in
the work directory (the last lines are kept in `last_log` for a failed run). At the end of
the episode it gets SIGTERM, then SIGKILL after a grace period. Where it can (root, Linux)
it runs in a sandbox that reaches its MCP server and nothing else (`sandbox.py`;
`UNDOBENCH_AGENT_SANDBOX`), and never gets the stack's token.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

from undobench_gym.agents.mcp import sandbox
from undobench_gym.agents.mcp.episode import EpisodeContext
from undobench_gym.contract.errors import UndoBenchError
from undobench_gym.contract.stack_auth import TOKEN_ENV

PLACEHOLDERS = (
    "task",
    "task_file",
    "task_instance",
    "mcp_url",
    "mcp_config",
    "mcp_stdio_config",
    "workdir",
)
GRACE_S = 3.0
LOG_TAIL = 4000


def parse_template(template: str) -> list[str]:
    """The argument list of a template, checked: a clear error, never a crash later."""
    try:
        argv = shlex.split(template)
    except ValueError as exc:
        raise UndoBenchError(f"cmd: cannot split {template!r}: {exc}") from None
    if not argv:
        raise UndoBenchError("cmd: the command template is empty")
    for arg in argv:
        try:
            arg.format(**{p: "" for p in PLACEHOLDERS})
        except (KeyError, IndexError, ValueError) as exc:
            raise UndoBenchError(
                f"cmd: bad placeholder in {arg!r} ({exc}); use {{{'}, {'.join(PLACEHOLDERS)}}}"
                " and write a literal brace as {{ or }}"
            ) from None
    return argv


def _log_tail(path: Path) -> str:
    """The end of the agent's log: never through a link or a pipe its program (which owns
    the directory when sandboxed) may have put in its place."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return ""
        f.seek(max(0, st.st_size - 4 * LOG_TAIL))
        return f.read(8 * LOG_TAIL).decode(errors="replace")[-LOG_TAIL:]


class Program:
    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        workdir: Path,
        launcher: CommandLauncher,
        jail: sandbox.Jail | None = None,
    ) -> None:
        self.proc, self.workdir, self.launcher, self.jail = proc, workdir, launcher, jail

    def exit_code(self) -> int | None:
        return self.proc.poll()

    def stop(self) -> None:
        if self.proc.poll() is None:
            for sig, wait in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, 10.0)):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, sig)
                try:
                    self.proc.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # anything it left in its group
        if self.jail is not None:
            self.jail.close()
        with contextlib.suppress(OSError):
            self.launcher.last_log = _log_tail(self.workdir / "agent.log")
        shutil.rmtree(self.workdir, ignore_errors=True)


class CommandLauncher:
    transport = "http"

    def __init__(self, template: str) -> None:
        self.template = template
        self.argv = parse_template(template)
        program = self.argv[0]
        if "{" not in program and shutil.which(program) is None:
            raise UndoBenchError(f"cmd: {program!r} is not an executable on PATH")
        self.last_log = ""
        #: Sandboxed or not, and why; recorded with every trial (`agent_config`).
        self.policy = sandbox.decide(self.argv, template)

    def start(self, ctx: EpisodeContext) -> Program:
        workdir = Path(tempfile.mkdtemp(prefix="undobench-agent-"))
        task_file, config = workdir / "task.txt", workdir / "mcp.json"
        task_file.write_text(ctx.task)
        servers = {"undobench": {"type": "http", "url": ctx.mcp_url}}
        config.write_text(json.dumps({"mcpServers": servers}))
        stdio_config = workdir / "mcp-stdio.json"
        relay = [sys.executable, "-m", "undobench_gym.core.mcp.relay", ctx.mcp_url or ""]
        stdio = {"undobench": {"type": "stdio", "command": relay[0], "args": relay[1:]}}
        stdio_config.write_text(json.dumps({"mcpServers": stdio}))
        values = {
            "task": ctx.task,
            "task_file": str(task_file),
            "task_instance": ctx.task_instance,
            "mcp_url": ctx.mcp_url or "",
            "mcp_config": str(config),
            "mcp_stdio_config": str(stdio_config),
            "workdir": str(workdir),
        }
        argv = [arg.format(**values) for arg in self.argv]
        env = {**os.environ, **{f"UNDOBENCH_{k.upper()}": v for k, v in values.items()}}
        env.pop(TOKEN_ENV, None)
        jail: sandbox.Jail | None = None
        with open(workdir / "agent.log", "wb") as log:
            try:
                if self.policy.sandboxed:
                    jail = sandbox.Jail(self.policy, workdir, ctx.mcp_url)
                    env["HOME"] = env["TMPDIR"] = str(workdir)
                popen = subprocess.Popen if jail is None else jail.popen
                proc = popen(
                    argv,
                    cwd=workdir,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError as exc:
                if jail is not None:
                    jail.close()
                shutil.rmtree(workdir, ignore_errors=True)
                raise UndoBenchError(f"cmd: cannot start {argv[0]!r}: {exc}") from None
        return Program(proc, workdir, self, jail)
