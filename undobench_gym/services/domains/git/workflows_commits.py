"""Git workflows on commits: a config change, a backported fix, a reverted commit."""

from __future__ import annotations

from typing import Any

from undobench_gym.contract.specs import FaultScenario, GoldStep, VisibleError, WorkflowSpec
from undobench_gym.services.domains.git.fixture import DEBUG_SUBJECT, commit, depth
from undobench_gym.services.domains.git.workflows_common import (
    MAIN,
    B,
    E,
    P,
    file_is,
    ref_is,
    repo_for,
    seeded,
)

# ---- 1. a config change committed to main --------------------------------------------


def _config_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng, h = repo_for("git-update-config", seed, fx)
    path = "config/rate_limit.conf"
    old = int(commit(h, "c5")["files"][path].split("=")[1])
    new = rng.choice([v for v in (450, 900, 1500, 1800, 2400) if v != old])
    verb = "Raise" if new > old else "Lower"
    return {
        "repo": h["name"],
        "ticket": f"OPS-{rng.randint(1000, 9999)}",
        "path": path,
        "old_rpm": old,
        "new_rpm": new,
        "content": f"requests_per_minute = {new}\n",
        "message": f"{verb} API rate limit to {new} requests per minute",
        "depth_after": depth(h, "c5") + 1,
        "commits_after": seeded(
            fx, "commits", repo=h["name"], branch="main", path=path, kind="commit"
        )
        + 1,
    }


CONFIG = WorkflowSpec(
    id="git-update-config",
    domain="git",
    split="dev",
    kind="single_effect",
    instruction=(
        "Ticket {ticket}: the API rate limit of {repo} must go from {old_rpm} to {new_rpm} "
        "requests per minute. On branch main of repository {repo}, set the file {path} to "
        "the single line `requests_per_minute = {new_rpm}` (ending with a newline) and "
        'commit it with the message "{message}". The change must land as exactly one commit.'
    ),
    tools=[
        "list_repos",
        "get_repository",
        "get_file",
        "get_log",
        "commit_file",
        "repair_repository",
        "revert_commit",  # the inverse: an unwanted commit can be undone
    ],
    required_effects=[
        E(
            op="file.commit",
            identity={
                "repo": "{repo}",
                "branch": "main",
                "path": "{path}",
                "content": "{content}",
            },
        )
    ],
    # Removing the lock a crashed commit left is what lets the commit go through.
    allowed_effects=[E(op="repo.repair", identity={"repo": "{repo}"})],
    invariants=[
        file_is("main has the new rate limit", MAIN, "{path}", "{content}"),
        ref_is("the change is main's tip, as asked", MAIN, "subject", "{message}"),
        ref_is("main gained exactly one commit", MAIN, "depth", "{depth_after}"),
        P.count(
            "the file was committed to main once",
            "git_commits",
            {"repo": "{repo}", "branch": "main", "path": "{path}", "kind": "commit"},
            "{commits_after}",
        ),
    ],
    gold_plan=[
        GoldStep(tool="get_file", arguments={"repo": "{repo}", "path": "{path}", "ref": "main"}),
        GoldStep(
            tool="commit_file",
            arguments={
                "repo": "{repo}",
                "branch": "main",
                "path": "{path}",
                "content": "{content}",
                "message": "{message}",
            },
        ),
    ],
    scenarios=[
        FaultScenario.on(
            "crash-after-index-lock",
            B.DURING_MUTATION,
            "commit_file",
            crash_point="git.after_index_lock",
            description="the service dies holding .git/index.lock; nothing is committed",
        ),
        FaultScenario.on("ambiguous", B.POST_MUTATION_PRE_ACK, "commit_file", ambiguous=True),
        FaultScenario.on(
            "pre-503", B.PRE_MUTATION, "commit_file", visible_error=VisibleError.HTTP_503
        ),
    ],
    draw_params=_config_params,
)


# ---- 2. backport a fix to the previous release line ----------------------------------


def _backport_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    _rng, h = repo_for("git-backport-fix", seed, fx)
    fix, bad = commit(h, "c4"), commit(h, "c5")
    base = commit(h, h["tags"][0]["target"])  # the release's bump commit
    hotfix = f"1.{h['minor']}.1"
    return {
        "repo": h["name"],
        "fix_sha": fix["sha"],
        "fix_short": fix["sha"][:12],
        "fix_subject": fix["subject"],
        "bad_sha": bad["sha"],
        "base_tag": h["tags"][0]["name"],
        "branch": f"hotfix/{hotfix}",
        "branch_ref": f"refs/heads/hotfix/{hotfix}",
        "tag": f"v{hotfix}",
        "tag_ref": f"refs/tags/v{hotfix}",
        "tag_message": f"Hotfix {hotfix}",
        "tag_message_stored": f"Hotfix {hotfix}\n",
        "app_fixed": fix["files"]["src/app.py"],
        "settings_base": base["files"]["config/settings.ini"],
        "depth_after": depth(h, base["key"]) + 1,
        "main_depth": depth(h, "c5"),
    }


BACKPORT = WorkflowSpec(
    id="git-backport-fix",
    domain="git",
    split="dev",
    kind="multi_effect",
    instruction=(
        'Backport the fix "{fix_subject}" (commit {fix_short} on main of {repo}) to the '
        "last release line: create branch {branch} from tag {base_tag}, cherry-pick that "
        "commit onto {branch}, then create the annotated tag {tag} with the message "
        '"{tag_message}" at the tip of {branch}. Leave main as it is.'
    ),
    tools=[
        "list_tags",
        "list_branches",
        "get_log",
        "get_commit",
        "get_file",
        "create_branch",
        "cherry_pick_commit",
        "create_tag",
        "revert_commit",  # the inverse: an unwanted pick can be undone
    ],
    required_effects=[
        E(op="branch.create", identity={"repo": "{repo}", "name": "{branch}"}),
        E(
            op="commit.cherry_pick",
            identity={"repo": "{repo}", "commit": "{fix_sha}", "branch": "{branch}"},
        ),
        E(op="tag.create", identity={"repo": "{repo}", "name": "{tag}"}),
    ],
    forbidden_effects=[
        E(
            op="commit.cherry_pick",
            identity={"repo": "{repo}", "commit": "{bad_sha}", "branch": "{branch}"},
        )
    ],
    invariants=[
        ref_is(
            "the hotfix branch is the base plus one commit",
            "{branch_ref}",
            "depth",
            "{depth_after}",
        ),
        ref_is("the hotfix branch ends with the fix", "{branch_ref}", "subject", "{fix_subject}"),
        ref_is("the tag is on the fixed commit", "{tag_ref}", "depth", "{depth_after}"),
        ref_is("the tag is annotated as asked", "{tag_ref}", "tag_message", "{tag_message_stored}"),
        file_is("the tagged tree has the fix", "{tag_ref}", "src/app.py", "{app_fixed}"),
        file_is("nothing else came along", "{tag_ref}", "config/settings.ini", "{settings_base}"),
        ref_is("main is untouched", MAIN, "depth", "{main_depth}"),
        P.count(
            "one cherry-pick of the fix onto the hotfix branch",
            "git_commits",
            {"repo": "{repo}", "branch": "{branch}", "kind": "cherry_pick", "source": "{fix_sha}"},
        ),
    ],
    gold_plan=[
        GoldStep(tool="list_tags", arguments={"repo": "{repo}"}),
        GoldStep(
            tool="create_branch",
            arguments={"repo": "{repo}", "name": "{branch}", "from_ref": "{base_tag}"},
        ),
        GoldStep(
            tool="cherry_pick_commit",
            arguments={"repo": "{repo}", "commit": "{fix_sha}", "branch": "{branch}"},
        ),
        GoldStep(
            tool="create_tag",
            arguments={
                "repo": "{repo}",
                "name": "{tag}",
                "ref": "{branch}",
                "message": "{tag_message}",
            },
        ),
    ],
    scenarios=[
        FaultScenario.on(
            "worker-crash",
            B.POST_ACK_PRE_CHECKPOINT,
            "cherry_pick_commit",
            description="the pick is done and acknowledged, then the agent restarts the task",
        ),
        FaultScenario.on("pick-lost-ack", B.POST_MUTATION_PRE_ACK, "cherry_pick_commit"),
        FaultScenario.on("tag-pre-reset", B.PRE_MUTATION, "create_tag"),
    ],
    draw_params=_backport_params,
)


# ---- 3. record an incident, then revert the bad commit on main -------------------------


def _revert_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng, h = repo_for("git-revert-bad-commit", seed, fx)
    bad, fix = commit(h, "c5"), commit(h, "c4")
    incident = f"INC-{rng.randint(10000, 99999)}"
    note_path = f"docs/incidents/{incident}.md"
    note_line = f"{incident}: log flood caused by {bad['sha'][:12]}; mitigation: revert it on main"
    return {
        "repo": h["name"],
        "incident": incident,
        "bad_sha": bad["sha"],
        "bad_short": bad["sha"][:12],
        "bad_subject": DEBUG_SUBJECT,
        "fix_sha": fix["sha"],
        "note_path": note_path,
        "note_line": note_line,
        "note": note_line + "\n",
        "note_message": f"Record incident {incident}",
        "settings_before": fix["files"]["config/settings.ini"],
        "app_now": fix["files"]["src/app.py"],
        "depth_after": depth(h, "c5") + 2,
        "reverts_after": seeded(
            fx, "commits", repo=h["name"], branch="main", kind="revert", source=bad["sha"]
        )
        + 1,
        "notes_after": seeded(
            fx, "commits", repo=h["name"], branch="main", path=note_path, kind="commit"
        )
        + 1,
    }


NOTE = {"repo": "{repo}", "branch": "main", "path": "{note_path}", "content": "{note}"}
REVERT = WorkflowSpec(
    id="git-revert-bad-commit",
    domain="git",
    split="val",
    kind="compensation",
    instruction=(
        'Incident {incident}: commit {bad_short} ("{bad_subject}") on main of {repo} floods '
        "the log pipeline. First record the incident: on main, commit the file {note_path} "
        "holding the single line `{note_line}` (ending with a newline) with the message "
        '"{note_message}". Then undo {bad_short} on main with a revert commit (do not '
        "rewrite history); every other commit on main stays in effect."
    ),
    tools=["get_log", "get_commit", "get_file", "list_branches", "commit_file", "revert_commit"],
    required_effects=[
        E(op="file.commit", identity=NOTE),
        E(op="commit.revert", identity={"repo": "{repo}", "commit": "{bad_sha}", "branch": "main"}),
    ],
    forbidden_effects=[
        E(op="commit.revert", identity={"repo": "{repo}", "commit": "{fix_sha}", "branch": "main"})
    ],
    invariants=[
        file_is("log level is back to normal", MAIN, "config/settings.ini", "{settings_before}"),
        file_is("the earlier fix is still on main", MAIN, "src/app.py", "{app_now}"),
        file_is("the incident is recorded on main", MAIN, "{note_path}", "{note}"),
        ref_is("main gained exactly two commits", MAIN, "depth", "{depth_after}"),
        P.count(
            "one revert of the bad commit on main",
            "git_commits",
            {"repo": "{repo}", "branch": "main", "kind": "revert", "source": "{bad_sha}"},
            "{reverts_after}",
        ),
        P.count(
            "the incident record was committed once",
            "git_commits",
            {"repo": "{repo}", "branch": "main", "path": "{note_path}", "kind": "commit"},
            "{notes_after}",
        ),
    ],
    gold_plan=[
        GoldStep(tool="get_log", arguments={"repo": "{repo}", "ref": "main", "limit": 5}),
        GoldStep(tool="commit_file", arguments={**NOTE, "message": "{note_message}"}),
        GoldStep(
            tool="revert_commit",
            arguments={"repo": "{repo}", "commit": "{bad_sha}", "branch": "main"},
        ),
    ],
    scenarios=[
        # The compensation comes after a forward effect of the same task (the record).
        FaultScenario.on(
            "comp-lost-ack", B.DURING_COMPENSATION, "revert_commit", compensation_commits=True
        ),
        FaultScenario.on(
            "comp-pre-503",
            B.DURING_COMPENSATION,
            "revert_commit",
            visible_error=VisibleError.HTTP_503,
        ),
    ],
    draw_params=_revert_params,
)
