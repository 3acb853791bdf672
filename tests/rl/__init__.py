"""Tests of the training integrations (TRL, OpenEnv) and of examples/train_grpo.py."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_grpo.py"


def train_grpo_example() -> ModuleType:
    """examples/train_grpo.py as a module (it is a script, not part of the package)."""
    spec = importlib.util.spec_from_file_location("train_grpo", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
