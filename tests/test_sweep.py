"""Sweep files (deterministic expansion, clear validation) and exactly-once resume after
the driver is killed with SIGKILL mid-sweep."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from undobench_gym.contract.errors import UndoBenchError
from undobench_gym.core.pairing import pair_id
from undobench_gym.core.trials import read_trials
from undobench_gym.harness.cli import main
from undobench_gym.harness.sweep import load_sweep

TOML = """
workflows = ["pay-charge-customer", "db-create-order"]
scenarios = ["lost-ack"]
methods = ["bare", "B0"]
seeds = "1-3"
agent = "scripted"
max_steps = 12
[execution]
workers = 2
trial_timeout = 60
"""

YAML = """
workflows: [pay-charge-customer, db-create-order]
scenario: lost-ack
method: bare,B0
seeds: [3, 2, 1, 2]
agents: [scripted]
max_steps: 12
execution: {workers: 2, trial_timeout: 60}
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_expansion_is_deterministic_and_ids_are_stable(tmp_path: Path) -> None:
    a = load_sweep(_write(tmp_path, "s.toml", TOML))
    b = load_sweep(_write(tmp_path, "s.yaml", YAML))
    assert a == b  # singular keys, comma lists and unsorted seeds normalise the same way
    trials = a.expand()
    order = [(t.workflow.id, t.scenario.id, t.method, t.seed) for t in trials]
    assert order == [
        (w, "lost-ack", m, s)
        for w in ("pay-charge-customer", "db-create-order")
        for m in ("bare", "B0")
        for s in (1, 2, 3)
    ]
    assert order == [(t.workflow.id, t.scenario.id, t.method, t.seed) for t in b.expand()]
    ids = [t.pair_id("scripted") for t in trials]
    assert len(set(ids)) == len(ids)
    assert ids[0] == pair_id("pay-charge-customer", "lost-ack", "bare", 1, "scripted")
    assert a.execution.workers == 2 and a.max_steps == 12


def test_a_split_expands_to_every_scenario_of_its_workflows(tmp_path: Path) -> None:
    spec = load_sweep(_write(tmp_path, "s.toml", 'split = "test"\nmethods = ["bare"]\nseeds = 1'))
    from undobench_gym.core.catalog import all_workflows

    assert len(spec.expand()) == sum(len(w.scenarios) for w in all_workflows("test"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('split = "test"\nmethods = ["B7"]\nseeds = 1', "methods: unknown method 'B7'"),
        ('split = "test"\nmethods = ["bare"]\nseeds = "5-1"', "seeds: bad seed range"),
        ('split = "test"\nmethods = ["bare"]\nseeds = 1\nworkers = 2', "workers: unknown key"),
        ('methods = ["bare"]\nseeds = 1', "exactly one of 'workflows'"),
        (
            'split = "dev"\nworkflows = ["pay-charge-customer"]\nmethods = ["bare"]\nseeds = 1',
            "exactly one of 'workflows'",
        ),
        ('workflows = ["nope"]\nmethods = ["bare"]\nseeds = 1', "unknown workflow 'nope'"),
        ('split = "test"\nmethod = "bare"\nmethods = ["B0"]\nseeds = 1', "not both"),
        ('split = "test"\nmethods = ["bare"]\nseeds = 1\n[execution]\nworkers = 0', "workers"),
        ('split = "prod"\nmethods = ["bare"]\nseeds = 1', "split:"),
        ("split = [", "not valid TOML"),
    ],
)
def test_invalid_sweep_files_say_which_key_is_wrong(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(UndoBenchError, match=r"invalid sweep file|not valid") as info:
        load_sweep(_write(tmp_path, "s.toml", text))
    assert message in str(info.value)


def test_other_problems_are_clear(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(UndoBenchError, match="not found"):
        load_sweep(tmp_path / "missing.toml")
    with pytest.raises(UndoBenchError, match=r"\.toml, \.yaml or \.yml"):
        load_sweep(_write(tmp_path, "s.json", "{}"))
    bad = 'workflows = ["pay-charge-customer"]\nscenarios = ["nope"]\nmethods = ["bare"]\nseeds = 1'
    with pytest.raises(UndoBenchError, match="has no scenario matching nope"):
        load_sweep(_write(tmp_path, "sc.toml", bad)).expand()
    sweep = _write(tmp_path, "ok.toml", TOML)
    assert main(["run", "--sweep", str(sweep), "--method", "B0", "--out", str(tmp_path)]) == 2
    assert "drop --method" in capsys.readouterr().err


# ---- kill -9 of the driver, then --resume ---------------------------------------------


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            tree.setdefault(ppid, []).append(int(entry))
    return tree


def _descendants(pid: int) -> set[int]:
    tree, out, todo = _children(), set(), [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            out.add(child)
            todo.append(child)
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


SWEEP = """
workflows = ["pay-charge-customer"]
methods = ["bare", "B0"]
seeds = "1-2"
"""


@pytest.mark.slow
def test_resume_after_sigkill_runs_every_pair_exactly_once(tmp_path: Path) -> None:
    sweep, out = _write(tmp_path, "s.toml", SWEEP), tmp_path / "run"
    expected = {t.pair_id("scripted") for t in load_sweep(sweep).expand()}
    trials = out / "trials.jsonl"
    cmd = [sys.executable, "-m", "undobench_gym.harness.cli", "run", "--sweep", str(sweep)]
    driver = subprocess.Popen([*cmd, "--workers", "2", "--out", str(out), "--quiet"])
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and driver.poll() is None:
        if trials.exists() and trials.read_bytes().count(b"\n") >= 3:
            break
        time.sleep(0.05)
    assert driver.poll() is None, "the sweep ended before it could be killed"
    tree = _descendants(driver.pid)  # workers, their services and proxies
    assert len(tree) >= 4
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(_alive(p) for p in tree):
        time.sleep(0.1)
    assert not [p for p in tree if _alive(p)], "processes of the killed run are still alive"
    before = [t["pair_id"] for t in read_trials(trials)]
    assert 3 <= len(before) < len(expected)
    meta = json.loads((out / "run_meta.json").read_text())
    assert meta["sessions"][-1]["finished"] is None  # the killed session says so

    assert main(["run", "--sweep", str(sweep), "--out", str(out), "--resume", "--quiet"]) == 0
    ids = [t["pair_id"] for t in read_trials(trials)]
    assert len(ids) == len(set(ids)) == len(expected) and set(ids) == expected
    assert ids[: len(before)] == before
    meta = json.loads((out / "run_meta.json").read_text())
    assert [s["finished"] is None for s in meta["sessions"]] == [True, False]
    assert meta["counts"]["pairs"] == len(expected)
    retries = json.loads((out / "summary.json").read_text())["retries"]
    assert retries["policy"] == meta["retry_policy"] and retries["pairs"] == len(expected)


def test_the_sweep_default_http_timeout_is_the_envs() -> None:
    import inspect

    from undobench_gym.core.env import UndoBenchEnv
    from undobench_gym.harness.executors.base import DEFAULT_HTTP_TIMEOUT_S

    default = inspect.signature(UndoBenchEnv.__init__).parameters["http_timeout"].default
    assert default == DEFAULT_HTTP_TIMEOUT_S


@pytest.mark.slow
def test_http_timeout_sets_what_a_timeout_fault_costs_and_nothing_else(tmp_path: Path) -> None:
    """A lost acknowledgement seen as a timeout: the faulted call waits the sweep's client
    timeout. A shorter one saves that wait and changes no verdict; run_meta records it."""
    runs = {}
    for timeout in (2.0, 0.4):
        out = tmp_path / f"t{timeout}"
        argv = ["run", "--workflows", "pay-renew-subscription", "--scenarios", "lost-ack-timeout"]
        argv += ["--method", "bare,B2", "--seeds", "1", "--quiet", "--out", str(out)]
        assert main([*argv, "--http-timeout", str(timeout)]) == 0
        runs[timeout] = {t["pair_id"]: t for t in read_trials(out / "trials.jsonl")}
        meta = json.loads((out / "run_meta.json").read_text())
        assert meta["sessions"][-1]["http_timeout_s"] == timeout
    long, short = runs[2.0], runs[0.4]
    assert long.keys() == short.keys() and len(long) == 2
    for pid, record in long.items():
        for arm in ("control", "fault"):
            a, b = record[arm], short[pid][arm]
            assert (a["success"], a["effects"], a["state_hash"]) == (
                b["success"],
                b["effects"],
                b["state_hash"],
            )
        assert record["fault"]["fault_fired"] and record["fault"]["fault"]["visible_error"] == (
            "timeout"
        )
        # at least one faulted call waited the client's timeout: 1.6 s less with 0.4 s
        assert record["wall_ms"] - short[pid]["wall_ms"] > 1200


def test_boundaries_pick_each_workflows_scenarios_at_that_boundary(tmp_path: Path) -> None:
    text = (
        'workflows = ["pay-charge-customer", "db-transfer-funds"]\n'
        'boundaries = ["POST_MUTATION_PRE_ACK"]\nmethods = ["bare"]\nseeds = 1'
    )
    trials = load_sweep(_write(tmp_path, "b.toml", text)).expand()
    assert [(t.workflow.id, t.scenario.id) for t in trials] == [
        ("pay-charge-customer", "lost-ack"),
        ("pay-charge-customer", "ambiguous"),
        ("db-transfer-funds", "during-mid-transfer"),
        ("db-transfer-funds", "credit-lost-ack"),
    ]
    bad = text.replace("POST_MUTATION_PRE_ACK", "NOT_A_BOUNDARY")
    with pytest.raises(UndoBenchError, match="boundaries"):
        load_sweep(_write(tmp_path, "c.toml", bad))
