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
                      command is a relay to the episode's server (undobench_gym.mcp.relay)
    {workdir}         a fresh directory for this episode (removed after it)

The same values are in the program's environment as UNDOBENCH_TASK, UNDOBENCH_TASK_FILE,
UNDOBENCH_TASK_INSTANCE, UNDOBENCH_MCP_URL, UNDOBENCH_MCP_CONFIG, UNDOBENCH_MCP_STDIO_CONFIG
and UNDOBENCH_WORKDIR.
The program runs in its own process group; its stdout and stderr go to `agent.log` in
the work directory (the last lines are kept in `last_log` for a failed run). At the end of
the episode it gets SIGTERM, then SIGKILL after a grace period.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from undobench_gym.errors import UndoBenchError

from .episode import EpisodeContext

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


class Program:
    def __init__(self, proc: subprocess.Popen[bytes], workdir: Path, launcher: CommandLauncher):
        self.proc, self.workdir, self.launcher = proc, workdir, launcher

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
        log = self.workdir / "agent.log"
        with contextlib.suppress(OSError):
            self.launcher.last_log = log.read_text(errors="replace")[-LOG_TAIL:]
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

    def start(self, ctx: EpisodeContext) -> Program:
        workdir = Path(tempfile.mkdtemp(prefix="undobench-agent-"))
        task_file, config = workdir / "task.txt", workdir / "mcp.json"
        task_file.write_text(ctx.task)
        servers = {"undobench": {"type": "http", "url": ctx.mcp_url}}
        config.write_text(json.dumps({"mcpServers": servers}))
        stdio_config = workdir / "mcp-stdio.json"
        relay = [sys.executable, "-m", "undobench_gym.mcp.relay", ctx.mcp_url or ""]
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
        with open(workdir / "agent.log", "wb") as log:
            try:
                proc = subprocess.Popen(
                    argv,
                    cwd=workdir,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError as exc:
                shutil.rmtree(workdir, ignore_errors=True)
                raise UndoBenchError(f"cmd: cannot start {argv[0]!r}: {exc}") from None
        return Program(proc, workdir, self)
