"""Oracles: values not presence; duplicates by effect identity, not by tool name."""

from __future__ import annotations

import json
from typing import Any

from undobench_gym.contract.specs import (
    EffectExpectation,
    FaultScenario,
    FaultTarget,
    GoldStep,
    StatePredicate,
    WorkflowSpec,
)
from undobench_gym.core.oracles import check_predicate, evaluate, semantic_effects


def row(op: str, cls: str, **identity: Any) -> dict[str, Any]:
    return {"op": op, "effect_class": cls, "identity": json.dumps(identity)}


WF = WorkflowSpec(
    id="t-wf",
    domain="payments",
    split="dev",
    kind="single_effect",
    instruction="x",
    tools=["create_charge"],
    required_effects=[EffectExpectation(op="charge.create", identity={"amount": "{amount}"})],
    forbidden_effects=[EffectExpectation(op="refund.create", identity={"amount": "{amount}"})],
    invariants=[
        StatePredicate(
            description="amount", table="t", where={"id": "a"}, field="amount", value="{amount}"
        )
    ],
    gold_plan=[GoldStep(tool="create_charge")],
    scenarios=[
        FaultScenario(id="s", boundary="PRE_MUTATION", target=FaultTarget(tool="create_charge"))
    ],
    draw_params=lambda seed, fx: {"amount": 5},
)
STATE = {"tables": {"t": [{"id": "a", "amount": 5}]}, "partial": []}


def test_repeated_set_is_not_a_duplicate_repeated_additive_is() -> None:
    log = [
        row("tier.set", "set", a="x", tier="gold"),
        row("tier.set", "set", a="x", tier="gold"),
        row("charge.create", "additive", amount=5),
        row("charge.create", "additive", amount=5),
    ]
    v = evaluate(WF, {"amount": 5}, STATE, log, physical_calls=4)
    assert [d["op"] for d in v.duplicates] == ["charge.create"]
    assert v.layers.committed == 4 and v.layers.semantic == 2 and not v.success


def test_same_tool_other_identity_is_not_a_duplicate() -> None:
    log = [row("charge.create", "additive", amount=5), row("charge.create", "additive", amount=6)]
    v = evaluate(WF, {"amount": 5}, STATE, log, physical_calls=2)
    assert v.duplicates == [] and v.missing == []


def test_identity_is_order_insensitive() -> None:
    a = {"op": "x", "effect_class": "additive", "identity": '{"a": 1, "b": 2}'}
    b = {"op": "x", "effect_class": "additive", "identity": '{"b": 2, "a": 1}'}
    assert semantic_effects([a, b])[0].count == 2


def test_missing_forbidden_and_partial() -> None:
    v = evaluate(
        WF,
        {"amount": 5},
        {**STATE, "partial": ["half done"]},
        [row("refund.create", "additive", amount=5)],
        physical_calls=1,
    )
    assert v.missing and v.forbidden and v.partial == ["half done"] and not v.effects_ok


def test_state_oracle_checks_values() -> None:
    pred = WF.invariants[0]
    assert check_predicate(pred, STATE["tables"], {"amount": 5}).passed
    wrong = check_predicate(pred, STATE["tables"], {"amount": 6})
    assert not wrong.passed and wrong.actual == 5 and wrong.expected == 6
    two = {"t": [{"id": "a", "amount": 5}, {"id": "a", "amount": 5}]}
    assert not check_predicate(pred, two, {"amount": 5}).passed
    count = StatePredicate(description="c", table="t", op="count", value=1)
    assert check_predicate(count, STATE["tables"], {}).passed


def _charge(ref: str) -> dict[str, Any]:
    return {**row("charge.create", "additive", amount=5), "ref": ref}


def _refund(ref: str) -> dict[str, Any]:
    undo = {"op": "charge.create", "ref": ref}
    return {**row("refund.create", "additive", amount=5, charge="x"), "undoes": undo}


def test_an_undone_duplicate_is_compensated_not_a_duplicate() -> None:
    v = evaluate(WF, {"amount": 5}, STATE, [_charge("c1"), _charge("c2"), _refund("c2")], 3)
    assert v.duplicates == [] and v.unrequired == [] and v.forbidden == []
    assert [(c["op"], c["undone_by"]) for c in v.compensated] == [
        ("charge.create", "refund.create")
    ]
    assert not v.effects_ok and not v.success  # repaired is not clean


def test_undoing_the_required_effect_repairs_nothing() -> None:
    v = evaluate(WF, {"amount": 5}, STATE, [_charge("c1"), _refund("c1")], 2)
    assert v.compensated == [] and [u["op"] for u in v.unrequired] == ["refund.create"]


def test_an_undo_names_its_effect_or_pairs_with_none() -> None:
    # a refund of a charge that is not in the episode (the fixture's) undoes nothing here
    v = evaluate(WF, {"amount": 5}, STATE, [_charge("c1"), _charge("c2"), _refund("old")], 3)
    assert v.compensated == [] and [d["op"] for d in v.duplicates] == ["charge.create"]
