"""Text spaces for tool calls and JSON observations."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from gymnasium.spaces import Space

from undobench_gym.core.catalog import FINISH, ToolSpec


class JsonText(Space[str]):
    """Any JSON text up to `max_length` characters (observations)."""

    def __init__(self, max_length: int = 1 << 20, seed: int | None = None) -> None:
        super().__init__(shape=None, dtype=None, seed=seed)
        self.max_length = max_length

    def contains(self, x: Any) -> bool:
        if not isinstance(x, str) or len(x) > self.max_length:
            return False
        try:
            json.loads(x)
        except ValueError:
            return False
        return True

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        return json.dumps({"sample": int(self.np_random.integers(0, 1 << 30))})

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JsonText) and other.max_length == self.max_length

    def __hash__(self) -> int:
        return hash(("JsonText", self.max_length))

    def __repr__(self) -> str:
        return f"JsonText(max_length={self.max_length})"


def _sample_value(schema: dict[str, Any], rng: np.random.Generator) -> Any:
    if "enum" in schema:
        return schema["enum"][int(rng.integers(len(schema["enum"])))]
    if "anyOf" in schema:
        options = [s for s in schema["anyOf"] if s.get("type") != "null"] or schema["anyOf"]
        return _sample_value(options[int(rng.integers(len(options)))], rng)
    kind = schema.get("type")
    if kind == "integer":
        lo = int(schema.get("minimum", schema.get("exclusiveMinimum", 0) + 1))
        hi = int(min(schema.get("maximum", lo + 10_000), lo + 10_000))
        return int(rng.integers(lo, hi + 1))
    if kind == "number":
        return float(rng.uniform(0, 100))
    if kind == "boolean":
        return bool(rng.integers(2))
    if kind == "array":
        n = max(1, int(schema.get("minItems", 1)))
        return [_sample_value(schema.get("items", {}), rng) for _ in range(n)]
    if kind == "object":
        props = schema.get("properties", {})
        return {
            k: _sample_value(v, rng) for k, v in props.items() if k in schema.get("required", [])
        }
    return f"s{int(rng.integers(1_000_000))}"


class ToolCallSpace(Space[str]):
    """JSON text `{"tool": name, "arguments": {...}}` over a fixed tool catalogue.

    `contains` is structural (a known tool, object arguments); `sample` draws plausible
    calls, arguments shaped by the tool's schema, from this space's own seeded generator.
    """

    def __init__(self, tools: dict[str, ToolSpec], seed: int | None = None) -> None:
        super().__init__(shape=None, dtype=None, seed=seed)
        self.tools = dict(tools)
        self.names = [*sorted(self.tools), FINISH]

    def contains(self, x: Any) -> bool:
        if isinstance(x, str):
            try:
                x = json.loads(x)
            except ValueError:
                return False
        return (
            isinstance(x, dict)
            and x.get("tool") in self.names
            and isinstance(x.get("arguments", {}), dict)
        )

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        names = sorted(self.tools)
        name = names[int(self.np_random.integers(len(names)))] if names else FINISH
        args = _sample_value(self.tools[name].parameters, self.np_random) if names else {}
        return json.dumps({"tool": name, "arguments": args})

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ToolCallSpace) and other.names == self.names

    def __hash__(self) -> int:
        return hash(("ToolCallSpace", tuple(self.names)))

    def __repr__(self) -> str:
        return f"ToolCallSpace({len(self.names)} tools)"
