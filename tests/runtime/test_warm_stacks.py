"""Stack processes started before they are needed (`core.runtime.warm`): a stack built
from them serves, restarts and closes like one started cold, and a ready process is used
only under the environment it was started in."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from undobench_gym.core.runtime.process import ProcessRuntime
from undobench_gym.core.runtime.warm import WARM, WarmPool
from undobench_gym.core.trials import read_trials
from undobench_gym.harness.runner import expand, run_sweep


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _gone(pids: list[int], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(_alive(p) for p in pids)


@pytest.fixture
def warm(monkeypatch: pytest.MonkeyPatch) -> Iterator[WarmPool]:
    monkeypatch.setenv("UNDOBENCH_WARM_STACKS", "1")
    WARM.enable()
    try:
        yield WARM
    finally:
        WARM.close()


def _ready_pids(pool: WarmPool) -> list[int]:
    return [r.proc.pid for r in pool._ready.values()]


def test_a_stack_from_ready_processes_serves_restarts_and_closes_like_a_cold_one(
    warm: WarmPool,
) -> None:
    taken = warm.taken
    with ProcessRuntime("payments"):  # cold: the pool fills once this one has started
        assert warm.taken == taken and len(_ready_pids(warm)) == 2
    ready = _ready_pids(warm)
    rt = ProcessRuntime("database")
    with rt, httpx.Client(headers=rt.endpoints.auth) as http:
        assert warm.taken == taken + 2
        assert set(ready) <= set(rt.pids()) | set(rt.process_pids())  # these very processes
        ep = rt.endpoints
        admin = ep.admin_urls["database"]
        http.post(f"{admin}/admin/reset", json={"seed": 4}).raise_for_status()
        before = http.get(f"{admin}/admin/state").json()["hash"]
        # through the proxy, which names the call by its tool table
        assert httpx.get(f"{ep.agent_url}/database/v1/orders").status_code == 200
        wire = http.get(f"{ep.control_url}/control/wire").json()["events"]
        assert [e["tool"] for e in wire] == ["list_orders"]
        # the token came on stdin, never on a command line; no Gymnasium in a stack process
        for pid in rt.process_pids():
            assert ep.token.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
            assert "/numpy/" not in Path(f"/proc/{pid}/maps").read_text()
        # the proxy writes to the stack's own log from the moment it took its arguments
        assert (rt.workdir / "proxy.log").exists()
        # a crash restart from the ready service's fork server keeps the data
        old = http.get(f"{admin}/admin/health").json()["pid"]
        os.kill(old, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while True:
            try:
                health = http.get(f"{admin}/admin/health").json()
                if health["pid"] != old:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline
            time.sleep(0.05)
        rt.wait_healthy(timeout=20)  # the next server answers: its EXIT line is there
        assert health["pid"] != old and rt.service_exits == [-signal.SIGKILL]
        assert http.get(f"{admin}/admin/state").json()["hash"] == before
        pids = rt.pids() + rt.process_pids()
    assert _gone(pids)
    assert not rt.workdir.exists()


def test_a_ready_process_started_under_another_environment_is_not_used(
    warm: WarmPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ProcessRuntime("payments"):
        pass
    stale, taken = _ready_pids(warm), warm.taken
    assert len(stale) == 2
    monkeypatch.setenv("UNDOBENCH_TEST_ANOTHER_ENVIRONMENT", "1")  # e.g. a new PYTHONPATH
    with ProcessRuntime("crm") as rt:
        assert warm.taken == taken
        assert httpx.get(f"{rt.endpoints.agent_url}/crm/v1/accounts").status_code == 200
    assert _gone(stale)


def test_ready_processes_never_taken_stop_with_the_pool_or_at_eof(warm: WarmPool) -> None:
    with ProcessRuntime("payments"):
        pass
    ready = _ready_pids(warm)
    warm.close()
    assert _gone(ready)
    with ProcessRuntime("payments"):  # closed: nothing refills
        pass
    assert _ready_pids(warm) == []
    proc = subprocess.Popen(
        [sys.executable, "-m", "undobench_gym.services.warm", "proxy"], stdin=subprocess.PIPE
    )
    assert proc.stdin is not None
    proc.stdin.close()  # its owner went away before it was needed
    assert proc.wait(timeout=30) == 0


def test_the_pool_is_off_unless_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    pool = WarmPool()
    pool.fill()
    assert pool._ready == {}
    for value in (None, "0"):
        if value is None:
            monkeypatch.delenv("UNDOBENCH_WARM_STACKS", raising=False)
        else:
            monkeypatch.setenv("UNDOBENCH_WARM_STACKS", value)
        pool.enable()
        pool.fill()
        assert not pool.enabled and pool._ready == {}
    monkeypatch.setenv("UNDOBENCH_WARM_STACKS", "1")
    pool.enable()
    assert pool.enabled
    pool.close()


def test_a_sweep_with_ready_processes_gives_the_same_verdicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two workers, each on two domains in turn: the second stack of each comes from ready
    processes, and every pair's record equals a sweep's without them."""
    trials = expand(
        ["pay-charge-customer", "db-create-order", "crm-convert-lead"],
        None,
        ["bare", "B0"],
        [1],
    )
    verdicts = {}
    for warm, workers in (("0", 2), ("1", 2), ("1", 1)):
        monkeypatch.setenv("UNDOBENCH_WARM_STACKS", warm)
        out = tmp_path / f"{warm}-{workers}"
        taken = WARM.taken
        run_sweep(trials, agent_spec="scripted", runtime="process", out=out, progress=False,
                  report=False, workers=workers, max_stacks=1)  # fmt: skip
        if workers == 1:  # in this process: its later stacks came from ready processes
            assert WARM.taken - taken >= 4
        verdicts[out.name] = {
            t["pair_id"]: (t["control"]["success"], t["fault"]["success"], t["fault"]["state_hash"])
            for t in read_trials(out / "trials.jsonl")
        }
    assert len(verdicts["1-2"]) == len(trials)
    assert verdicts["0-2"] == verdicts["1-2"] == verdicts["1-1"]
