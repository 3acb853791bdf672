"""What the model is told about a tool: a pattern that lists literal values is offered as
the enum it is (the API's own values: `usd`, not `USD`); other patterns are dropped."""

from __future__ import annotations

from undobench_gym.agents.llm.prompt import loose_schema, pattern_enum


def test_literal_alternatives_become_an_enum() -> None:
    assert pattern_enum("^(usd|eur|gbp)$") == ["usd", "eur", "gbp"]
    assert pattern_enum(r"^(page\.triggered|page\.resolved)$") == [
        "page.triggered",
        "page.resolved",
    ]
    assert pattern_enum("^gold$") == ["gold"]


def test_other_patterns_are_not_enums() -> None:
    for pattern in ("^sev[1-4]$", "^[A-Za-z0-9_]+$", r"^(0|[1-9][0-9]{0,3})\.(0|[1-9])$", "usd"):
        assert pattern_enum(pattern) is None, pattern


def test_the_schema_offered_keeps_types_and_required_and_gains_the_enum() -> None:
    schema = {
        "type": "object",
        "required": ["currency", "id"],
        "properties": {
            "currency": {"type": "string", "pattern": "^(usd|eur|gbp)$", "maxLength": 3},
            "id": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 2000},
            "tier": {"type": "string", "pattern": "^(a|b)$", "enum": ["a"]},
        },
    }
    offered = loose_schema(schema)
    props = offered["properties"]
    assert props["currency"] == {"type": "string", "maxLength": 3, "enum": ["usd", "eur", "gbp"]}
    assert props["id"] == {"type": "string", "maxLength": 512}
    assert props["tier"]["enum"] == ["a"]  # a declared enum wins
    assert offered["required"] == ["currency", "id"]
