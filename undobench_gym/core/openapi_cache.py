"""A domain's OpenAPI document kept on disk between processes, so that a client of the
services (a sweep worker, an env in a training loop) builds its tool catalogue without
importing the service behind it: FastAPI, SQLAlchemy and the domain's models were about
1.3 s of the 1.9 s a sweep worker's first pair spent loading.

A document is read back only under the key it was written with: a digest of the sources
that render it (the domain's package, the service kit, the contract) and the versions of
the libraries that render OpenAPI, so an edited service or another FastAPI renders it
afresh. A domain from another package (`register_domain`) is always rendered live: what
its service imports is not known here. `UNDOBENCH_OPENAPI_CACHE=0` turns the cache off.
Written by hand: a content-keyed file cache is a few lines, and none of the libraries at
hand keys by source.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

_PACKAGE = Path(__file__).resolve().parents[1]  # undobench_gym/
_DOMAINS = _PACKAGE / "services" / "domains"
_BUILT_IN = "undobench_gym.services.domains."
#: The libraries whose versions change how a route renders as OpenAPI.
RENDERERS = ("fastapi", "pydantic", "pydantic-core", "starlette")
ENV_VAR = "UNDOBENCH_OPENAPI_CACHE"
FORMAT = 1


def enabled() -> bool:
    return os.environ.get(ENV_VAR, "1").strip().lower() not in ("0", "false", "no", "off")


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "undobench" / "openapi"


@cache
def source_key(name: str, module: str) -> str | None:
    """The digest a built-in domain's document is kept under; None for any other module."""
    if module != _BUILT_IN + name or not (_DOMAINS / name).is_dir():
        return None
    files = [
        *sorted((_DOMAINS / name).rglob("*.py")),
        *sorted((_DOMAINS / "_service").rglob("*.py")),
        *sorted(_DOMAINS.glob("*.py")),
        *sorted((_PACKAGE / "contract").rglob("*.py")),
    ]
    digest = hashlib.sha256(f"format {FORMAT}\n".encode())
    for lib in RENDERERS:
        try:
            digest.update(f"{lib} {metadata.version(lib)}\n".encode())
        except metadata.PackageNotFoundError:
            digest.update(f"{lib} -\n".encode())
    for path in files:
        digest.update(f"{path.relative_to(_PACKAGE)}\n".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _path(name: str, key: str) -> Path:
    return cache_root() / f"{name}-{key[:32]}.json"


def load(name: str, module: str) -> dict[str, Any] | None:
    """The kept document of this domain's current sources, or None (render it live)."""
    if not enabled():
        return None
    key = source_key(name, module)
    if key is None:
        return None
    try:
        kept = json.loads(_path(name, key).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(kept, dict) or kept.get("key") != key:
        return None
    doc = kept.get("openapi")
    return doc if isinstance(doc, dict) else None


def save(name: str, module: str, doc: dict[str, Any]) -> None:
    """Keep a live-rendered document for the next process; a cache that cannot be
    written (a read-only home) only costs that process its render."""
    if not enabled():
        return
    key = source_key(name, module)
    if key is None:
        return
    path = _path(name, key)
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        # written whole, then renamed: a concurrent reader sees the old file or the new one
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{name}-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({"key": key, "openapi": doc}, f, separators=(",", ":"))
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        # one document per domain: those of older sources would only pile up
        for old in path.parent.glob(f"{name}-*.json"):
            if old != path:
                with contextlib.suppress(OSError):
                    old.unlink()
