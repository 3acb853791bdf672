"""One base exception, narrow subclasses; messages say what to do next."""

from __future__ import annotations


class UndoBenchError(Exception):
    """Base class of every error this package raises on purpose."""


class UnknownWorkflowError(UndoBenchError, KeyError):
    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class StackStartError(UndoBenchError, RuntimeError):
    """A service or the proxy did not come up; the message carries its log tail."""


class StackUnhealthyError(UndoBenchError, RuntimeError):
    """A stack stopped answering and could not be restarted."""
