"""Seeding the repositories on reset: one fast-import per repository, or a copy of the same
seed's pristine build."""

from __future__ import annotations

import os
import shutil
import threading
import uuid
from pathlib import Path
from typing import Any

from undobench_gym.services.domains.git.fixture import build_fixture
from undobench_gym.services.domains.git.gitcli import run_git
from undobench_gym.services.domains.git.repos import Repo, home_dir, repos_root


def _data(text: str) -> bytes:
    raw = text.encode()
    return b"data %d\n" % len(raw) + raw + b"\n"


def fast_import_stream(history: dict[str, Any]) -> bytes:
    marks = {c["key"]: i + 1 for i, c in enumerate(history["commits"])}
    out: list[bytes] = []
    for c in history["commits"]:
        who = f"{c['author'][0]} <{c['author'][1]}> {c['time']} +0000"
        out.append(f"commit refs/heads/{c['branch']}\nmark :{marks[c['key']]}\n".encode())
        out.append(f"author {who}\ncommitter {who}\n".encode())
        out.append(_data(c["message"]))
        if c["parent"]:
            out.append(f"from :{marks[c['parent']]}\n".encode())
        for path, content in sorted(c["changes"].items()):
            out.append(f"M 100644 inline {path}\n".encode() + _data(content))
        out.append(b"\n")
    for t in history["tags"]:
        who = f"{t['tagger'][0]} <{t['tagger'][1]}> {t['time']} +0000"
        out.append(f"tag {t['name']}\nfrom :{marks[t['target']]}\ntagger {who}\n".encode())
        out.append(_data(t["message"]))
    for branch, key in history["branches"].items():
        out.append(f"reset refs/heads/{branch}\nfrom :{marks[key]}\n\n".encode())
    out.append(b"done\n")
    return b"".join(out)


def _discard(data_dir: Path, paths: list[Path]) -> None:
    """Move `paths` out of the way at once (a rename each) and delete them in the
    background: removing a few hundred object directories is the slow part of a reset."""
    trash = data_dir / "trash"
    trash.mkdir(exist_ok=True)
    for path in paths:
        if path.exists():
            path.rename(trash / f"{path.name}-{uuid.uuid4().hex}")
    victims = list(trash.iterdir())

    def wipe() -> None:
        for victim in victims:
            shutil.rmtree(victim, ignore_errors=True)

    threading.Thread(target=wipe, daemon=True).start()


Fingerprint = tuple[tuple[str, bool, int, int], ...]


def _fingerprint(path: Path) -> Fingerprint:
    """Every entry under `path` (itself included) with its size and modification time in
    ns. A copy keeps the times of what it copies (copy2, and copystat on directories), so a
    repository copied from the seed cache and left alone has its cache entry's
    fingerprint; git writes a new file and renames it into place, or appends to one, and
    either changes it. Hand-written: no library compares trees by their metadata."""
    out = [(".", True, 0, path.stat().st_mtime_ns)]
    stack = [(path, "")]
    while stack:
        folder, rel = stack.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                st = entry.stat(follow_symlinks=False)
                is_dir = entry.is_dir(follow_symlinks=False)
                out.append((rel + entry.name, is_dir, 0 if is_dir else st.st_size, st.st_mtime_ns))
                if is_dir:
                    stack.append((Path(entry.path), rel + entry.name + "/"))
    return tuple(sorted(out))


def _copy_changed(data_dir: Path, root: Path, cache: Path) -> None:
    """Make `root` hold `cache`'s repositories, copying only those an episode changed (a
    release touches one repository of eight) or that are missing."""
    wanted = {p.name for p in cache.iterdir()}
    present = list(root.iterdir())
    stale = [
        p
        for p in present
        if p.name not in wanted
        or not p.is_dir()
        or p.is_symlink()
        or _fingerprint(p) != _fingerprint(cache / p.name)
    ]
    _discard(data_dir, stale)
    kept = {p.name for p in present} - {p.name for p in stale}
    for name in sorted(wanted - kept):
        _copy_repository(cache, root, name)


def _copy_repository(cache: Path, root: Path, name: str) -> None:
    shutil.copytree(cache / name, root / name, symlinks=True)


#: Seeds whose freshly built repositories are kept to copy from (a pair's control and
#: fault episodes reset to the same seed; a sweep's methods revisit it: a sweep's seeds are
#: its innermost loop, so with 4 kept a 20-seed sweep rebuilt every seed for every method).
#: About 0.35 MB a seed.
SEED_CACHE_SIZE = 64


def _seed_cache(data_dir: Path, seed: int) -> Path:
    return data_dir / "seed-cache" / str(seed)


def _trim_seed_cache(data_dir: Path) -> None:
    cached = sorted((data_dir / "seed-cache").iterdir(), key=lambda p: p.stat().st_mtime)
    for old in cached[:-SEED_CACHE_SIZE]:
        shutil.rmtree(old, ignore_errors=True)


def seed_repositories(data_dir: Path, seed: int) -> None:
    """Make the repositories the seeded ones: a copy of the same seed's pristine build
    when one is kept (a few file copies instead of ~10 git processes, ~190 ms; only of
    the repositories that differ from it), else init plus one fast-import each, kept for
    the next reset to this seed. The copy is byte for byte what the build writes:
    fast-import of a fixed stream with fixed times gives the same objects, and git
    changes its files only by writing new ones."""
    root = repos_root(data_dir)
    home_dir(data_dir).mkdir(parents=True, exist_ok=True)
    cache = _seed_cache(data_dir, seed)
    if cache.is_dir() and root.is_dir() and not root.is_symlink():
        _copy_changed(data_dir, root, cache)
        os.utime(cache)
        return
    _discard(data_dir, [root])
    if cache.is_dir():
        shutil.copytree(cache, root, symlinks=True)
        os.utime(cache)
        return
    root.mkdir(parents=True)
    _build_repositories(data_dir, seed)
    partial = cache.with_name(f".{seed}-{uuid.uuid4().hex}")
    shutil.copytree(root, partial, symlinks=True)
    partial.rename(cache)  # whole or absent, should the process die meanwhile
    _trim_seed_cache(data_dir)


def _build_repositories(data_dir: Path, seed: int) -> None:
    root = repos_root(data_dir)
    for history in build_fixture(seed)["history"]:
        repo = Repo(data_dir, history["name"])
        run_git(root, "init", "--quiet", "--template=", "-b", "main", repo.name, home=repo.home)
        stream = fast_import_stream(history)
        # Keep the import as one pack (a few files) instead of ~40 loose-object directories.
        repo.git("-c", "fastimport.unpackLimit=0", "fast-import", "--quiet", "--done", stdin=stream)
        repo.git("read-tree", "refs/heads/main")


__all__ = ["fast_import_stream", "seed_repositories"]
