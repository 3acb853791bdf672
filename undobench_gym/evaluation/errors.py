"""Errors of the evaluation package."""

from __future__ import annotations


class Unsupported(Exception):
    """A trial record cannot support a metric: the field it needs is null (imported rows)."""

    def __init__(self, field: str) -> None:
        super().__init__(field)
        self.field = field
