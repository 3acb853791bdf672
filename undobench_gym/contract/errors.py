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


class ProviderError(RuntimeError):
    """The model provider failed with an error retries cannot fix (a refused request, a full
    context window). Agent code raised it, so the episode is the agent's failure.

    Deliberately not an UndoBenchError, which would stop the whole sweep."""


class ProviderUnavailable(ProviderError):
    """The model provider kept failing (connection, timeout, 429, 5xx) after the agent's own
    retries: an infrastructure error, retried like a dead stack, never an agent failure.
    Many in a row stop the sweep (see `runner.MAX_PROVIDER_STREAK`)."""
