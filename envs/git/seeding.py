"""Seeding the repositories on reset: one fast-import per repository, or a copy of the same
seed's pristine build."""

from __future__ import annotations

import os
import shutil
import threading
import uuid
from pathlib import Path
from typing import Any

from .fixture import build_fixture
from .gitcli import run_git
from .repos import Repo, home_dir, repos_root


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


def _discard(data_dir: Path, root: Path) -> None:
    """Move the old repositories out of the way at once (a rename) and delete them in
    the background: removing a few hundred object directories is the slow part of a reset."""
    trash = data_dir / "trash"
    trash.mkdir(exist_ok=True)
    if root.exists():
        root.rename(trash / f"repos-{uuid.uuid4().hex}")
    victims = list(trash.iterdir())

    def wipe() -> None:
        for victim in victims:
            shutil.rmtree(victim, ignore_errors=True)

    threading.Thread(target=wipe, daemon=True).start()


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
    """Wipe every repository and write the seeded ones: a copy of the same seed's pristine
    build when one is kept (a few file copies instead of ~10 git processes, ~190 ms),
    else init plus one fast-import each, kept for the next reset to this seed. The copy
    is byte for byte what the build writes: fast-import of a fixed stream with fixed
    times gives the same objects, and git changes its files only by writing new ones."""
    root = repos_root(data_dir)
    _discard(data_dir, root)
    home_dir(data_dir).mkdir(parents=True, exist_ok=True)
    cache = _seed_cache(data_dir, seed)
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
