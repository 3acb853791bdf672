"""Checklist step 4: a workflow: task, parameters from the seed, oracles (required
effect by semantic identity, invariants on values counted past the fixture's history),
gold plan, fault scenarios on the mutating tool."""

from __future__ import annotations

from typing import Any

from undobench_gym.contract.seeding import rng_for
from undobench_gym.contract.specs import (
    Boundary,
    EffectExpectation,
    FaultScenario,
    FaultTarget,
    GoldStep,
    StatePredicate,
    WorkflowSpec,
)

from .fixture import AUTHORS


def _params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("notes-add", seed)
    author = rng.choice(AUTHORS)
    return {
        "author": author,
        "title": f"retro {rng.randint(100, 999)}",
        "body": "what went well: the fault proxy",
        "notes_of_author": sum(n["author"] == author for n in fx["notes"]) + 1,
    }


NOTE = {"author": "{author}", "title": "{title}"}
TARGET = FaultTarget(tool="create_note")

ADD_NOTE = WorkflowSpec(
    id="notes-add",
    domain="notes",
    split="dev",
    kind="single_effect",
    instruction='As {author}, write a note titled "{title}" saying "{body}". Exactly one '
    "such note must exist when you finish.",
    tools=["list_notes", "get_note", "create_note"],
    required_effects=[EffectExpectation(op="note.create", identity=NOTE)],
    invariants=[
        StatePredicate.count("exactly one note with the title", "nt_notes", NOTE),
        StatePredicate.count(
            "no other new note by the author",
            "nt_notes",
            {"author": "{author}"},
            "{notes_of_author}",
        ),
    ],
    gold_plan=[
        GoldStep(
            tool="create_note",
            arguments={"author": "{author}", "title": "{title}", "body": "{body}"},
        )
    ],
    scenarios=[
        FaultScenario(id="pre-drop", boundary=Boundary.PRE_MUTATION, target=TARGET),
        FaultScenario(id="lost-ack", boundary=Boundary.POST_MUTATION_PRE_ACK, target=TARGET),
        FaultScenario(id="worker-crash", boundary=Boundary.POST_ACK_PRE_CHECKPOINT, target=TARGET),
    ],
    draw_params=_params,
)

WORKFLOWS = [ADD_NOTE]
