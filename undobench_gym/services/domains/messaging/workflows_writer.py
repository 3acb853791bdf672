"""Messaging under a concurrent writer: another user posts the same words in
the #ops channel right after the agent's post was dropped before the service. A
read-back of the channel shows a new post with the agent's text; the agent's own post
must still be made, exactly once."""

from __future__ import annotations

from typing import Any

from undobench_gym.contract.specs import StatePredicate as P
from undobench_gym.services.domains.messaging.workflows_oncall import SMS
from undobench_gym.services.domains.workflows_writer import lookalike, replace, with_writer, writer


def _params(seed: int, fx: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
    return {"posts_with_writer": p["posts_after"] + 1}


SMS_WRITER = with_writer(
    SMS,
    writer(
        "post_chat_message",
        "another user posts the same words in the channel",
        ("post_chat_message", {"channel_id": "{channel_id}", "text": "{chat}"}),
    ),
    lookalike("post_chat_message"),
    params=_params,
    invariants=replace(
        SMS.invariants,
        {
            "one post in #ops": P.count(
                "the agent's post and the other user's in #ops",
                "msg_chat_messages",
                {"channel_id": "{channel_id}"},
                "{posts_with_writer}",
            )
        },
    ),
)
