"""Where a stack runs: the process runtime (default) or the docker runtime."""

from __future__ import annotations

from .base import Runtime, StackEndpoints


def make_runtime(kind: str, domain: str) -> Runtime:
    if kind == "process":
        from .process import ProcessRuntime

        return ProcessRuntime(domain)
    raise ValueError(f"unknown runtime {kind!r}: use 'process' (docker comes with its own issue)")


__all__ = ["Runtime", "StackEndpoints", "make_runtime"]
