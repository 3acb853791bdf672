"""Golden episodes: the gold plan of every workflow, in control and under every fault
scenario, plus every recovery method on one workflow per domain, each reduced to digests
of what a refactor must not change (transcript, state hash, verdict, effects, fault
outcome).

`python -m tests.golden.episodes` rewrites `episodes.json` from the code as it is; the
test in tests/test_golden_episodes.py compares the code against the file. Regenerate only
when a change of meaning is intended, and say so in the commit.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import undobench_gym  # noqa: F401 - registers the env ids
from undobench_gym.agents.methods import METHODS, server_idempotency_for, wrap
from undobench_gym.agents.scripted import ScriptedAgent
from undobench_gym.core.catalog import all_workflows
from undobench_gym.core.env import UndoBenchEnv
from undobench_gym.core.pairing import run_episode

FILE = Path(__file__).with_name("episodes.json")
SEED = 5
KEYS = ("transcript", "state_hash", "verdict", "fault_fired", "effects", "fault_outcome")


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cases() -> Iterator[tuple[str, str, str | None]]:
    """(method, workflow id, scenario id or None), in a fixed order."""
    workflows = all_workflows()
    for w in workflows:
        yield "bare", w.id, None
        for s in w.scenarios:
            yield "bare", w.id, s.id
    first: dict[str, Any] = {}
    for w in workflows:
        first.setdefault(w.domain, w)
    for method in METHODS:
        if method == "bare":
            continue
        for w in first.values():
            yield method, w.id, None
            yield method, w.id, w.scenarios[0].id


def summary(record: dict[str, Any]) -> dict[str, Any]:
    out = {k: _digest(record.get(k)) for k in KEYS}
    out["success"] = record.get("success")
    return out


def play_all() -> dict[str, dict[str, Any]]:
    domain_of = {w.id: w.domain for w in all_workflows()}
    envs: dict[tuple[str, str], UndoBenchEnv] = {}
    out: dict[str, dict[str, Any]] = {}
    try:
        for method, wid, scenario in cases():
            idem = server_idempotency_for(method)
            key = (domain_of[wid], idem)
            if key not in envs:
                envs[key] = UndoBenchEnv(key[0], server_idempotency=idem)
            env = wrap(envs[key], method)
            record = run_episode(env, ScriptedAgent(), seed=SEED, workflow=wid, fault=scenario)
            out[f"{method}|{wid}|{scenario or 'control'}"] = summary(record)
    finally:
        for env in envs.values():
            env.close()
    return out


if __name__ == "__main__":
    FILE.write_text(json.dumps(play_all(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {FILE}")
