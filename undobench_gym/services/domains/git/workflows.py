"""Git workflows: task, parameters from the seed, oracles, gold plan, fault scenarios.

git-update-config      dev   single_effect  commit a config change to main
git-backport-fix       dev   multi_effect   branch from a tag, cherry-pick, tag
git-revert-bad-commit  val   compensation   record an incident, revert a bad commit on main
git-cut-release        test  composite      branch, VERSION bump, tag, release notes
git-merge-feature      test  multi_effect   changelog commit, merge commit, tag
"""

from __future__ import annotations

from undobench_gym.services.domains.git.workflows_commits import BACKPORT, CONFIG, REVERT
from undobench_gym.services.domains.git.workflows_release import MERGE, RELEASE
from undobench_gym.services.domains.git.workflows_writer import CONFIG_WRITER
from undobench_gym.services.domains.workflows_stress import (
    crash_then_lost_ack,
    lost_ack_twice,
    retries_dropped,
    stress,
)

WORKFLOWS = [CONFIG, BACKPORT, REVERT, RELEASE, MERGE]
#: The stress split: the same tasks under fault schedules.
STRESS = [
    stress(MERGE, crash_then_lost_ack("commit_file")),
    stress(REVERT, retries_dropped("revert_commit"), lost_ack_twice("commit_file")),
    CONFIG_WRITER,
]
WORKFLOWS += STRESS
