"""Stable seed derivation: sha256, never Python's salted hash()."""

from __future__ import annotations

import hashlib
import random


def derive_seed(*parts: object) -> int:
    """A 63-bit seed that depends only on the parts' text."""
    text = "\x1f".join(str(p) for p in parts)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 1


def rng_for(*parts: object) -> random.Random:
    return random.Random(derive_seed(*parts))


def stable_id(prefix: str, *parts: object, length: int = 14) -> str:
    text = "\x1f".join(str(p) for p in parts)
    return f"{prefix}_{hashlib.sha256(text.encode()).hexdigest()[:length]}"
