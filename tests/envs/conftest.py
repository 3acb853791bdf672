"""Fixtures of the domain service tests: a fresh in-process service per test (state, keys
and config must not leak between tests), and crash points that raise instead of exiting.

A test module names its service once, at the top:
`pytestmark = pytest.mark.service(DOMAIN)` (or `pytest.mark.service(DOMAIN, seed=7)`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .service_harness import SEED, Crashed, ServiceClient, crash_points_raise


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "service(domain, seed=3): the DomainService the `svc` fixture runs"
    )


@pytest.fixture
def svc(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServiceClient]:
    """The service named by the `service` marker, reset to its seed."""
    marker = request.node.get_closest_marker("service")
    if marker is None or not marker.args:
        pytest.fail(
            f"{request.node.nodeid} uses `svc` without naming a service: add "
            "`pytestmark = pytest.mark.service(DOMAIN)` to its module"
        )
    seed = int(marker.kwargs.get("seed", SEED))
    with ServiceClient.open(marker.args[0], tmp_path, seed) as client:
        yield client


@pytest.fixture
def crashable(monkeypatch: pytest.MonkeyPatch) -> type[Crashed]:
    """Armed crash points raise `Crashed` for this test."""
    return crash_points_raise(monkeypatch)
