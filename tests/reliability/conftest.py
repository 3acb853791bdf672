"""Figures the reliability tests measure, kept whether or not pytest captures output.

Each test adds its numbers with `figures.add(section, key, value)`; they are written to
`<pytest basetemp>/reliability-figures.json` (merged, so one file holds a whole run),
printed by the test, and summed up in pytest's terminal summary. docs/reliability.md
quotes them.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

FIGURES_FILE = "reliability-figures.json"


class Figures:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def add(self, section: str, key: str, value: Any) -> None:
        with self._lock:
            data = self.read()
            data.setdefault(section, {})[key] = value
            self.path.write_text(json.dumps(data, indent=2, sort_keys=True, default=str))
        print(f"[reliability] {section} / {key}: {json.dumps(value, default=str)}")

    def read(self) -> dict[str, Any]:
        if not self.path.exists():
            return {}
        data: dict[str, Any] = json.loads(self.path.read_text())
        return data


@pytest.fixture(scope="session")
def figures(tmp_path_factory: pytest.TempPathFactory) -> Figures:
    return Figures(tmp_path_factory.getbasetemp() / FIGURES_FILE)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    factory = getattr(config, "_tmp_path_factory", None)
    if factory is None:
        return
    path = Path(factory.getbasetemp()) / FIGURES_FILE
    if not path.exists():
        return
    terminalreporter.section("reliability figures")
    for section, values in json.loads(path.read_text()).items():
        for key, value in values.items():
            terminalreporter.write_line(f"{section:<24} {key:<36} {json.dumps(value)}")
    terminalreporter.write_line(f"(written to {path})")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks the suite, so `-m reliability` selects it (`make reliability` runs it at full
    fuzzing depth; `make test` includes it at UB_FUZZ_SCALE=0.25)."""
    for item in items:
        if "tests/reliability/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.reliability)
