"""Where a stack runs: the process runtime (default) or the docker runtime."""

from __future__ import annotations

from .base import Runtime, StackEndpoints
from .process import ProcessRuntime


def make_runtime(kind: str, domain: str) -> Runtime:
    if kind == "process":
        return ProcessRuntime(domain)
    if kind == "docker":
        from .docker import DockerRuntime  # the `docker` extra: imported only when used

        return DockerRuntime(domain)
    raise ValueError(f"unknown runtime {kind!r}: use 'process' or 'docker'")


__all__ = ["Runtime", "StackEndpoints", "make_runtime"]
