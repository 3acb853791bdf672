"""The "add a domain" checklist, followed once for real: tests/tiny_domain was built by it
(docs/architecture.md) and runs end to end on the real stack: its service process behind
the fault proxy, the env, the oracles and the recovery methods, without a line of it in
the library."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from undobench_gym.agents.methods import applicable, wrap
from undobench_gym.agents.scripted import ScriptedAgent
from undobench_gym.core import catalog
from undobench_gym.core.env import UndoBenchEnv
from undobench_gym.core.pairing import run_episode
from undobench_gym.services import domains

from .import_graph import ROOT


@pytest.fixture(scope="module")
def notes() -> Iterator[UndoBenchEnv]:
    mp = pytest.MonkeyPatch()
    # The runtime's service process imports the domain by module path, like the test does.
    mp.setenv("PYTHONPATH", str(ROOT))
    domains.register_domain("notes", "tests.tiny_domain")
    env = UndoBenchEnv("notes")
    try:
        yield env
    finally:
        env.close()
        domains.unregister_domain("notes")
        catalog.domain.cache_clear()
        mp.undo()


def _play(env: UndoBenchEnv, fault: str | None, method: str = "bare") -> dict[str, Any]:
    return run_episode(
        wrap(env, method), ScriptedAgent(), seed=3, workflow="notes-add", fault=fault
    )


def test_the_catalogue_builds_its_tools_from_the_routes(notes: UndoBenchEnv) -> None:
    tools = catalog.domain("notes").tools
    assert set(tools) == {"list_notes", "get_note", "create_note"}
    create = tools["create_note"]
    assert create.accepts_key and create.op == "note.create"
    assert create.identity == ("author", "title")
    assert tools["list_notes"].read_only


def test_the_gold_plan_succeeds_in_control(notes: UndoBenchEnv) -> None:
    ep = _play(notes, None)
    assert ep["success"], ep["verdict"]
    assert ep["effects"]["committed"] == 1


def test_a_lost_ack_fires_as_planned_and_retries_duplicate(notes: UndoBenchEnv) -> None:
    bare = _play(notes, "lost-ack")
    assert bare["fault_outcome"]["as_planned"]
    assert bare["fault_outcome"]["mechanism"] == "reply_dropped_after_commit"
    retried = _play(notes, "lost-ack", "B0")
    assert not retried["success"] and retried["effects"]["duplicates"] == 1
    keyed = _play(notes, "lost-ack", "B2")
    assert keyed["success"], keyed["verdict"]
    assert keyed["effects"]["committed"] == 1 and keyed["effects"]["safe_reissues"] == 1
    assert keyed["effects"]["reissued_after_commit"] == 0  # the same key, honoured: safe


def test_a_dropped_request_leaves_the_note_missing(notes: UndoBenchEnv) -> None:
    bare = _play(notes, "pre-drop")
    assert bare["fault_outcome"]["mechanism"] == "request_dropped"
    assert not bare["success"] and bare["effects"]["missing"] == 1
    assert _play(notes, "pre-drop", "B0")["success"]


def test_the_methods_see_its_public_schemas(notes: UndoBenchEnv) -> None:
    _obs, info = notes.reset(seed=3, options={"workflow": "notes-add"})
    assert applicable("B2", info["tools"], "create_note")
    assert applicable("B6", info["tools"], "create_note")  # list_notes can show the effect


def test_a_reworded_resend_is_a_duplicate(notes: UndoBenchEnv) -> None:
    """The identity is who and which title, never the free text: a re-send with another
    body is the same note written twice."""
    notes.reset(seed=3, options={"workflow": "notes-add"})
    args = notes.gold_plan()[0]["arguments"]
    for body in (args["body"], args["body"] + " (resent)"):
        notes.step({"tool": "create_note", "arguments": {**args, "body": body}})
    *_, info = notes.step({"tool": "finish", "arguments": {"status": "done"}})
    ep = info["episode"]
    assert not ep["success"] and ep["effects"]["duplicates"] == 1
