"""The stack's processes serve on uvloop and httptools (core dependencies), and on asyncio's
loop and h11 where those are missing (uvloop has no Windows build): the same episode and
the same verdict either way.

Whether a process uses them is read from its memory map: a C extension that was imported
is mapped. Hiding them works as in `tests/test_lean_install.py`: a `sitecustomize` on
PYTHONPATH, which the service and the proxy inherit, refuses to import them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/<pid>/maps")

EPISODE = textwrap.dedent(
    """
    import json
    import gymnasium as gym
    import undobench_gym  # registers the envs
    env = gym.make("UndoBench/Payments-v0")
    env.reset(seed=3, options={"workflow": "pay-charge-customer", "fault": "lost-ack"})
    env.step({"tool": "list_charges", "arguments": {}})
    env.step({"tool": "create_charge", "arguments": {"customer": "cus_x", "amount": 100}})
    maps = [open(f"/proc/{pid}/maps").read() for pid in env.unwrapped._stack.runtime.pids()]
    done = {"tool": "finish", "arguments": {"status": "done"}}
    obs, reward, terminated, truncated, info = env.step(done)
    env.close()
    verdict = info["verdict"]
    print(json.dumps({
        "processes": len(maps),
        "uvloop": ["uvloop" in m for m in maps],
        "httptools": ["httptools" in m for m in maps],
        "reward": reward,
        "terminated": terminated,
        "verdict": {k: v for k, v in verdict.items() if not k.endswith("_ms")},
    }, sort_keys=True, default=str))
    """
)

BLOCKER = textwrap.dedent(
    """
    import sys

    class _Hide:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("uvloop", "httptools"):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, _Hide())
    """
)


def _episode(env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", EPISODE], env=env, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_service_and_proxy_serve_on_uvloop_and_httptools_and_fall_back_without(
    tmp_path: Path,
) -> None:
    fast = _episode(dict(os.environ))
    assert fast["processes"] == 2  # the process serving the domain, and the proxy
    assert fast["uvloop"] == [True, True]
    assert fast["httptools"] == [True, True]

    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    plain = _episode(env)
    assert plain["uvloop"] == [False, False]
    assert plain["httptools"] == [False, False]

    for result in (fast, plain):
        del result["uvloop"], result["httptools"]
    assert plain == fast
