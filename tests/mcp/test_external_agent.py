"""`--agent cmd:...`: an agent program per episode, on an MCP server the harness starts.

The reference external agent (the project's F1 agent as a separate process speaking MCP
with the SDK's client) runs a paired sweep beside the same agent in-process, against the
same scripted fake model: every pair must get the same verdicts, effects and transcript.
Then the launcher's edges: placeholders, a program that exits without finishing, one that
never calls, and a bad template (a clear error before any stack starts)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="pip install -e '.[mcp]'")

from undobench_gym.agents.factory import make_agent
from undobench_gym.agents.mcp.command import CommandLauncher
from undobench_gym.agents.mcp.episode import EpisodeContext, McpAgent
from undobench_gym.contract.errors import ProviderUnavailable, UndoBenchError
from undobench_gym.core.catalog import find_workflow
from undobench_gym.core.pairing import run_episode, run_pair
from undobench_gym.core.trials import read_trials
from undobench_gym.harness.executors.worker import GuardedAgent
from undobench_gym.harness.runner import expand, run_sweep

from ..doubles.fake_llm_server import failing
from .conftest import use_gold

# TEST-split workflows (a crash point, lost acknowledgements, a refused request), every
# scenario, bare and B2, seeds 1-2. An external episode costs a process start (about 1 s of
# imports), so the default is two workflows; UNDOBENCH_MCP_SWEEP_WORKFLOWS=ID,ID runs others
# (docs/mcp.md has the figures of a larger run).
WORKFLOWS = os.environ.get(
    "UNDOBENCH_MCP_SWEEP_WORKFLOWS", "pay-split-payout,st-publish-build-artifact"
).split(",")
REFERENCE = f"cmd:{sys.executable} -m undobench_gym.agents.mcp.reference --agent openai:fake@"
PY = sys.executable


def verdicts(episode: dict[str, Any]) -> dict[str, Any]:
    return {
        "success": episode["success"],
        "effects": episode["effects"],
        "finish_status": episode["finish_status"],
        "truncated": episode["truncated"],
        "fault_fired": episode["fault_fired"],
        "actions": [t["action"] for t in episode["transcript"]],
        "observations": [t["observation"] for t in episode["transcript"]],
    }


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_reference_agent_sweep_matches_in_process(fake: Any, tmp_path: Path) -> None:
    use_gold(fake, WORKFLOWS)
    inproc = f"openai:fake@{fake.base_url}"
    external = REFERENCE + fake.base_url
    trials = expand(WORKFLOWS, None, ["bare", "B2"], [1, 2], [(inproc, "F1"), (external, "F1")])
    t0 = time.monotonic()
    # two workers: an external episode is mostly a process start, so the pairs overlap well
    run_sweep(trials, agent_spec=inproc, runtime="process", out=tmp_path, progress=False, workers=2)
    wall = time.monotonic() - t0
    records = read_trials(tmp_path / "trials.jsonl")
    by_agent: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = {}
    for r in records:
        assert r["control"]["error"] is None and r["fault"]["error"] is None, r["pair_id"]
        assert r["agent_exceptions"] == 0
        key = (r["workflow"], r["scenario"], r["method"], r["seed"])
        by_agent.setdefault(r["agent"], {})[key] = r
    assert len(by_agent) == 2
    mine, theirs = (by_agent[a] for a in sorted(by_agent, key=lambda a: a.startswith("cmd:")))
    assert mine.keys() == theirs.keys() and len(mine) == len(trials) // 2
    differ = [
        (key, part)
        for key in mine
        for part in ("control", "fault")
        if verdicts(mine[key][part]) != verdicts(theirs[key][part])
    ]
    assert not differ, differ
    assert all(theirs[k]["prefix_equivalent"] == mine[k]["prefix_equivalent"] for k in mine)
    print(f"{len(mine)} pairs x 2 agents, verdicts equal on all; {wall:.0f}s")


def program(tmp_path: Path, body: str) -> str:
    script = tmp_path / "agent.py"
    script.write_text(body)
    return f"{PY} {script}"


def test_placeholders_and_environment(tmp_path: Path) -> None:
    out = tmp_path / "seen.json"
    template = program(
        tmp_path,
        "import json, os, sys\n"
        f"json.dump({{'argv': sys.argv[1:], 'env': {{k: v for k, v in os.environ.items() "
        f"if k.startswith('UNDOBENCH_')}}}}, open({str(out)!r}, 'w'))\n",
    )
    launcher = CommandLauncher(template + " {task} {task_instance} {mcp_url} {mcp_config}")
    task = "Charge 'Ada' {x} 5 $HOME; rm -rf /"
    ctx = EpisodeContext(task=task, task_instance="task_1", mcp_url="http://127.0.0.1:9/mcp")
    running = launcher.start(ctx)
    deadline = time.monotonic() + 30
    while running.exit_code() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    running.stop()
    seen = json.loads(out.read_text())
    assert seen["argv"][:3] == [task, "task_1", "http://127.0.0.1:9/mcp"]  # one argument each
    assert seen["env"]["UNDOBENCH_TASK"] == task
    assert seen["env"]["UNDOBENCH_MCP_URL"] == "http://127.0.0.1:9/mcp"
    assert not Path(seen["env"]["UNDOBENCH_WORKDIR"]).exists()  # removed with the episode


@pytest.mark.parametrize(
    "template",
    ["", "python {nope}", "python {0}", "definitely-not-a-program-xyz --x", "python 'open"],
)
def test_bad_templates_fail_clearly(template: str) -> None:
    with pytest.raises(UndoBenchError, match="cmd:"):
        make_agent("cmd:" + template)


WF = find_workflow("pay-charge-customer")


def episode(env_for: Any, agent: Any, fault: str | None = "lost-ack") -> dict[str, Any]:
    return run_episode(env_for("payments"), agent, seed=1, workflow=WF.id, fault=fault)


def test_a_program_that_exits_without_finish_gives_up(env_for: Any, tmp_path: Path) -> None:
    agent = make_agent("cmd:" + program(tmp_path, "import sys; sys.exit(3)\n"))
    record = episode(env_for, agent)
    assert record["finish_status"] == "gave_up" and record["success"] is False
    assert record["transcript"][-1]["action"]["arguments"]["summary"].endswith(
        "(code 3) without calling finish"
    )
    assert agent._running is None  # stopped with its episode


def test_a_silent_program_is_truncated_and_killed(env_for: Any, tmp_path: Path) -> None:
    template = program(tmp_path, "import time; time.sleep(600)\n")
    launcher = CommandLauncher(template)
    agent = McpAgent(launcher, name="sleeper", time_limit_s=1.0)
    seen: list[Any] = []
    original = launcher.start

    def start(ctx: EpisodeContext) -> Any:
        running = original(ctx)
        seen.append(running)
        return running

    launcher.start = start  # type: ignore[method-assign]
    record = episode(env_for, agent, fault=None)
    assert record["truncated"] is True and record["truncated_reason"] == "time_limit"
    assert seen and seen[0].exit_code() is not None  # killed, not left running


def test_an_agent_that_launches_a_stdio_server(fake: Any, env_for: Any) -> None:
    """`{mcp_stdio_config}`: the agent launches the relay over stdio; same verdicts as the
    in-process agent, and the relay is gone with the episode."""
    use_gold(fake, [WF.id])
    direct = make_agent(f"openai:fake@{fake.base_url}")
    stdio = make_agent(
        f"cmd:{PY} -m undobench_gym.agents.mcp.reference --transport stdio "
        f"--agent openai:fake@{fake.base_url}"
    )
    runs = [
        run_pair(
            env_for("payments"),
            agent,
            workflow=WF,
            scenario=WF.scenario("lost-ack"),
            seed=2,
            method="bare",
            runtime="process",
        )
        for agent in (direct, stdio)
    ]
    for part in ("control", "fault"):
        assert verdicts(runs[1][part]) == verdicts(runs[0][part]), stdio.launcher.last_log
    assert runs[1]["fault"]["fault_fired"] is True


def test_a_provider_outage_in_the_program_is_an_infrastructure_error(
    fake: Any, env_for: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reference agent exits 75 when its model server stays down; the harness raises
    ProviderUnavailable (the sweep records and retries an infrastructure error), as for
    the in-process agent."""
    fake.policy = failing(use_gold(fake, [WF.id]).policy, range(10_000), status=503)
    for name, value in (("BACKOFF_S", "0.001"), ("BACKOFF_MAX_S", "0.01"), ("TIMEOUT_S", "5")):
        monkeypatch.setenv(f"UNDOBENCH_LLM_{name}", value)
    agent = make_agent(REFERENCE + fake.base_url)
    with pytest.raises(ProviderUnavailable):
        episode(env_for, GuardedAgent(agent), fault=None)
    assert "model provider unavailable" in agent.launcher.last_log
