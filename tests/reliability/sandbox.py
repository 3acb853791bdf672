"""Run stacks with HOME and TMPDIR inside one folder, and find files they left elsewhere.

A stack's processes inherit the environment, and the process runtime makes its workdir
with `tempfile`, so under `sandboxed()` everything a stack could write by default lands
below `root`: the workdir's `data/` (the service's data directory) and its logs are
expected, anything else is a write outside the service's data directory. Files named with
the fuzzers' MARK token are searched for in the usual places outside the sandbox too.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from undobench_gym.core.runtime.process import OWNER_FILE

from .strategies import MARK

#: Where an escaping name could land, outside any sandbox: searched for MARK by name.
OUTSIDE = ["/tmp", "/", "/etc", "/root", "/var/tmp", str(Path(__file__).resolve().parents[2])]


@contextlib.contextmanager
def sandboxed(root: Path) -> Iterator[Path]:
    """HOME, TMPDIR and tempfile's directory point below `root` while the block runs."""
    home, tmp = root / "home", root / "tmp"
    home.mkdir(parents=True, exist_ok=True)
    tmp.mkdir(parents=True, exist_ok=True)
    saved_env = {k: os.environ.get(k) for k in ("HOME", "TMPDIR")}
    saved_tempdir = tempfile.tempdir
    os.environ["HOME"], os.environ["TMPDIR"] = str(home), str(tmp)
    tempfile.tempdir = str(tmp)
    try:
        yield root
    finally:
        tempfile.tempdir = saved_tempdir
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def unexpected_files(root: Path, workdir: Path, allowed: set[Path]) -> list[str]:
    """Files below `root` outside `workdir/data` and the runtime's own files in the
    workdir (logs, owner record, the proxy's CA in `mitmproxy/`) and the env's kept OpenAPI
    documents (written by the env's process when it first builds a domain's tools, which
    depends on the tests that ran before), minus `allowed` (what was there before the
    stack started)."""
    out = []
    for path in files_under(root):
        if path in allowed:
            continue
        if path.is_relative_to(workdir / "data"):
            continue
        if path.parent == workdir and (path.suffix == ".log" or path.name == OWNER_FILE):
            continue
        if path.is_relative_to(workdir / "mitmproxy"):
            continue
        if path.is_relative_to(root / "home" / ".cache" / "undobench" / "openapi"):
            continue  # the env's own kept OpenAPI documents (`core/openapi_cache.py`)
        out.append(str(path.relative_to(root)))
    return sorted(out)


def marked_files(places: list[str] = OUTSIDE, depth: int = 3) -> list[str]:
    """Files or folders whose name holds MARK, in `places` (to `depth` levels)."""
    found = []
    for place in places:
        base = Path(place)
        if not base.is_dir():
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            rel = Path(dirpath).relative_to(base)
            if len(rel.parts) >= depth:
                dirnames[:] = []
            dirnames[:] = [d for d in dirnames if d not in ("proc", "sys", "dev", ".venv")]
            found += [os.path.join(dirpath, n) for n in dirnames + filenames if MARK in n]
    return sorted(set(found))
