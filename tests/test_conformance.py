"""One conformance suite over both runtimes: same seed, same episode, process or docker."""

from __future__ import annotations

from typing import Any

import pytest

from undobench_gym.core.catalog import all_workflows

CASES = [(w, None) for w in all_workflows()] + [
    (w, s.id) for w in all_workflows() for s in w.scenarios
]

pytestmark = pytest.mark.docker


def _key(ep: dict[str, Any]) -> tuple[Any, ...]:
    return (ep["transcript"], ep["state_hash"], ep["verdict"], ep["fault_fired"], ep["effects"])


@pytest.mark.parametrize(
    ("workflow", "scenario"), CASES, ids=[f"{w.id}:{s or 'control'}" for w, s in CASES]
)
def test_process_and_docker_give_the_same_episode(
    play: Any, workflow: Any, scenario: str | None
) -> None:
    on_process = play(workflow, scenario, seed=5, runtime="process")
    on_docker = play(workflow, scenario, seed=5, runtime="docker")
    assert _key(on_docker) == _key(on_process)
    if scenario is None:
        assert on_docker["success"]
    else:
        assert on_docker["fault_fired"]
