"""Argument checks shared by several commands, so each says the same thing when it fails."""

from __future__ import annotations

import argparse
from pathlib import Path

from undobench_gym.contract.errors import UndoBenchError


def run_dir(path: str) -> Path:
    """A run directory: one that has trials.jsonl."""
    out = Path(path)
    if not (out / "trials.jsonl").exists():
        raise UndoBenchError(f"{out / 'trials.jsonl'} not found: is {out} a run directory?")
    return out


def margin(text: str) -> float:
    """An argparse type: a proportion strictly between 0 and 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError("the margin is a proportion in (0, 1), e.g. 0.10")
    return value
