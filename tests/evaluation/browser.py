"""Headless Chromium for the HTML report's tests and load-time benchmark: Debian's system
browser (/usr/bin/chromium) driven by Playwright, never a downloaded one.

Without the background-networking flags Chromium keeps trying to reach Google's services,
which a closed network answers slowly; with them the browser makes no request of its own.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str | None:
    """The system browser: $UB_CHROMIUM, else chromium on PATH."""
    return os.environ.get("UB_CHROMIUM") or shutil.which("chromium")


def require_browser() -> str:
    """The browser's path; without one (or without Playwright) the test fails in CI and
    skips elsewhere, so CI can never pass by skipping it."""
    path = chromium_path()
    problem = None if path else "no chromium on PATH (apt-get install chromium chromium-driver)"
    if problem is None:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            problem = "playwright is not installed (pip install -e '.[dev]')"
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"the browser test is required in CI: {problem}")
        pytest.skip(problem)
    assert path is not None
    return path


@contextmanager
def browser(path: str) -> Iterator[Any]:
    """A headless system Chromium (Playwright's Browser), closed on exit."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, args=FLAGS)
        try:
            yield b
        finally:
            b.close()
