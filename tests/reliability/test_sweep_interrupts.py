"""A sweep driver (`python -m undobench_gym.harness.cli run`) interrupted by SIGINT, SIGTERM or
SIGKILL.

After the signal no service, proxy or worker of the driver may still run (checked by pid:
PR_SET_PDEATHSIG and process groups), every line of trials.jsonl must be a whole trial,
and `--resume` must finish the sweep with every planned pair exactly once.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from undobench_gym.harness.runner import expand

from .conftest import Figures
from .procs import Proc, stack_processes, wait_gone

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
WORKFLOW = "pay-charge-customer"
SEEDS = "1-15"


def planned() -> int:
    return len(expand([WORKFLOW], None, ["bare"], list(range(1, 16))))


def start(out: Path, workers: int, resume: bool = False) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable,
        "-m",
        "undobench_gym.harness.cli",
        "run",
        "--workflows",
        WORKFLOW,
        "--method",
        "bare",
        "--seeds",
        SEEDS,
        "--agent",
        "scripted",
        "--runtime",
        "process",
        "--workers",
        str(workers),
        "--out",
        str(out),
        "--quiet",
    ]
    if resume:
        cmd.append("--resume")
    return subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def lines(out: Path) -> list[str]:
    path = out / "trials.jsonl"
    return path.read_text().splitlines(keepends=True) if path.exists() else []


def wait_for_trials(proc: subprocess.Popen[bytes], out: Path, n: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while len(lines(out)) < n:
        assert proc.poll() is None, proc.communicate()[1].decode()[-2000:]
        assert time.monotonic() < deadline, f"fewer than {n} trials after {timeout}s"
        time.sleep(0.02)


def stack_of(pid: int) -> list[Proc]:
    """The driver's services, proxies and workers (there is a stack once a trial is done)."""
    return stack_processes(pid)


def workdirs(procs: list[Proc]) -> list[Path]:
    out = []
    for p in procs:
        if "--data-dir" in p.cmdline:
            out.append(Path(p.cmdline[p.cmdline.index("--data-dir") + 1]).parent)
        elif p.role == "service":  # forked from a zygote: its stderr is the stack's log
            with contextlib.suppress(OSError):
                out.append(Path(os.readlink(f"/proc/{p.pid}/fd/2")).parent)
    return out


def check_file(out: Path, complete: bool) -> list[dict[str, Any]]:
    text = lines(out)
    whole = [ln for ln in text if ln.endswith("\n")]
    records = [json.loads(ln) for ln in whole]
    ids = [r["pair_id"] for r in records]
    assert len(ids) == len(set(ids)), "a pair was recorded twice"
    if complete:
        assert len(whole) == len(text), "a cut line was left behind"
        assert len(ids) == planned(), (len(ids), planned())
    return records


def resume(out: Path, workers: int) -> None:
    proc = start(out, workers, resume=True)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err.decode()[-3000:]
    check_file(out, complete=True)


@pytest.mark.parametrize(
    ("sig", "workers"),
    [(signal.SIGINT, 1), (signal.SIGINT, 2), (signal.SIGTERM, 1), (signal.SIGTERM, 2)],
)
def test_sigint_or_sigterm_keeps_recorded_trials_and_resume_completes(
    sig: signal.Signals, workers: int, tmp_path: Path, figures: Figures
) -> None:
    """Ctrl-C, or SIGTERM from a scheduler (`timeout`, systemd, SLURM, Kubernetes): the
    same orderly stop, exit 130 or 143."""
    proc = start(tmp_path, workers)
    wait_for_trials(proc, tmp_path, 3)
    children = stack_of(proc.pid)
    assert children, "no stack processes under the driver"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    expected = 130 if sig == signal.SIGINT else 143
    assert proc.returncode == expected, (proc.returncode, err.decode()[-2000:])
    assert "--resume" in err.decode()
    assert not wait_gone([p.pid for p in children], timeout=15), "processes outlived Ctrl-C"
    assert not any(d.exists() for d in workdirs(children)), "a stack's workdir was left behind"
    kept = len(check_file(tmp_path, complete=False))
    assert 3 <= kept < planned()
    # the stopped session's run_meta says what it wrote, though `_drive` never returned
    session = json.loads((tmp_path / "run_meta.json").read_text())["sessions"][-1]
    assert session["written"] == kept and session["finished"]
    resume(tmp_path, workers)
    figures.add(
        "harness_faults",
        f"{sig.name.lower()}_driver_workers{workers}",
        {
            "recorded_before_signal": kept,
            "planned": planned(),
            "processes_left": 0,
            "duplicates": 0,
            "lost": 0,
        },
    )


@pytest.mark.parametrize("workers", [1, 2])
def test_sigkill_leaves_no_process_and_resume_completes(
    workers: int, tmp_path: Path, figures: Figures
) -> None:
    killed, left_dirs, processes = 0, 0, 0
    stale: list[Path] = []
    for round_, at in enumerate((3, 12)):
        proc = start(tmp_path, workers, resume=round_ > 0)
        wait_for_trials(proc, tmp_path, at)
        children = stack_of(proc.pid)
        assert children, "no stack processes under the driver"
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
        killed += 1
        processes += len(children)
        survivors = wait_gone([p.pid for p in children], timeout=15)
        assert not survivors, f"still running after the driver's SIGKILL: {survivors}"
        # SIGKILL leaves the driver no chance to clean up: with one worker (the driver
        # itself) the workdirs stay in $TMPDIR until the next process runtime (here: the
        # resumed run's) removes those of dead owners. Worker processes get SIGTERM from
        # the kernel and close their stacks, which almost always removes the workdirs
        # (0 left in 3 local runs; 1 of 4 in each of two CI runs, cause not found); what is left
        # is counted, and must be gone after the resume.
        left = [d for d in workdirs(children) if d.exists()]
        left_dirs += len(left)
        stale += left
        check_file(tmp_path, complete=False)
    resume(tmp_path, workers)
    assert not [d for d in stale if d.exists()], "workdirs of the killed drivers are still there"
    figures.add(
        "harness_faults",
        f"sigkill_driver_workers{workers}",
        {
            "kills": killed,
            "processes_checked_gone": processes,
            "processes_left": 0,
            "workdirs_left_by_kills": left_dirs,
            "workdirs_left_after_resume": 0,
            "duplicates": 0,
            "lost": 0,
            "planned": planned(),
        },
    )
