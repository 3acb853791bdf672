"""Git workflows on releases: cutting one, and finishing a feature with a merge and a tag."""

from __future__ import annotations

from typing import Any

from undobench_gym.contract.specs import FaultScenario, GoldStep, VisibleError, WorkflowSpec
from undobench_gym.services.domains.git.fixture import changelog_with, commit, depth
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

# ---- 4. cut a release ----------------------------------------------------------------

NOTES = [
    "Faster cold starts",
    "Clearer error messages on invalid requests",
    "Lower memory use under load",
    "Structured JSON access logs",
    "Graceful shutdown on SIGTERM",
]


def _release_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng, h = repo_for("git-cut-release", seed, fx)
    version = f"1.{h['minor'] + 1}.0"
    notes = f"- {rng.choice(NOTES)}"
    changelog = commit(h, "c5")["files"]["CHANGELOG.md"]
    return {
        "repo": h["name"],
        "version": version,
        "notes": notes,
        "branch_ref": f"refs/heads/release/{version}",
        "tag_ref": f"refs/tags/v{version}",
        "version_file": f"{version}\n",
        "tag_message": f"Release {version}\n",
        "changelog_after": changelog_with(changelog, version, notes),
        "branch_depth": depth(h, "c5") + 2,
        "tag_depth": depth(h, "c5") + 1,
        "main_depth": depth(h, "c5"),
        "releases_after": seeded(fx, "releases", repo=h["name"]) + 1,
    }


RELEASE_EFFECTS = ["release.cut", "release.branch", "release.bump", "release.tag", "release.notes"]
RELEASE = WorkflowSpec(
    id="git-cut-release",
    domain="git",
    split="test",
    kind="composite",
    instruction=(
        "Release management: cut release {version} of {repo} from the current main, with "
        'the release notes "{notes}". The release creates branch release/{version}, bumps '
        "VERSION, tags v{version} and adds the notes to CHANGELOG.md. When you are done, "
        "release {version} must exist once and be complete."
    ),
    tools=[
        "get_repository",
        "list_releases",
        "list_tags",
        "list_branches",
        "cut_release",
        "resume_release",
        "repair_repository",
    ],
    required_effects=[
        E(op=op, identity={"repo": "{repo}", "version": "{version}"}) for op in RELEASE_EFFECTS
    ],
    # Finishing a release a crash stopped: remove the lock git left, resume the release.
    allowed_effects=[
        E(op="repo.repair", identity={"repo": "{repo}"}),
        E(op="release.resume", identity={"repo": "{repo}", "version": "{version}"}),
    ],
    invariants=[
        P.field_is(
            "the release is complete",
            "git_releases",
            {"repo": "{repo}", "version": "{version}"},
            "status",
            "complete",
        ),
        P.count(
            "one new release of the repository",
            "git_releases",
            {"repo": "{repo}"},
            "{releases_after}",
        ),
        file_is("the tag carries the new VERSION", "{tag_ref}", "VERSION", "{version_file}"),
        ref_is("the tag is the bump on top of main", "{tag_ref}", "depth", "{tag_depth}"),
        ref_is("the tag is annotated", "{tag_ref}", "tag_message", "{tag_message}"),
        file_is(
            "the notes are in the changelog", "{branch_ref}", "CHANGELOG.md", "{changelog_after}"
        ),
        ref_is(
            "the release branch is main plus two commits", "{branch_ref}", "depth", "{branch_depth}"
        ),
        ref_is("main is untouched", MAIN, "depth", "{main_depth}"),
    ],
    gold_plan=[
        GoldStep(tool="list_releases", arguments={"repo": "{repo}"}),
        GoldStep(
            tool="cut_release",
            arguments={"repo": "{repo}", "version": "{version}", "notes": "{notes}"},
        ),
    ],
    scenarios=[
        FaultScenario.on(
            "crash-mid-bump",
            B.DURING_MUTATION,
            "cut_release",
            crash_point="git.after_index_lock",
            description="branch created, VERSION bump staged under .git/index.lock, no commit",
        ),
        FaultScenario.on(
            "crash-after-branch",
            B.DURING_MUTATION,
            "cut_release",
            crash_point="git.release.after_branch",
        ),
        FaultScenario.on("lost-ack", B.POST_MUTATION_PRE_ACK, "cut_release"),
    ],
    draw_params=_release_params,
)


# ---- 5. finish a feature: changelog, merge, release-candidate tag --------------------


def _merge_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng, h = repo_for("git-merge-feature", seed, fx)
    branch = h["feature_branch"]
    title = h["feature_title"]
    module = h["slug"].replace("-", "_")
    entry = f"- {title} ({rng.choice(['beta', 'preview', 'opt-in'])})"
    changelog = commit(h, "f2")["files"]["CHANGELOG.md"]
    rc = f"v1.{h['minor'] + 1}.0-rc.{rng.randint(1, 3)}"
    feature_only = depth(h, "f2") - depth(h, "c3")
    return {
        "repo": h["name"],
        "branch": branch,
        "branch_ref": f"refs/heads/{branch}",
        "entry": entry,
        "changelog_after": changelog + entry + "\n",
        "commit_message": f"Add {title.lower()} to the changelog",
        "merge_message": f"Merge {branch} into main",
        "tag": rc,
        "tag_ref": f"refs/tags/{rc}",
        "module_path": f"src/{module}.py",
        "module": commit(h, "f1")["files"][f"src/{module}.py"],
        "feature_depth": depth(h, "f2") + 1,
        "main_depth": depth(h, "c5") + feature_only + 2,
        "changelog_commits_after": seeded(
            fx, "commits", repo=h["name"], branch=branch, path="CHANGELOG.md", kind="commit"
        )
        + 1,
    }


MERGE = WorkflowSpec(
    id="git-merge-feature",
    domain="git",
    split="test",
    kind="multi_effect",
    instruction=(
        "The {branch} work in {repo} is approved. First append the line `{entry}` to the "
        "end of CHANGELOG.md on {branch}, committed with the message "
        '"{commit_message}". Then merge {branch} into main as a merge commit with the '
        'message "{merge_message}", and put the lightweight tag {tag} on the merge commit.'
    ),
    tools=[
        "list_branches",
        "get_file",
        "get_log",
        "commit_file",
        "merge_branch",
        "create_tag",
        "list_tags",
        "revert_commit",  # the inverse: an unwanted commit can be undone
    ],
    required_effects=[
        E(
            op="file.commit",
            identity={
                "repo": "{repo}",
                "branch": "{branch}",
                "path": "CHANGELOG.md",
                "content": "{changelog_after}",
            },
        ),
        E(op="branch.merge", identity={"repo": "{repo}", "source": "{branch}", "target": "main"}),
        E(op="tag.create", identity={"repo": "{repo}", "name": "{tag}"}),
    ],
    invariants=[
        file_is("main has the changelog entry", MAIN, "CHANGELOG.md", "{changelog_after}"),
        file_is("main has the feature module", MAIN, "{module_path}", "{module}"),
        ref_is("the merge commit is main's tip", MAIN, "subject", "{merge_message}"),
        ref_is("main gained the feature and one merge commit", MAIN, "depth", "{main_depth}"),
        ref_is(
            "the feature branch gained exactly one commit",
            "{branch_ref}",
            "depth",
            "{feature_depth}",
        ),
        ref_is("the tag is on the merge commit", "{tag_ref}", "subject", "{merge_message}"),
        ref_is("the tag is on main's tip", "{tag_ref}", "depth", "{main_depth}"),
        P.count(
            "the changelog was committed to the feature branch once",
            "git_commits",
            {"repo": "{repo}", "branch": "{branch}", "path": "CHANGELOG.md", "kind": "commit"},
            "{changelog_commits_after}",
        ),
    ],
    gold_plan=[
        GoldStep(
            tool="get_file",
            arguments={"repo": "{repo}", "path": "CHANGELOG.md", "ref": "{branch}"},
        ),
        GoldStep(
            tool="commit_file",
            arguments={
                "repo": "{repo}",
                "branch": "{branch}",
                "path": "CHANGELOG.md",
                "content": "{changelog_after}",
                "message": "{commit_message}",
            },
        ),
        GoldStep(
            tool="merge_branch",
            arguments={
                "repo": "{repo}",
                "source": "{branch}",
                "target": "main",
                "mode": "merge_commit",
                "message": "{merge_message}",
            },
        ),
        GoldStep(tool="create_tag", arguments={"repo": "{repo}", "name": "{tag}", "ref": "main"}),
    ],
    scenarios=[
        FaultScenario.on("commit-lost-ack", B.POST_MUTATION_PRE_ACK, "commit_file"),
        FaultScenario.on(
            "commit-502-after-commit",
            B.POST_MUTATION_PRE_ACK,
            "commit_file",
            visible_error=VisibleError.HTTP_502,
            description="the commit is on the branch; the gateway answers 502",
        ),
        FaultScenario.on("merge-lost-ack", B.POST_MUTATION_PRE_ACK, "merge_branch"),
        FaultScenario.on("tag-lost-ack", B.POST_MUTATION_PRE_ACK, "create_tag"),
    ],
    draw_params=_merge_params,
)
