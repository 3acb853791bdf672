"""The core install without the `eval` extra: stacks run, `gym.make` loops run, a sweep
records trials with --no-report and refuses (in a second, before any pair) without it.

The extra's packages are hidden from every Python process of the test, the stack's service
and proxy included, by a `sitecustomize` on PYTHONPATH that refuses to import them: what an
install without them would do, without building a second virtual environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from undobench_gym.core.extras import EXTRAS

pytestmark = pytest.mark.slow

#: What a core install lacks: the eval extra less jinja2, which mitmproxy's flask pulls into
#: the core anyway, plus pandas (statsmodels' dependency).
HIDDEN = (*(m for m in EXTRAS["eval"] if m != "jinja2"), "pandas")

BLOCKER = textwrap.dedent(
    f"""
    import sys

    HIDDEN = {HIDDEN!r}

    class _Hide:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in HIDDEN:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return None

    sys.meta_path.insert(0, _Hide())
    """
)

GYM_LOOP = textwrap.dedent(
    """
    import json, sys
    import gymnasium as gym
    import undobench_gym  # registers the envs
    env = gym.make("UndoBench/Payments-v0")
    env.reset(seed=3, options={"workflow": "pay-charge-customer", "fault": "lost-ack"})
    env.step({"tool": "list_charges", "arguments": {}})
    done = {"tool": "finish", "arguments": {"status": "done"}}
    obs, reward, terminated, truncated, info = env.step(done)
    env.close()
    hidden = [m for m in ("scipy", "statsmodels", "matplotlib", "pandas") if m in sys.modules]
    print(json.dumps({"terminated": terminated, "reward": reward, "hidden_loaded": hidden}))
    """
)


def _lean_env(tmp_path: Path) -> dict[str, str]:
    site = tmp_path / "lean-site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    return env


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "undobench_gym.harness.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_the_blocker_hides_the_eval_extra(tmp_path: Path) -> None:
    """Guard for the tests below: the hidden packages really cannot be imported."""
    probe = "import importlib.util as u; print(u.find_spec('scipy') is None)"
    hidden = subprocess.run(
        [sys.executable, "-c", "import scipy"], env=_lean_env(tmp_path), capture_output=True
    )
    assert hidden.returncode != 0 and b"No module named 'scipy'" in hidden.stderr
    seen = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert seen.stdout.strip() == "False"  # and this venv does have it


def test_a_gym_make_loop_runs_without_the_eval_extra(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", GYM_LOOP],
        env=_lean_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["terminated"] is True
    assert result["hidden_loaded"] == []


def test_a_sweep_records_without_the_eval_extra_and_reports_later(tmp_path: Path) -> None:
    """The default command works on the default install: the trials are recorded, and the
    report is named as what the eval extra adds (with the command that writes it later)."""
    env, out = _lean_env(tmp_path), tmp_path / "run"
    sweep = ["run", "--workflows", "pay-charge-customer", "--method", "bare,B2"]
    sweep += ["--seeds", "1", "--scenarios", "lost-ack,ambiguous", "--quiet", "--out", str(out)]

    recorded = _cli(sweep, env)
    assert recorded.returncode == 0, recorded.stderr[-2000:]
    assert "'eval' extra" in recorded.stderr
    assert "pip install 'undobench-gym[eval]'" in recorded.stderr
    assert f"undobench report {out}" in recorded.stderr
    lines = (out / "trials.jsonl").read_text().splitlines()
    assert len(lines) == 4 and not (out / "summary.json").exists()

    quiet = _cli([*sweep, "--no-report", "--out", str(tmp_path / "run2")], env)
    assert quiet.returncode == 0 and "'eval' extra" not in quiet.stderr

    lean_report = _cli(["report", str(out)], env)
    assert lean_report.returncode == 2 and "'eval' extra" in lean_report.stderr

    full = _cli(["report", str(out), "--json", "--no-plots"], dict(os.environ))
    assert full.returncode == 0, full.stderr[-2000:]
    assert json.loads(full.stdout)["overall"]["N"] == 4
