"""An external agent (`--agent cmd:...`) in its sandbox reaches its MCP server and nothing
else: a real process-runtime stack, a real episode, and an agent program that tries the
stack's control API, its admin API (even with the stack's token, as if it had leaked), the
proxy's port, the stack's workdir and SQLite file, the stack processes' environment, and
its own MCP server. Only the last may answer. Then what it runs as and sees, that nothing
it starts outlives it, and the policy (`UNDOBENCH_AGENT_SANDBOX`) where no sandbox can be
made. The sandbox needs root, Linux and util-linux's `unshare` (CI has them)."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("mcp", reason="pip install -e '.[mcp]'")

from undobench_gym.agents.factory import make_agent
from undobench_gym.agents.mcp import jail, sandbox
from undobench_gym.agents.mcp.command import CommandLauncher
from undobench_gym.agents.mcp.episode import EpisodeContext
from undobench_gym.contract.errors import UndoBenchError
from undobench_gym.contract.stack_auth import TOKEN_ENV
from undobench_gym.core.catalog import find_workflow
from undobench_gym.core.pairing import run_episode


def _unavailable() -> str:
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return "the sandbox needs root on Linux"
    if shutil.which("unshare") is None:
        return "no unshare (util-linux)"
    return sandbox.namespaces_fail()


def _interpreter() -> str | None:
    """A Python the agent's user may run (the venv's may live under root's home)."""
    try:
        _user, uid, gid = sandbox.agent_user()
    except sandbox.Unavailable:
        return None
    for path in (sys.executable, "/usr/bin/python3", shutil.which("python3")):
        if path and sandbox.reachable(path, uid, gid, 5):
            return path
    return None


WHY = _unavailable()
PYTHON = _interpreter()
needs_sandbox = pytest.mark.skipif(
    bool(WHY) or PYTHON is None, reason=WHY or "no Python the agent's user can run"
)

PROBE = r"""
import json, os, socket, sys, urllib.request

targets = json.load(open(sys.argv[1]))
seen = {"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(),
        "interfaces": [name for _, name in socket.if_nameindex()],
        "processes": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
        "token_in_env": any(targets["token"] in v for v in os.environ.values()),
        "home": os.environ.get("HOME"), "cwd": os.getcwd()}

def attempt(what, fn):
    try:
        seen[what] = ["reached", str(fn())[:200]]
    except Exception as exc:
        seen[what] = ["refused", type(exc).__name__]

def get(url, headers=None):
    req = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(req, timeout=3) as resp:
        return resp.status, resp.read(100)

auth = {"Authorization": "Bearer " + targets["token"]}
attempt("control wire", lambda: get(targets["control"] + "/control/wire"))
attempt("control wire, with the token", lambda: get(targets["control"] + "/control/wire", auth))
attempt("control health, with the token", lambda: get(targets["control"] + "/control/health", auth))
attempt("admin state", lambda: get(targets["admin"] + "/admin/state"))
attempt("admin state, with the token", lambda: get(targets["admin"] + "/admin/state", auth))
writer = targets["admin"] + "/admin/writer/v1/customers"
attempt("admin writer, with the token", lambda: get(writer, auth))
attempt("proxy port", lambda: get(targets["agent"] + "/payments/v1/customers"))
for port in targets["ports"]:
    attempt(f"tcp {port}", lambda: socket.create_connection(("127.0.0.1", port), timeout=3).close())
attempt("list the stack workdir", lambda: os.listdir(targets["workdir"]))
for path in targets["files"]:
    attempt(f"read {path}", lambda: open(path, "rb").read(64))
for pid in targets["pids"]:
    attempt(f"environ of {pid}", lambda: open(f"/proc/{pid}/environ", "rb").read(64))
attempt("environ of process 1", lambda: open("/proc/1/environ", "rb").read(64))
tmp = targets["tmp"]
attempt("stack workdirs in tmp", lambda: [os.listdir(os.path.join(tmp, d))
    for d in os.listdir(tmp) if d.startswith("undobench-") and "agent" not in d])
init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-03-26", "capabilities": {},
    "clientInfo": {"name": "probe", "version": "0"}}}
def mcp():
    req = urllib.request.Request(os.environ["UNDOBENCH_MCP_URL"], data=json.dumps(init).encode(),
        headers={"Content-Type": "application/json",
                 "Accept": "application/json, text/event-stream"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        body = resp.read(4000).decode()
        assert "serverInfo" in body, body
        return resp.status
attempt("mcp", mcp)
print("PROBE " + json.dumps(seen), flush=True)
"""


def _relay_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name == jail.THREAD]


@pytest.fixture()
def probe_dir() -> Iterator[Path]:
    """A directory the agent's user can read (pytest's tmp_path is root's, 0700)."""
    path = Path(tempfile.mkdtemp(prefix="sandbox-probe-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _program(probe_dir: Path, name: str, body: str) -> str:
    script = probe_dir / name
    script.write_text(body)
    script.chmod(0o644)
    return str(script)


@needs_sandbox
def test_from_inside_the_sandbox_only_the_mcp_server_answers(
    env_for: Any, probe_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(sandbox.MODE_ENV, "require")
    env = env_for("payments")
    env.reset(seed=1)  # the stack is up: its ports and files can be named to the agent
    rt = env.runtime
    ep = rt.endpoints
    monkeypatch.setenv(TOKEN_ENV, ep.token)  # in the harness's environment: not passed on
    files = [p for p in rt.workdir.rglob("*") if p.is_file()]
    assert any(p.suffix in (".db", ".sqlite", ".sqlite3") for p in files), files
    ports = [int(u.rsplit(":", 1)[1]) for u in (ep.control_url, *ep.admin_urls.values())]
    targets = {
        "control": ep.control_url,
        "admin": ep.admin_urls["payments"],
        "agent": ep.agent_url,
        "token": ep.token,
        "ports": [*ports, int(ep.agent_url.rsplit(":", 1)[1])],
        "workdir": str(rt.workdir),
        "files": [str(p) for p in files],
        "pids": rt.process_pids(),
        "tmp": tempfile.gettempdir(),
    }
    (probe_dir / "targets.json").write_text(json.dumps(targets))
    (probe_dir / "targets.json").chmod(0o644)
    script = _program(probe_dir, "probe.py", PROBE)
    agent = make_agent(f"cmd:{PYTHON} {script} {probe_dir / 'targets.json'}")
    assert agent.config.record()["sandbox"]["isolated"] is True
    wf = find_workflow("pay-charge-customer")
    record = run_episode(env, agent, seed=1, workflow=wf.id, fault="lost-ack")
    assert record["finish_status"] == "gave_up"  # it exited without finishing
    line = next(x for x in agent.launcher.last_log.splitlines() if x.startswith("PROBE "))
    seen = json.loads(line.removeprefix("PROBE "))

    assert seen.pop("mcp") == ["reached", "200"]
    tried = {
        k: v for k, v in seen.items() if isinstance(v, list) and v[:1] in (["reached"], ["refused"])
    }
    assert len(tried) >= 10 + len(files)
    reached = {k: v for k, v in tried.items() if v[0] != "refused"}
    assert not reached, reached
    assert seen["uid"] != 0 and seen["gid"] != 0 and seen["groups"] == []
    assert seen["interfaces"] == ["lo"]
    assert seen["processes"] == [1, 2]  # the jail and the agent: no process of the machine
    assert seen["token_in_env"] is False
    assert seen["home"] == seen["cwd"]
    deadline = time.monotonic() + 5  # the harness's side of the relay went with the episode
    while _relay_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _relay_threads()
    # From the harness's side the same targets answer: the sandbox refused, not the stack.
    assert httpx.get(f"{ep.control_url}/control/wire", headers=ep.auth).status_code == 200
    assert httpx.get(f"{ep.control_url}/control/wire").status_code == 401


@needs_sandbox
def test_nothing_the_agent_starts_outlives_its_episode(
    probe_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A program that ignores SIGTERM and leaves a detached grandchild: stop() ends both
    (the namespace ends with its first process), and the exit code comes through."""
    monkeypatch.setenv(sandbox.MODE_ENV, "require")
    marker = f"undobench-sandbox-orphan-{os.getpid()}-{time.monotonic_ns()}"
    body = (
        "import signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', {marker!r}],"
        " start_new_session=True)\n"
        "print('started', flush=True)\n"
        "time.sleep(600)\n"
    )
    launcher = CommandLauncher(f"{PYTHON} {_program(probe_dir, 'stubborn.py', body)}")
    ctx = EpisodeContext(task="t", task_instance="i", mcp_url="http://127.0.0.1:9/mcp")
    running = launcher.start(ctx)

    def orphans() -> list[int]:
        out = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    out.append(int(pid))
            except OSError:
                continue
        return out

    deadline = time.monotonic() + 30
    while not orphans() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert orphans(), launcher.last_log
    running.stop()
    assert running.exit_code() is not None
    deadline = time.monotonic() + 5
    while orphans() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not orphans()

    quick = CommandLauncher(f"{PYTHON} -c 'import sys; sys.exit(75)'")
    done = quick.start(ctx)
    deadline = time.monotonic() + 30
    while done.exit_code() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert done.exit_code() == 75  # the provider-outage code survives the jail
    done.stop()


def test_the_policy_says_why_an_agent_is_not_sandboxed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    template = f"{sys.executable} -c pass"
    monkeypatch.setenv(sandbox.MODE_ENV, "off")
    assert CommandLauncher(template).policy.record() == {
        "sandbox": {"isolated": False, "why": f"{sandbox.MODE_ENV}=off"}
    }
    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 1000)
    monkeypatch.setenv(sandbox.MODE_ENV, "auto")
    policy = CommandLauncher(template).policy
    assert not policy.sandboxed and "not root" in policy.why
    monkeypatch.setenv(sandbox.MODE_ENV, "require")
    with pytest.raises(UndoBenchError, match="cannot be sandboxed: not root"):
        CommandLauncher(template)
    monkeypatch.setenv(sandbox.MODE_ENV, "sometimes")
    with pytest.raises(UndoBenchError, match="UNDOBENCH_AGENT_SANDBOX"):
        CommandLauncher(template)


@needs_sandbox
def test_a_program_out_of_the_agent_users_reach_is_refused_or_not_sandboxed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pytest's tmp_path is root's (0700): the agent's user could not run a script there."""
    hidden = tmp_path / "agent.py"
    hidden.write_text("pass\n")
    tmp_path.chmod(0o700)
    monkeypatch.setenv(sandbox.MODE_ENV, "require")
    with pytest.raises(UndoBenchError, match="out of reach of the agent's user"):
        CommandLauncher(f"{PYTHON} {hidden}")
    monkeypatch.setenv(sandbox.MODE_ENV, "auto")
    policy = CommandLauncher(f"{PYTHON} {hidden}").policy
    assert not policy.sandboxed and str(hidden) in policy.why
    monkeypatch.setenv(sandbox.USER_ENV, "root")
    monkeypatch.setenv(sandbox.MODE_ENV, "require")
    with pytest.raises(UndoBenchError, match="is root"):
        CommandLauncher(f"{PYTHON} -c pass")


def test_allowed_ports_come_from_the_template_and_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    template = "agent --model openai:m@http://127.0.0.1:8000/v1 --cache localhost:6379 x:1"
    monkeypatch.setenv(sandbox.ALLOW_ENV, "3128, 127.0.0.1:9000")
    assert sandbox.allowed_ports(template) == (3128, 6379, 8000, 9000)
    for bad in ("example.com:443", "http", "127.0.0.1:99999"):
        monkeypatch.setenv(sandbox.ALLOW_ENV, bad)
        with pytest.raises(UndoBenchError):
            sandbox.allowed_ports("")
