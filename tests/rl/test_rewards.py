"""The rewards read the verdict only; harm can never pay."""

from __future__ import annotations

from typing import Any

from undobench_gym.harness.rl import shaped_reward, verdict_reward


def _v(success: bool, passed: list[bool], **harm: list[Any]) -> dict[str, Any]:
    return {
        "success": success,
        "invariants": [{"description": "x", "passed": p} for p in passed],
        **harm,
    }


def test_verdict_reward_is_success_only() -> None:
    assert verdict_reward(_v(True, [True])) == 1.0
    # The state is right but a charge was duplicated: the oracle says no success.
    assert verdict_reward(_v(False, [True], duplicates=[{"id": 1}])) == 0.0


def test_shaped_reward_penalises_harm_and_caps_below_success() -> None:
    assert shaped_reward(_v(True, [True, True])) == 1.0
    assert shaped_reward(_v(False, [True, True])) == 0.5
    assert shaped_reward(_v(False, [True, False])) == 0.25
    harmful = shaped_reward(_v(False, [True, True], duplicates=[{}], unrequired=[{}]))
    assert harmful == 0.0 < shaped_reward(_v(False, [True, True]))
    assert shaped_reward(_v(False, [], partial=["a"] * 9)) == -1.0
