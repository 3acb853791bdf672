"""Where a stack runs: the process runtime (default) or the docker runtime."""

from __future__ import annotations

from undobench_gym.core.runtime.base import Runtime, StackEndpoints
from undobench_gym.core.runtime.process import ProcessRuntime


def make_runtime(kind: str, domain: str) -> Runtime:
    if kind == "process":
        return ProcessRuntime(domain)
    if kind == "docker":
        from undobench_gym.core.runtime.docker import (
            DockerRuntime,  # the `docker` extra: imported only when used
        )

        return DockerRuntime(domain)
    raise ValueError(f"unknown runtime {kind!r}: use 'process' or 'docker'")


__all__ = ["Runtime", "StackEndpoints", "make_runtime"]
