"""The git command line, run the safe way: argument lists (never a shell), an isolated
environment (no system or user config, HOME inside the data dir), a fixed identity and
the virtual clock for author and committer dates, so commit hashes follow from the seed.

Also the name rules: branch and tag names follow `git check-ref-format --branch`, file
paths must stay inside the tree (no `..`, no absolute paths, no `.git` component).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

GIT = "git"
BOT_NAME = "Platform Bot"
BOT_EMAIL = "platform-bot@example.com"
ZERO_OID = "0" * 40
#: 2026-01-01T00:00:00Z: the date of reflog entries written by commands given no date.
DEFAULT_DATE = 1767225600
#: Seconds a single git command may take before it counts as hung.
TIMEOUT_S = 20
MAX_NAME = 100
MAX_PATH = 200
SHA_RE = re.compile(r"^[0-9a-f]{4,40}$")
FULL_SHA_RE = re.compile(r"^[0-9a-f]{40}$")
_PATH_COMPONENT = re.compile(r"^[A-Za-z0-9._+-]+$")
_LOCK_MESSAGE = re.compile(r"Unable to create '[^']*\.lock': File exists")


class GitError(Exception):
    """A git command exited non-zero; `stderr` is git's own message."""

    def __init__(self, args: Sequence[str], returncode: int, stderr: str, stdout: str = "") -> None:
        super().__init__(stderr.strip() or f"git {' '.join(args)} exited {returncode}")
        self.args_list = list(args)
        self.returncode = returncode
        self.stderr = stderr
        self.stdout = stdout

    @property
    def is_lock_conflict(self) -> bool:
        return bool(_LOCK_MESSAGE.search(self.stderr))


def git_env(home: Path, date: int | None = None, index_file: Path | None = None) -> dict[str, str]:
    """A closed environment: nothing from the caller's git setup leaks in."""
    stamp = f"{date if date is not None else DEFAULT_DATE} +0000"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "LC_ALL": "C",
        "LANG": "C",
        "TZ": "UTC",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_AUTHOR_NAME": BOT_NAME,
        "GIT_AUTHOR_EMAIL": BOT_EMAIL,
        "GIT_COMMITTER_NAME": BOT_NAME,
        "GIT_COMMITTER_EMAIL": BOT_EMAIL,
        "GIT_AUTHOR_DATE": stamp,
        "GIT_COMMITTER_DATE": stamp,
        # No background gc (it takes locks of its own), no hooks, and no fsync: a crash
        # of the service is a process exit, after which the page cache still holds
        # everything git wrote (fsync only matters for power loss, and costs ~40 ms).
        "GIT_CONFIG_COUNT": "4",
        "GIT_CONFIG_KEY_0": "gc.auto",
        "GIT_CONFIG_VALUE_0": "0",
        "GIT_CONFIG_KEY_1": "core.hooksPath",
        "GIT_CONFIG_VALUE_1": os.devnull,
        "GIT_CONFIG_KEY_2": "advice.detachedHead",
        "GIT_CONFIG_VALUE_2": "false",
        "GIT_CONFIG_KEY_3": "core.fsync",
        "GIT_CONFIG_VALUE_3": "none",
    }
    if index_file is not None:
        env["GIT_INDEX_FILE"] = str(index_file)
    return env


def run_git(
    repo: Path,
    *args: str,
    home: Path,
    date: int | None = None,
    index_file: Path | None = None,
    stdin: bytes | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[bytes]:
    """Run `git <args>` in `repo`; raise GitError on a non-zero exit when `check`."""
    proc = subprocess.run(
        [GIT, *args],
        cwd=repo,
        env=git_env(home, date, index_file),
        input=stdin,
        capture_output=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    if check and proc.returncode != 0:
        raise GitError(
            args,
            proc.returncode,
            proc.stderr.decode(errors="replace"),
            proc.stdout.decode(errors="replace"),
        )
    return proc


def epoch_of(stamp: str) -> int:
    """The virtual clock's ISO time as Unix seconds (git's raw date format)."""
    return int(datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S%z").timestamp())


# ---- names -------------------------------------------------------------------------


def ref_name_problem(name: str) -> str | None:
    """Why `name` is not a valid branch or tag name (git check-ref-format --branch rules,
    ASCII only), or None when it is valid."""
    if not name:
        return "the name is empty"
    if len(name) > MAX_NAME:
        return f"the name is longer than {MAX_NAME} characters"
    if any(not 0x21 <= ord(c) < 0x7F for c in name):
        return "the name may hold only printable ASCII characters without spaces"
    if any(c in name for c in "~^:?*[\\"):
        return "the name may not contain ~ ^ : ? * [ or backslash"
    if name.startswith("-"):
        return "the name may not start with '-'"
    if name in ("@", "HEAD"):
        return f"{name!r} is reserved"
    if name.startswith("/") or name.endswith("/") or "//" in name:
        return "the name may not start or end with '/' or contain '//'"
    if name.endswith("."):
        return "the name may not end with '.'"
    if ".." in name:
        return "the name may not contain '..'"
    if "@{" in name:
        return "the name may not contain '@{'"
    for part in name.split("/"):
        if part.startswith("."):
            return "no part of the name may start with '.'"
        if part.endswith(".lock"):
            return "no part of the name may end with '.lock'"
    return None


def path_problem(path: str) -> str | None:
    """Why `path` is not a safe file path inside the tree, or None when it is safe."""
    if not path:
        return "the path is empty"
    if len(path) > MAX_PATH:
        return f"the path is longer than {MAX_PATH} characters"
    if path.startswith("/"):
        return "the path must be relative to the repository root"
    parts = path.split("/")
    for part in parts:
        if part in ("", ".", ".."):
            return "the path may not contain empty, '.' or '..' components"
        if not _PATH_COMPONENT.fullmatch(part):
            return "path components may hold only letters, digits and . _ + -"
        if part.rstrip(".").lower() == ".git":
            return "the path may not contain a .git component"
    return None


def rev_problem(rev: str) -> str | None:
    """A revision argument is a branch or tag name or a (possibly abbreviated) commit id."""
    if SHA_RE.fullmatch(rev):
        return None
    return ref_name_problem(rev)
