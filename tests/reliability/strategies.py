"""Hypothesis strategies: values from JSON schemas, adversarial strings, mutated tool calls.

Hand-written because `hypothesis-jsonschema` 0.23.1 (its latest release) fails on every
schema with the hypothesis this project pins (`'many' object has no attribute 'more'`).
The tool schemas use a small subset of JSON Schema (type, enum, const, anyOf, string
length and pattern, number bounds, arrays, objects), which is all this covers; `$ref`s are
resolved against the OpenAPI components, so route bodies work too.
"""

from __future__ import annotations

import json
import math
import os
import re
from typing import Any

from hypothesis import strategies as st

#: Multiplies every fuzzer's example count (UB_FUZZ_SCALE=10 for a deep run).
SCALE = float(os.environ.get("UB_FUZZ_SCALE", "1"))
#: Fresh random examples on each run (`make reliability` sets UB_FUZZ_RANDOM=1) or the same
#: ones every run (`make test`, CI: a red build then means the change broke something,
#: not that the fuzzer got lucky; exploration belongs to the full-depth runs).
RANDOM = os.environ.get("UB_FUZZ_RANDOM") == "1"
#: Every adversarial name carries this token, so a file it created anywhere is found by name.
MARK = "ubfuzz"

PATHS = [
    "../../etc/passwd",
    "/etc/passwd",
    "..",
    ".",
    "./",
    "a/../../b",
    f"../../{MARK}-escape",
    f"../../../../../../tmp/{MARK}-escape",
    f"/tmp/{MARK}-abs",
    "..\\..\\windows\\win.ini",
    "%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    "..%2f..%2f",
    f"{MARK}\x00.txt",
    "\x00",
    "file:///etc/passwd",
    "~/.ssh/id_rsa",
    ".git/config",
    ".git",
    "refs/heads/../../HEAD",
    "HEAD~1",
    "HEAD^{tree}",
    "@{-1}",
    "main..HEAD",
    f"--output=/tmp/{MARK}-opt",
    f"--upload-pack=touch /tmp/{MARK}-opt",
    "-rf",
    f"$(touch /tmp/{MARK}-sh)",
    f"`touch /tmp/{MARK}-sh`",
    f"; touch /tmp/{MARK}-sh",
    f"| touch /tmp/{MARK}-sh",
    "/" * 300,
    "a/" * 200,
    f"{MARK}/" + "x" * 250,
    "CON",
    "NUL.txt",
]
SQL = [
    "1' OR '1'='1",
    "'; DROP TABLE commit_log; --",
    '" OR 1=1 --',
    "1; DELETE FROM meta",
    "%",
    "_",
    "*",
    "' UNION SELECT * FROM sqlite_master --",
    "\\",
    "'",
]
UNICODE = [
    "ünïcødé",
    "\U0001d518\U0001d52b\U0001d526",  # mathematical fraktur letters
    "\u202egnp.exe",
    "\ufeffbom",
    "zero\u200bwidth",
    "e\u0301\u0301\u0301",
    "🙂" * 50,
    "名前",
    "\r\nX-Injected: 1",
    "line\nbreak",
    "tab\tchar",
    "\x7f\x1b[31m",
]
NUMBERS = ["1e309", "NaN", "-0", "0x10", "9" * 40]
#: Valid JSON text ('"\\ud800"'), not valid Unicode: no UTF-8 encoding exists.
SURROGATE = "\ud800"

ADVERSARIAL: list[str] = PATHS + SQL + UNICODE + NUMBERS + [SURROGATE, "id_" + SURROGATE]


def adversarial_text() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(ADVERSARIAL),
        st.text(max_size=40),
        st.text(alphabet=st.characters(codec="utf-8"), max_size=200),
    )


def wrong_values() -> st.SearchStrategy[Any]:
    """Values of the wrong type (or extreme values of the right one)."""
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.sampled_from([math.inf, -math.inf, math.nan, 1e308, -0.0, 0.5]),
        st.lists(st.integers(), max_size=3),
        st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
        adversarial_text(),
    )


def _ref(node: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = components[node["$ref"].rsplit("/", 1)[-1]]
    return node


def _string(schema: dict[str, Any], pool: list[str]) -> st.SearchStrategy[str]:
    lo, hi = schema.get("minLength", 0), schema.get("maxLength")

    def fits(s: str) -> bool:
        return len(s) >= lo and (hi is None or len(s) <= hi)

    pattern = schema.get("pattern")
    if pattern is not None:
        # A patterned field: values the env accepts (adversarial ones come from `mutated`).
        real = [s for s in pool if fits(s) and re.fullmatch(pattern, s)]
        generated = st.from_regex(pattern, fullmatch=True).filter(fits)
        return st.one_of(generated, st.sampled_from(real)) if real else generated
    options: list[st.SearchStrategy[str]] = [st.text(min_size=lo, max_size=min(hi or 60, 60))]
    candidates = [s for s in pool + ADVERSARIAL if fits(s)]
    if candidates:
        options.append(st.sampled_from(candidates))
    if hi is not None and hi >= 1000:
        options.append(st.just("x" * hi))  # the largest payload the schema allows
    return st.one_of(options)


def from_schema(
    schema: dict[str, Any], pool: list[str], components: dict[str, Any] | None = None
) -> st.SearchStrategy[Any]:
    """Values that mostly satisfy `schema`; string fields also draw from `pool` (real ids
    and names from the seeded state, so calls reach real resources) and adversarial text."""
    comps = components or {}
    schema = _ref(schema, comps)
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return st.one_of([from_schema(s, pool, comps) for s in schema[key]])
    kind = schema.get("type")
    if kind == "string":
        return _string(schema, pool)
    if kind in ("integer", "number"):
        lo = schema.get("minimum", schema.get("exclusiveMinimum"))
        hi = schema.get("maximum", schema.get("exclusiveMaximum"))
        lo = None if lo is None else math.ceil(lo) + (1 if "exclusiveMinimum" in schema else 0)
        hi = None if hi is None else math.floor(hi) - (1 if "exclusiveMaximum" in schema else 0)
        ints = st.integers(min_value=lo, max_value=hi)
        if kind == "integer":
            return ints
        floats = st.floats(min_value=lo, max_value=hi, allow_nan=False, allow_infinity=False)
        return st.one_of(ints, floats)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        items = from_schema(schema.get("items", {}), pool, comps)
        lo = schema.get("minItems", 0)
        return st.lists(items, min_size=lo, max_size=min(schema.get("maxItems", lo + 4), lo + 4))
    if kind == "object" or "properties" in schema:
        return object_from_schema(schema, pool, comps)
    return wrong_values()


def object_from_schema(
    schema: dict[str, Any], pool: list[str], components: dict[str, Any] | None = None
) -> st.SearchStrategy[dict[str, Any]]:
    props = schema.get("properties", {})
    required = set(schema.get("required", []))
    fields = {
        name: from_schema(sub, pool, components) for name, sub in props.items() if name in required
    }
    optional = {
        name: from_schema(sub, pool, components)
        for name, sub in props.items()
        if name not in required
    }
    return st.fixed_dictionaries(fields, optional=optional)


@st.composite
def mutated(draw: st.DrawFn, args: dict[str, Any]) -> dict[str, Any]:
    """Break an argument object the way a confused agent would."""
    out = dict(args)
    how = draw(st.sampled_from(["keep"] * 4 + ["adversarial", "wrong_type", "drop", "extra"]))
    names = sorted(out)
    if how == "adversarial" and names:
        for name in draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True)):
            out[name] = draw(adversarial_text())
    elif how == "wrong_type" and names:
        out[draw(st.sampled_from(names))] = draw(wrong_values())
    elif how == "drop" and names:
        out.pop(draw(st.sampled_from(names)))
    elif how == "extra":
        out[draw(st.sampled_from(["__proto__", "tool", "id", "x" * 300, MARK]))] = draw(
            wrong_values()
        )
    return out


def garbage_actions() -> st.SearchStrategy[Any]:
    """Whole actions that are not tool calls at all."""
    return st.one_of(
        st.text(max_size=200),
        st.sampled_from(
            [
                "",
                "{",
                "null",
                "[]",
                '{"tool": null}',
                '{"tool": "finish"',
                '{"tool": 5, "arguments": []}',
                '{"name": "x", "arguments": "{broken"}',
                "x" * (1 << 20),
                json.dumps({"tool": "x", "arguments": {"a": "b" * (1 << 20)}}),
                "\x00\x01\x02",
                b"\xff\xfe".decode("latin-1"),
            ]
        ),
        st.binary(max_size=64),
        wrong_values(),
        st.fixed_dictionaries(
            {
                "tool": adversarial_text(),
                "arguments": st.dictionaries(st.text(max_size=8), wrong_values(), max_size=3),
            }
        ),
    )


def string_pool(state: Any, limit: int = 200) -> list[str]:
    """Short strings of the seeded state (ids, names, refs): arguments that hit real rows."""
    out: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
        elif isinstance(node, str) and 0 < len(node) <= 80:
            out.add(node)

    walk(state)
    return sorted(out)[:limit]
