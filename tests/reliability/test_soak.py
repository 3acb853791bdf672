"""Soak: hundreds of episodes on one stack leak nothing (benchmarks/bench_soak.py runs 1,000+).

Leaks are counted from /proc (processes below the test process, open descriptors of the
test process and of the stack's processes, the stack's listening ports) and, on docker,
from the engine (the stack's containers, networks and volumes); memory growth is the RSS
slope of each stack process over the soak.
"""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Figures
from .soak import soak

pytestmark = pytest.mark.slow
#: A leak of a few hundred bytes per request would stay under this; storing flows, wire
#: events or response bodies across episodes would not (each episode moves tens of KiB).
MAX_SLOPE_KIB_PER_EPISODE = 16.0


def check(result: dict[str, Any]) -> None:
    leaks = {k: v for k, v in result["leaks"].items() if v}
    assert not leaks, result["leaks"]
    proxy = result["rss"]["proxy"]
    assert proxy["processes"] == 1, "the proxy restarted during the soak"
    assert proxy["slope_kib_per_episode"] < MAX_SLOPE_KIB_PER_EPISODE, proxy


def test_soak_process_runtime(figures: Figures) -> None:
    # Every workflow and scenario of the domain, crash restarts included; not the timeout
    # scenario (it only waits out the client's timeout, ~2.5 s an episode).
    result = soak("payments", episodes=300, warmup=30, every=10, mix="no-timeout")
    result.pop("samples")
    figures.add("soak", "process_payments_300", result)
    assert result["service_restarts"] >= 10  # the soak crossed crash restarts
    check(result)


@pytest.mark.docker
def test_soak_docker_runtime(figures: Figures) -> None:
    result = soak("payments", episodes=60, warmup=6, every=3, runtime="docker", mix="no-timeout")
    result.pop("samples")
    figures.add("soak", "docker_payments_60", result)
    check(result)
    assert result["leaks"]["containers_after_close"] == 0


@pytest.mark.docker
def test_docker_admin_relay_does_not_keep_what_it_relayed() -> None:
    import httpx

    from undobench_gym.core.runtime.docker import DockerRuntime

    from .procs import rss_kib

    rt = DockerRuntime("payments")
    try:
        admin = rt.start().admin_urls["payments"]
        rt._proxy.reload()
        pid = int(rt._proxy.attrs["State"]["Pid"])
        with httpx.Client(headers=rt.endpoints.auth) as client:
            client.post(f"{admin}/admin/reset", json={"seed": 1}).raise_for_status()
            for _ in range(100):
                client.get(f"{admin}/admin/state")
            before = rss_kib(pid)
            for _ in range(500):
                client.get(f"{admin}/admin/state")
            grown = rss_kib(pid) - before
        assert grown < 512, f"proxy RSS grew {grown} KiB over 500 admin calls"
    finally:
        rt.close()
