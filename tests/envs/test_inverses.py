"""The inverses the TEST and DEV workflows offer, on the real services: an unwanted effect
the agent undoes with the domain's inverse is `compensated` (never a clean success), and
undoing the task's own effect repairs nothing.

Each case follows the gold plan up to the forward call, then makes the unwanted effect (a
re-send, or a write the task did not ask for) and undoes it with the tool the workflow
offers, addressed as a real client would: by the id the unwanted call answered with.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from undobench_gym.agents.scripted import ScriptedAgent
from undobench_gym.core.catalog import find_workflow
from undobench_gym.core.pairing import run_episode

Step = dict[str, Any]
#: workflow -> (gold steps to follow, what the agent does next from the filled gold plan,
#: the op whose unwanted effect the last call undoes, the inverse tool)
Extra = Callable[[list[Step]], list[Step]]


def _resend_and_undo(tool: str, args: Callable[[Step, int], dict[str, Any]]) -> Extra:
    """Re-send the last followed step, then undo what the re-send made (result N)."""

    def extra(plan: list[Step]) -> list[Step]:
        last = plan[-1]
        return [dict(last), {"tool": tool, "arguments": args(last, len(plan))}]

    return extra


def _order(plan: list[Step]) -> list[Step]:
    wrong = {**plan[-1]["arguments"], "order_number": plan[-1]["arguments"]["order_number"] + "-X"}
    return [
        {"tool": "create_order", "arguments": wrong},
        {"tool": "cancel_order", "arguments": {"order_number": wrong["order_number"]}},
    ]


def _manifest(plan: list[Step]) -> list[Step]:
    put = plan[-1]["arguments"]
    stray = {"bucket": put["bucket"], "key": put["key"] + ".bak", "body": put["body"]}
    return [
        {"tool": "put_object", "arguments": stray},
        {"tool": "delete_object", "arguments": {"bucket": stray["bucket"], "key": stray["key"]}},
    ]


def _second_page(plan: list[Step]) -> list[Step]:
    fresh = {**plan[-1]["arguments"], "dedup_key": plan[-1]["arguments"]["dedup_key"] + "-2"}
    n = len(plan)
    return [
        {"tool": "trigger_page", "arguments": fresh},
        {"tool": "resolve_page", "arguments": {"page_id": f"@{n}.id", "note": "paged twice"}},
    ]


CASES: dict[str, tuple[int, Extra, str, str]] = {
    "db-create-order": (2, _order, "order.create", "cancel_order"),
    "st-register-dataset": (2, _manifest, "object.put", "delete_object"),
    "crm-close-won-deal": (
        5,
        _resend_and_undo("unenroll_contact", lambda _s, n: {"enrollment_id": f"@{n}.id"}),
        "sequence.enroll",
        "unenroll_contact",
    ),
    "tix-open-and-page": (
        4,
        _resend_and_undo(
            "retract_page", lambda _s, n: {"page_id": f"@{n}.id", "message": "sent twice"}
        ),
        "page.send",
        "retract_page",
    ),
    "msg-page-oncall": (
        3,
        _resend_and_undo(
            "delete_chat_message",
            lambda s, n: {"channel_id": s["arguments"]["channel_id"], "message_id": f"@{n}.id"},
        ),
        "chat.post",
        "delete_chat_message",
    ),
    "msg-page-oncall/page": (2, _second_page, "page.trigger", "resolve_page"),
    "cloud-canary-release": (
        2,
        _resend_and_undo(
            "rollback_deployment",
            lambda s, _n: {"service_id": s["arguments"]["service_id"], "colour": "green"},
        ),
        "deployment.create",
        "rollback_deployment",
    ),
}


class ThenUndo(ScriptedAgent):
    """The gold plan's first `follow` steps, then `extra` (which may refer to their results)."""

    name = "then-undo"

    def __init__(self, follow: int, extra: Extra) -> None:
        super().__init__()
        self.follow, self.extra = follow, extra

    def reset(self, plan: list[dict[str, Any]]) -> None:
        head = plan[: self.follow]
        super().reset([*head, *self.extra(head)])


def _episode(env_for: Any, case: str, agent: ScriptedAgent) -> dict[str, Any]:
    wf = find_workflow(case.split("/")[0])
    return run_episode(env_for(wf.domain), agent, seed=1, workflow=wf.id, fault=None)


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_unwanted_effect_undone_is_compensated(env_for: Any, case: str) -> None:
    follow, extra, op, inverse = CASES[case]
    assert inverse in find_workflow(case.split("/")[0]).tools
    ep = _episode(env_for, case, ThenUndo(follow, extra))
    verdict, effects = ep["verdict"], ep["effects"]
    assert ep["finish_status"] == "done", ep["transcript"][-3:]
    assert [c["op"] for c in verdict["compensated"]] == [op], verdict
    assert verdict["compensated"][0]["undone_by"] != op
    assert effects["compensated"] == 1 and effects["duplicates"] == 0
    assert not any(u["op"] == op for u in verdict["unrequired"])
    assert ep["success"] is False  # the world saw it before the undo


def _undo_own(plan: list[Step]) -> list[Step]:
    return [
        {
            "tool": "cancel_order",
            "arguments": {"order_number": plan[-1]["arguments"]["order_number"]},
        }
    ]


def test_undoing_the_tasks_own_effect_repairs_nothing(env_for: Any) -> None:
    ep = _episode(env_for, "db-create-order", ThenUndo(2, _undo_own))
    verdict = ep["verdict"]
    assert verdict["compensated"] == [] and ep["success"] is False
    assert [u["op"] for u in verdict["unrequired"]] == ["order.cancel"]
