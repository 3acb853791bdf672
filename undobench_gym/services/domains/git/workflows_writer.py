"""Git under a concurrent writer: a colleague pushes a commit to main right
after the agent's commit of the config file, amending the same file (a review note). If
the agent's commit lost its answer, a blind re-send, or a read-back that sees the
colleague's content and concludes the commit never landed, commits the old content on
top and overwrites the colleague's change; main must keep it."""

from __future__ import annotations

from typing import Any

from undobench_gym.contract.specs import StatePredicate as P
from undobench_gym.services.domains.git.workflows_commits import CONFIG
from undobench_gym.services.domains.workflows_writer import overwrite, replace, with_writer, writer

MAIN = {"repo": "{repo}", "ref": "refs/heads/main"}


def _params(seed: int, fx: dict[str, Any], p: dict[str, Any]) -> dict[str, Any]:
    return {
        "writer_content": p["content"] + f"# reviewed under {p['ticket']}: keep until Q3\n",
        "writer_message": f"Note the {p['ticket']} review in the rate limit config",
        "depth_with_writer": p["depth_after"] + 1,
        "commits_with_writer": p["commits_after"] + 1,
    }


CONFIG_WRITER = with_writer(
    CONFIG,
    writer(
        "commit_file",
        "a colleague pushes a commit to main that amends the same file",
        (
            "commit_file",
            {
                "repo": "{repo}",
                "branch": "main",
                "path": "{path}",
                "content": "{writer_content}",
                "message": "{writer_message}",
            },
        ),
    ),
    overwrite("commit_file"),
    params=_params,
    invariants=replace(
        CONFIG.invariants,
        {
            "main has the new rate limit": P.field_is(
                "main has the colleague's amended file, built on the new rate limit",
                "git_files",
                {**MAIN, "path": "{path}"},
                "content",
                "{writer_content}",
            ),
            "the change is main's tip, as asked": P.field_is(
                "the colleague's commit is main's tip",
                "git_refs",
                MAIN,
                "subject",
                "{writer_message}",
            ),
            "main gained exactly one commit": P.field_is(
                "main gained the agent's commit and the colleague's",
                "git_refs",
                MAIN,
                "depth",
                "{depth_with_writer}",
            ),
            "the file was committed to main once": P.count(
                "the file was committed to main once by each",
                "git_commits",
                {"repo": "{repo}", "branch": "main", "path": "{path}", "kind": "commit"},
                "{commits_with_writer}",
            ),
        },
    ),
)
