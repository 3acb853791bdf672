"""Stack processes forked from zygotes (`core.runtime.warm`): a stack built from them
serves, restarts and closes like one started cold, its processes' exits are known, and a
zygote is used only under the environment it was started in."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from undobench_gym.core.runtime.process import ProcessRuntime
from undobench_gym.core.runtime.warm import WARM, SharedZygotes, WarmPool, Zygote
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


def _zygote_pids(pool: WarmPool) -> list[int]:
    return [z.proc.pid for z in pool._zygotes.values()]


def _forked(rt: ProcessRuntime) -> list[int]:
    """The stack's own service and proxy processes (not the fork server's child)."""
    return [c.proc.pid for c in (rt._service, rt._proxy) if c.proc is not None]


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_a_stack_forked_from_zygotes_serves_restarts_and_closes_like_a_cold_one(
    warm: WarmPool,
) -> None:
    taken = warm.taken
    with ProcessRuntime("payments"):  # cold: the zygotes start once this one has started
        assert warm.taken == taken and len(_zygote_pids(warm)) == 2
    zygotes = _zygote_pids(warm)
    rt = ProcessRuntime("database")
    with rt, httpx.Client(headers=rt.endpoints.auth) as http:
        assert warm.taken == taken + 2
        # forked by these very zygotes, each its own process group
        forked = _forked(rt)
        assert sorted(_parent(p) for p in forked) == sorted(zygotes)
        assert all(os.getpgid(p) == p for p in forked)
        ep = rt.endpoints
        admin = ep.admin_urls["database"]
        http.post(f"{admin}/admin/reset", json={"seed": 4}).raise_for_status()
        before = http.get(f"{admin}/admin/state").json()["hash"]
        # through the proxy, which names the call by its tool table
        assert httpx.get(f"{ep.agent_url}/database/v1/orders").status_code == 200
        wire = http.get(f"{ep.control_url}/control/wire").json()["events"]
        assert [e["tool"] for e in wire] == ["list_orders"]
        # the token came in the order, never on a command line; no Gymnasium in a stack
        for pid in [*rt.process_pids(), *zygotes]:
            assert ep.token.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
            assert "/numpy/" not in Path(f"/proc/{pid}/maps").read_text()
        # the proxy writes to the stack's own log
        assert (rt.workdir / "proxy.log").exists()
        # a crash restart from the forked service's fork server keeps the data
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
        # a proxy killed outright: its exit status comes from the zygote, and it is
        # started again (cold: restarts exec)
        proxy = rt.pids()[1]
        os.kill(proxy, signal.SIGKILL)
        assert rt._proxy.proc is not None and rt._proxy.proc.wait(timeout=5) == -signal.SIGKILL
        rt.wait_healthy(timeout=20)
        assert rt._proxy.exits == [-signal.SIGKILL] and rt.pids()[1] != proxy
        assert httpx.get(f"{ep.agent_url}/database/v1/orders").status_code == 200
        pids = rt.pids() + rt.process_pids()
    assert _gone(pids)
    assert not rt.workdir.exists()
    # one zygote serves many stacks
    for domain in ("crm", "git"):
        with ProcessRuntime(domain) as rt:
            assert sorted(_parent(p) for p in _forked(rt)) == sorted(zygotes)
    assert warm.taken == taken + 6 and _zygote_pids(warm) == zygotes


def test_a_zygote_started_under_another_environment_is_not_used(
    warm: WarmPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ProcessRuntime("payments"):
        pass
    stale, taken = _zygote_pids(warm), warm.taken
    assert len(stale) == 2
    monkeypatch.setenv("UNDOBENCH_TEST_ANOTHER_ENVIRONMENT", "1")  # e.g. a new PYTHONPATH
    with ProcessRuntime("crm") as rt:
        assert warm.taken == taken
        assert httpx.get(f"{rt.endpoints.agent_url}/crm/v1/accounts").status_code == 200
    assert _gone(stale)
    fresh = _zygote_pids(warm)  # started under the new environment, for the next stack
    assert len(fresh) == 2 and not set(fresh) & set(stale)


def test_zygotes_stop_with_the_pool_once_their_stacks_have_and_at_eof(
    warm: WarmPool,
) -> None:
    with ProcessRuntime("payments"):
        pass
    zygotes = _zygote_pids(warm)
    with ProcessRuntime("crm") as rt:  # forked: a closed pool waits for it
        warm.close()
        time.sleep(0.3)
        assert all(_alive(p) for p in zygotes)
        assert httpx.get(f"{rt.endpoints.agent_url}/crm/v1/accounts").status_code == 200
        pids = rt.process_pids()
    assert _gone(pids) and _gone(zygotes)
    with ProcessRuntime("payments"):  # closed: nothing starts again
        pass
    assert _zygote_pids(warm) == []
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    cmd = [sys.executable, "-m", "undobench_gym.services.warm", "proxy"]
    proc = subprocess.Popen(cmd, stdin=theirs.fileno())
    theirs.close()
    ours.close()  # its owner went away before it was needed
    assert proc.wait(timeout=30) == 0
    wrong = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    assert wrong.returncode == 1 and "SOCK_SEQPACKET" in wrong.stderr


def test_the_processes_a_zygote_forked_die_with_it() -> None:
    zygote = Zygote("proxy")
    assert zygote.ready.wait(30)
    log = Path(f"/tmp/undobench-test-zygote-{os.getpid()}.log")
    try:
        with socket.socket() as s:  # a port nobody listens on: the proxy still starts
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        proc = zygote.fork(["--listen-host", "127.0.0.1", "--listen-port", "0", "--mode",
                            f"reverse:http://127.0.0.1:{port}/"], {}, log, False)  # fmt: skip
        assert proc is not None and proc.poll() is None
        os.kill(zygote.proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=10) == -signal.SIGTERM
        assert _gone([proc.pid])
        assert zygote.fork(["--help"], {}, log, False) is None  # a dead zygote forks nothing
    finally:
        log.unlink(missing_ok=True)
        zygote.close()


def test_shared_zygotes_serve_every_worker_and_kill_what_a_lost_worker_left() -> None:
    shared = SharedZygotes()
    log = Path(f"/tmp/undobench-test-shared-{os.getpid()}.log")
    try:
        owners = {z.kind: z.proc.pid for z in shared.zygotes if z.proc is not None}
        a, b = (Zygote("proxy", address=shared.addresses["proxy"]) for _ in range(2))
        procs = []
        for client in (a, b):
            assert client.ready.wait(30) and client.proc is None
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            proc = client.fork(["--listen-host", "127.0.0.1", "--listen-port", "0", "--mode",
                                f"reverse:http://127.0.0.1:{port}/"], {}, log, False)  # fmt: skip
            assert proc is not None and _parent(proc.pid) == owners["proxy"]
            procs.append(proc)
        # a worker's connection ends before it closed its stacks (it was SIGKILLed): they go
        a.sock.shutdown(socket.SHUT_RDWR)
        assert _gone([procs[0].pid])
        assert procs[1].poll() is None  # the other worker's stays, and its exit is reported
        os.kill(procs[1].pid, signal.SIGKILL)
        assert procs[1].wait(timeout=10) == -signal.SIGKILL
        # its owner's end closed: the zygote takes no new worker, but serves the one left
        owner = next(z for z in shared.zygotes if z.kind == "proxy")
        owner.sock.shutdown(socket.SHUT_RDWR)
        with pytest.raises(OSError):
            Zygote("proxy", address=shared.addresses["proxy"])
        again = b.fork(["--listen-host", "127.0.0.1", "--listen-port", "0", "--mode",
                        f"reverse:http://127.0.0.1:{port}/"], {}, log, False)  # fmt: skip
        assert again is not None and again.poll() is None
        again.kill()
        assert again.wait(timeout=10) == -signal.SIGKILL
        b.close()
    finally:
        shared.close()
        log.unlink(missing_ok=True)
    assert _gone(list(owners.values())) and not shared.folder.exists()


def test_the_pool_is_on_once_a_sweep_enables_it_unless_turned_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pool = WarmPool()
    pool.fill()  # an env outside a sweep never enables it: no idle processes
    assert not pool.enabled and pool._zygotes == {}
    for value in ("0", "off", "false"):
        monkeypatch.setenv("UNDOBENCH_WARM_STACKS", value)
        pool.enable()
        pool.fill()
        assert not pool.enabled and pool._zygotes == {}
    for value in (None, "1"):
        if value is None:
            monkeypatch.delenv("UNDOBENCH_WARM_STACKS", raising=False)
        else:
            monkeypatch.setenv("UNDOBENCH_WARM_STACKS", value)
        pool.enable()
        assert pool.enabled
        pool.close()
        assert not pool.enabled


def test_a_sweep_with_zygotes_gives_the_same_verdicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two workers, each on two domains in turn: their stacks are forked from the driver's
    zygotes (its children, the only zygotes), and every pair's record equals a sweep's
    without them; one worker in this process forks its later stacks from its own."""
    trials = expand(
        ["pay-charge-customer", "db-create-order", "crm-convert-lead"],
        None,
        ["bare", "B0"],
        [1],
    )
    verdicts = {}
    seen: list[dict[int, int]] = []

    def look(_trial: dict[str, object]) -> None:
        """The zygotes and what they forked below this process now, with their parents."""
        warm = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if b"undobench_gym.services.warm" in (entry / "cmdline").read_bytes():
                        warm[int(entry.name)] = _parent(int(entry.name))
                except (OSError, IndexError):
                    continue
        seen.append(warm)

    for warm, workers in (("0", 2), ("1", 2), ("1", 1)):
        monkeypatch.setenv("UNDOBENCH_WARM_STACKS", warm)
        out = tmp_path / f"{warm}-{workers}"
        taken = WARM.taken
        seen.clear()
        run_sweep(trials, agent_spec="scripted", runtime="process", out=out, progress=False,
                  report=False, workers=workers, max_stacks=1, on_trial=look)  # fmt: skip
        if workers == 1:  # in this process: its later stacks were forked
            assert WARM.taken - taken >= 4
        elif warm == "1":  # two zygotes, the driver's own children, shared by both workers
            for warm_now in seen:
                zygotes = {p for p, parent in warm_now.items() if parent not in warm_now}
                assert len(zygotes) == 2 and {warm_now[p] for p in zygotes} == {os.getpid()}
                forked = {p for p, parent in warm_now.items() if parent in zygotes}
                assert len(forked) >= 2  # a stack's service and proxy (a fork server's
                assert set(warm_now) - zygotes - forked <= {  # serving child below it)
                    p for p, parent in warm_now.items() if parent in forked
                }
        else:
            assert seen and not any(seen)
        verdicts[out.name] = {
            t["pair_id"]: (t["control"]["success"], t["fault"]["success"], t["fault"]["state_hash"])
            for t in read_trials(out / "trials.jsonl")
        }
    assert len(verdicts["1-2"]) == len(trials)
    assert verdicts["0-2"] == verdicts["1-2"] == verdicts["1-1"]
