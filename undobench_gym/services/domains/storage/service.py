"""Storage service: an S3-like object store. Metadata in SQLite, bodies on disk.

Routes: reads in `reads`, bucket mutations in `buckets`, object mutations in `objects`,
multipart uploads in `multipart`, the `upload_object_multipart` composite in `composite`.
Here: what the state is (tables plus the bodies on disk) and how a reset seeds it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path as FsPath
from types import MappingProxyType
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from undobench_gym.services.domains._service.kit import DomainService
from undobench_gym.services.domains.storage import (
    blobs,
    buckets,
    composite,
    multipart,
    objects,
    reads,
)
from undobench_gym.services.domains.storage.fixture import build_fixture
from undobench_gym.services.domains.storage.models import TABLES, Bucket, ObjectVersion, Part

#: Fixture rows by key, and the tables they seed, parents first.
FIXTURE_ORDER = (("buckets", Bucket), ("objects", ObjectVersion))


def table_rows(seed: int) -> dict[str, list[dict[str, Any]]]:
    """The fixture's rows as the tables hold them: without what lives elsewhere (an
    object's body is on disk, see `seed_files`) or only describes the fixture."""
    fx = build_fixture(seed)
    rows: dict[str, list[dict[str, Any]]] = {}
    for key, model in FIXTURE_ORDER:
        columns = [c.key for c in model.__table__.columns]
        rows[key] = [{k: r[k] for k in columns} for r in fx[key]]
    return rows


@functools.lru_cache(maxsize=64)
def fixture_bodies(seed: int) -> Mapping[str, bytes]:
    """The seed's bodies by stored name: built once per seed, not on every reset."""
    return MappingProxyType(
        blobs.digests_of([o["body"].encode() for o in build_fixture(seed)["objects"]])
    )


def seed_files(data_dir: FsPath, seed: int) -> None:
    """Wipe the bodies a previous episode left and write the fixture's."""
    blobs.keep_only(data_dir, fixture_bodies(seed))


def extra_state(s: Session) -> dict[str, Any]:
    """The disk side of the state: every body a version or part refers to must be on disk,
    intact (its sha256 matches its name)."""
    data_dir = blobs.data_dir_of(s)
    referenced = set(s.scalars(select(ObjectVersion.blob).where(ObjectVersion.blob.is_not(None))))
    referenced |= set(s.scalars(select(Part.blob)))
    missing = sorted(d for d in referenced if d is not None and not blobs.blob_ok(data_dir, d))
    return {"missing_bodies": missing}


def partial_state(state: dict[str, Any]) -> list[str]:
    """Open multipart uploads (created, never completed nor aborted) and bodies gone from
    disk."""
    tables = state["tables"]
    issues = []
    for u in tables["st_uploads"]:
        parts = [p for p in tables["st_parts"] if p["upload_id"] == u["upload_id"]]
        issues.append(
            f"multipart upload {u['upload_id']} for {u['bucket']}/{u['key']} is open with "
            f"{len(parts)} part(s) uploaded: never completed nor aborted"
        )
    missing = set(state.get("extra", {}).get("missing_bodies", []))
    for o in tables["st_objects"]:
        if o["blob"] in missing:
            issues.append(
                f"object {o['bucket']}/{o['key']} version {o['version_id']} has no body on disk"
            )
    return issues


DOMAIN = DomainService(
    name="storage",
    title="UndoBench Storage",
    routers=[reads.router, buckets.router, objects.router, multipart.router, composite.router],
    tables=TABLES,
    fixture=table_rows,
    fixture_order=FIXTURE_ORDER,
    partial_state=partial_state,
    extra_state=extra_state,
    seed_files=seed_files,
)

__all__ = ["DOMAIN"]
