"""Storage under a concurrent writer: right after the agent copies the build
to production, another release engineer uploads a hotfix build to the same key. If the
agent's copy lost its answer, a blind re-send, or a read-back that sees another ETag and
concludes the copy never landed, copies the old build over the hotfix; production must
keep the hotfix."""

from __future__ import annotations

import hashlib
from typing import Any

from undobench_gym.contract.specs import StatePredicate as P
from undobench_gym.contract.specs import WorkflowSpec
from undobench_gym.services.domains.workflows_writer import overwrite, replace, with_writer, writer


def _params(seed: int, fx: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
    body = f"{p['app']} {p['version']}-hotfix.1 (CHG-{p['change']} follow-up)\n"
    return {
        "writer_body": body,
        "writer_etag": hashlib.md5(body.encode(), usedforsecurity=False).hexdigest(),
    }


def promote_writer(promote: WorkflowSpec) -> WorkflowSpec:
    """The promotion task with the hotfix uploader."""
    return with_writer(
        promote,
        writer(
            "copy_object",
            "another release engineer uploads a hotfix build to the same production key",
            ("put_object", {"bucket": "{prod}", "key": "{key}", "body": "{writer_body}"}),
        ),
        overwrite("copy_object"),
        params=_params,
        invariants=replace(
            promote.invariants,
            {
                "the build is in prod": P.field_is(
                    "prod keeps the hotfix build, uploaded after the agent's copy",
                    "st_objects",
                    {"bucket": "{prod}", "key": "{key}", "is_latest": True},
                    "etag",
                    "{writer_etag}",
                )
            },
        ),
    )
