"""A refactor changes no episode: every workflow's gold plan, in control and under every
fault scenario, and every recovery method on one workflow per domain, give the transcript,
state hash, verdict, effects and fault outcome recorded in tests/golden/episodes.json.

Regenerate the file (`python -m tests.golden.episodes`) only for an intended change of
meaning, and say so in the commit."""

from __future__ import annotations

import json
from typing import Any

import pytest

from undobench_gym.agents.methods import server_idempotency_for, wrap
from undobench_gym.agents.scripted import ScriptedAgent
from undobench_gym.core.catalog import find_workflow
from undobench_gym.core.pairing import run_episode

from .golden.episodes import FILE, SEED, cases, summary

GOLDEN: dict[str, dict[str, Any]] = json.loads(FILE.read_text())
CASES = list(cases())


def test_the_golden_file_covers_every_case() -> None:
    assert sorted(GOLDEN) == sorted(f"{m}|{w}|{s or 'control'}" for m, w, s in CASES)


@pytest.mark.parametrize(
    ("method", "workflow", "scenario"),
    CASES,
    ids=[f"{m}|{w}|{s or 'control'}" for m, w, s in CASES],
)
def test_episode_matches_the_golden_record(
    env_for: Any, method: str, workflow: str, scenario: str | None
) -> None:
    spec = find_workflow(workflow)
    env = wrap(env_for(spec.domain, server_idempotency_for(method)), method)
    record = run_episode(env, ScriptedAgent(), seed=SEED, workflow=workflow, fault=scenario)
    want = GOLDEN[f"{method}|{workflow}|{scenario or 'control'}"]
    got = summary(record)
    changed = {k: (want[k], got[k]) for k in want if want[k] != got[k]}
    assert not changed, f"changed since the golden record (want, got): {changed}"
