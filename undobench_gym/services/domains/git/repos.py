"""The repositories on disk: where they live, how a reset writes them, how they are read.

Each repository is a regular (non-bare) repository under `<data_dir>/repos/<name>` with
HEAD on `main`; the service keeps no files checked out, and its index always holds
main's tree (as after a `git reset` on main), so a plain `git commit` there is a no-op.
"""

from __future__ import annotations

import re
import subprocess
import threading
from pathlib import Path
from typing import Any

from sqlalchemy import delete
from sqlalchemy.orm import Session

from undobench_gym.services.domains._service.lru import LruCache
from undobench_gym.services.domains.git.gitcli import (
    GIT,
    SHA_RE,
    GitError,
    git_env,
    ref_name_problem,
    run_git,
)
from undobench_gym.services.domains.git.models import File, Ref

MAX_MIRRORED_BYTES = 64 * 1024
FULL_SHA = re.compile(r"[0-9a-f]{40}")
_MUTEXES: dict[str, threading.Lock] = {}
_MUTEXES_GUARD = threading.Lock()


def repos_root(data_dir: Path) -> Path:
    return data_dir / "repos"


def home_dir(data_dir: Path) -> Path:
    return data_dir / "home"


def data_dir_of(session: Session) -> Path:
    """The service's data directory: where its SQLite file lies."""
    bind = session.get_bind()
    database = bind.engine.url.database
    assert database, "the git service runs on a SQLite file"
    return Path(database).parent


class Repo:
    """One repository on disk and the git commands run in it."""

    def __init__(self, data_dir: Path, name: str) -> None:
        self.data_dir = data_dir
        self.name = name
        self.path = repos_root(data_dir) / name
        self.git_dir = self.path / ".git"
        self.home = home_dir(data_dir)

    def exists(self) -> bool:
        return (self.git_dir / "HEAD").is_file()

    def git(
        self,
        *args: str,
        date: int | None = None,
        index_file: Path | None = None,
        stdin: bytes | None = None,
        check: bool = True,
    ) -> subprocess.CompletedProcess[bytes]:
        return run_git(
            self.path,
            *args,
            home=self.home,
            date=date,
            index_file=index_file,
            stdin=stdin,
            check=check,
        )

    def out(self, *args: str, **kw: Any) -> str:
        return self.git(*args, **kw).stdout.decode(errors="replace").strip()

    def mutex(self) -> threading.Lock:
        """One writer at a time per repository inside this process."""
        with _MUTEXES_GUARD:
            return _MUTEXES.setdefault(str(self.path), threading.Lock())

    def head_branch(self) -> str:
        head = (self.git_dir / "HEAD").read_text().strip()
        return head.removeprefix("ref: refs/heads/")

    def resolve(self, rev: str) -> str | None:
        """The full id of the commit `rev` names (branch, tag or commit id), or None.

        A branch is read from its ref file (the service only ever points a branch at a
        commit, so `^{commit}` has nothing to peel); anything else asks git."""
        if rev.startswith("refs/heads/"):
            return self.read_ref(rev)
        if self._branch_wins(rev):
            tip = self.read_ref(f"refs/heads/{rev}")
            if tip is not None:
                return tip
        proc = self.git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False)
        text = proc.stdout.decode().strip()
        return text if proc.returncode == 0 and len(text) == 40 else None

    def _branch_wins(self, name: str) -> bool:
        """Whether git's lookup of the short `name` would reach `refs/heads/<name>` first
        (an agent names branches by their short names, and a rev-parse cost a process):
        git tries `$GIT_DIR/<name>`, `refs/<name>` and `refs/tags/<name>` before it, and
        a hex name may be an abbreviated object id. Anything else is left to git."""
        # A valid branch name holds no revision syntax (`^ ~ : @{ ..`) and is not `HEAD`.
        if ref_name_problem(name) is not None or SHA_RE.fullmatch(name.lower()):
            return False
        packed = self._packed_refs()
        return not any(
            (self.git_dir / ref).exists() or ref in packed
            for ref in (name, f"refs/{name}", f"refs/tags/{name}")
        )

    def branch_tip(self, branch: str) -> str | None:
        return self.resolve(f"refs/heads/{branch}")

    def ref_exists(self, ref: str) -> bool:
        """`git show-ref --verify --quiet REF`, for branches and tags read from the files."""
        if ref.startswith(("refs/heads/", "refs/tags/")):
            return self.read_ref(ref) is not None
        return self.git("show-ref", "--verify", "--quiet", ref, check=False).returncode == 0

    def read_ref(self, ref: str) -> str | None:
        """The object id `ref` (a full refs/... name) holds: its loose file, else its line
        in packed-refs, as git reads it. A git process apiece cost ~4 ms, and the release
        and commit mutations ask a dozen times a call. Git writes a ref by renaming a
        finished lock file into place, so a loose ref file is always whole."""
        if ".." in ref or ref.endswith(".lock"):
            return None
        try:
            value = (self.git_dir / ref).read_text().strip()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            value = self._packed_refs().get(ref, "")
        if value.startswith("ref: "):
            return self.read_ref(value[5:])
        return value if FULL_SHA.fullmatch(value) else None

    def _packed_refs(self) -> dict[str, str]:
        packed = self.git_dir / "packed-refs"
        found: dict[str, str] = {}
        if packed.is_file():
            for line in packed.read_text().splitlines():
                if line and line[0] not in "#^":
                    oid, name = line.split(" ", 1)
                    found[name] = oid
        return found

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        proc = self.git("merge-base", "--is-ancestor", ancestor, descendant, check=False)
        return proc.returncode == 0

    def tree_of(self, commit: str) -> str:
        return self.out("rev-parse", f"{commit}^{{tree}}")

    def refs(self) -> dict[str, str]:
        """refs/heads and refs/tags -> the object each points to: what `git for-each-ref
        --format='%(refname) %(objectname)'` prints, read from the files git keeps them in
        (loose ref files over packed-refs; no `*.lock`), because every state dump reads
        every repository's refs and a git process apiece cost ~10 ms. Git writes a ref by
        renaming a finished lock file into place, so a ref file is always whole."""
        found = self._packed_refs()
        symbolic: dict[str, str] = {}
        for kind in ("heads", "tags"):
            base = self.git_dir / "refs" / kind
            for path in base.rglob("*") if base.is_dir() else ():
                if path.name.endswith(".lock") or not path.is_file():
                    continue
                name = f"refs/{kind}/{path.relative_to(base).as_posix()}"
                value = path.read_text().strip()
                if value.startswith("ref: "):
                    symbolic[name] = value[5:]
                else:
                    found[name] = value
        for name, target in symbolic.items():
            if target in found:
                found[name] = found[target]
        return {
            name: oid
            for name, oid in sorted(found.items())
            if name.startswith(("refs/heads/", "refs/tags/"))
        }

    def lock_files(self) -> list[str]:
        """Lock files git leaves when a writer dies holding them, relative to the repo."""
        if not self.git_dir.is_dir():
            return []
        found = []
        for p in self.git_dir.rglob("*.lock"):
            rel = p.relative_to(self.git_dir)
            if rel.parts[0] != "objects" and p.is_file():
                found.append(str(Path(".git") / rel))
        return sorted(found)


# ---- reading objects ---------------------------------------------------------------


class ObjectReader:
    """One `git cat-file --batch` process reading many objects."""

    def __init__(self, repo: Repo) -> None:
        self.proc = subprocess.Popen(
            [GIT, "cat-file", "--batch"],
            cwd=repo.path,
            env=git_env(repo.home),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.missing = 0  # names asked for that the object store lacks

    def read(self, name: str) -> tuple[str, bytes] | None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(name.encode() + b"\n")
        self.proc.stdin.flush()
        header = self.proc.stdout.readline()
        if not header or header.endswith(b" missing\n"):
            self.missing += 1
            return None
        _oid, kind, size = header.decode().split()
        data = self.proc.stdout.read(int(size))
        self.proc.stdout.read(1)
        return kind, data

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> ObjectReader:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def split_object(data: bytes) -> tuple[dict[str, list[str]], str]:
    """Headers and message of a commit or tag object."""
    head, _, message = data.decode(errors="replace").partition("\n\n")
    headers: dict[str, list[str]] = {}
    for line in head.splitlines():
        key, _, value = line.partition(" ")
        headers.setdefault(key, []).append(value)
    return headers, message


def _tree_files(rd: ObjectReader, tree: str, prefix: str, memo: dict[str, list[Any]]) -> list[Any]:
    if tree in memo:
        return [(prefix + p, b) for p, b in memo[tree]]
    obj = rd.read(tree)
    entries: list[tuple[str, str]] = []
    data = obj[1] if obj else b""
    i = 0
    while i < len(data):
        sp = data.index(b" ", i)
        nul = data.index(b"\0", sp)
        mode, name = data[i:sp].decode(), data[sp + 1 : nul].decode(errors="replace")
        oid = data[nul + 1 : nul + 21].hex()
        i = nul + 21
        if mode == "40000":
            entries += [(f"{name}/{p}", b) for p, b in _tree_files(rd, oid, "", memo)]
        elif mode != "160000":
            entries.append((name, oid))
    memo[tree] = entries
    return [(prefix + p, b) for p, b in entries]


Rows = tuple[list[dict[str, Any]], list[dict[str, Any]]]
#: Snapshots by repository name and refs, the most recent kept. Git objects never change,
#: so refs that point where they pointed before mean the same rows; and a sweep comes back
#: to the same refs over and over (the same seed under another method or scenario, the
#: control episode's mutations again in the fault episode). A hit costs no git process.
_SNAPSHOTS: LruCache[tuple[str, tuple[tuple[str, str], ...]], Rows] = LruCache(128)


def snapshot(repo: Repo) -> Rows:
    """The git_refs and git_files rows of `repo` as it is on disk now."""
    ref_map = repo.refs()
    key = (repo.name, tuple(sorted(ref_map.items())))
    kept = _SNAPSHOTS.get(key)
    if kept is None:
        kept, complete = _read_snapshot(repo, ref_map)
        if not complete:  # an object the refs name is missing: nothing to keep
            return kept
        _SNAPSHOTS.put(key, kept)
    return [dict(r) for r in kept[0]], [dict(f) for f in kept[1]]


def _read_snapshot(repo: Repo, ref_map: dict[str, str]) -> tuple[Rows, bool]:
    """The rows for `ref_map`, read through one `cat-file` process, and whether every
    object they name was there."""
    refs: list[dict[str, Any]] = []
    files: list[dict[str, Any]] = []
    commits: dict[str, tuple[str, list[str], str]] = {}
    trees: dict[str, list[Any]] = {}
    blobs: dict[str, tuple[int, str | None]] = {}
    with ObjectReader(repo) as rd:

        def load(sha: str) -> tuple[str, list[str], str]:
            if sha not in commits:
                obj = rd.read(sha)
                headers, message = split_object(obj[1] if obj else b"")
                commits[sha] = (headers["tree"][0], headers.get("parent", []), message)
            return commits[sha]

        # What `git for-each-ref refs/heads refs/tags` lists (sorted by name), with the
        # kind of each target from its object, so no git process beyond the reader.
        for refname, oid in ref_map.items():
            target = rd.read(oid)
            if target is None:
                continue
            kind, data = target
            tag_object = tag_message = None
            sha = oid
            if kind == "tag":
                headers, tag_message = split_object(data)
                tag_object, sha = oid, headers["object"][0]
            elif kind == "commit":
                headers, message = split_object(data)
                commits.setdefault(oid, (headers["tree"][0], headers.get("parent", []), message))
            else:
                continue
            seen: set[str] = set()
            stack = [sha]
            while stack:
                cur = stack.pop()
                if cur not in seen:
                    seen.add(cur)
                    stack.extend(load(cur)[1])
            tree, _parents, message = load(sha)
            is_branch = refname.startswith("refs/heads/")
            refs.append(
                {
                    "repo": repo.name,
                    "ref": refname,
                    "kind": "branch" if is_branch else "tag",
                    "name": refname.split("/", 2)[2],
                    "sha": sha,
                    "subject": message.split("\n", 1)[0],
                    "depth": len(seen),
                    "tag_object": tag_object,
                    "tag_message": tag_message,
                }
            )
            for path, blob in _tree_files(rd, tree, "", trees):
                if blob not in blobs:
                    obj = rd.read(blob)
                    data = obj[1] if obj else b""
                    text: str | None = None
                    if len(data) <= MAX_MIRRORED_BYTES:
                        try:
                            text = data.decode()
                        except UnicodeDecodeError:
                            text = None
                    blobs[blob] = (len(data), text)
                size, content = blobs[blob]
                files.append(
                    {
                        "repo": repo.name,
                        "ref": refname,
                        "path": path,
                        "blob": blob,
                        "size": size,
                        "content": content,
                    }
                )
    return (refs, files), rd.missing == 0


def sync_mirror(s: Session, repo: Repo) -> None:
    """Rebuild the repository's git_refs and git_files rows from disk, in `s`."""
    refs, files = snapshot(repo)
    s.execute(delete(Ref).where(Ref.repo == repo.name))
    s.execute(delete(File).where(File.repo == repo.name))
    s.flush()
    s.add_all(Ref(**r) for r in refs)
    s.add_all(File(**f) for f in files)
    s.flush()


__all__ = ["GitError", "Repo", "data_dir_of", "home_dir", "repos_root", "snapshot", "sync_mirror"]
