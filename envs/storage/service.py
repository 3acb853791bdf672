"""Storage service: an S3-like object store. Metadata in SQLite, bodies on disk.

Read-only routes and the bucket routes live here; object mutations in `objects`,
multipart uploads and the `upload_object_multipart` composite in `multipart`.
"""

from __future__ import annotations

from pathlib import Path as FsPath
from typing import Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from .._service.context import DomainService, now
from .._service.mutation import READ_ONLY, effect_meta, error, record_commit, run_mutation
from . import blobs, composite, multipart, objects
from .common import (
    BucketName,
    Ctx,
    PathBucket,
    Prefix,
    QueryKey,
    QueryVersion,
    Strict,
    bucket_or_404,
    find_version,
    read_body,
    version_view,
)
from .fixture import build_fixture
from .models import TABLES, Bucket, ObjectVersion, Part, Upload

router = APIRouter(prefix="/v1")


def bucket_view(b: Bucket) -> dict[str, Any]:
    return {"name": b.name, "versioning": b.versioning, "created": b.created}


# ---- read-only routes --------------------------------------------------------------


@router.get("/buckets", operation_id="list_buckets", openapi_extra=READ_ONLY)
def list_buckets(ctx: Ctx) -> list[dict[str, Any]]:
    """List all buckets with their versioning state."""
    with Session(ctx.engine) as s:
        return [bucket_view(b) for b in s.scalars(select(Bucket).order_by(Bucket.name))]


@router.get("/buckets/{bucket}", operation_id="get_bucket", openapi_extra=READ_ONLY)
def get_bucket(ctx: Ctx, bucket: PathBucket) -> dict[str, Any]:
    """One bucket: versioning state, number of objects and of open multipart uploads."""
    with Session(ctx.engine) as s:
        b = bucket_or_404(s, bucket)
        n_objects = s.scalar(
            select(func.count())
            .select_from(ObjectVersion)
            .where(ObjectVersion.bucket == bucket, ObjectVersion.is_latest)
            .where(ObjectVersion.delete_marker.is_(False))
        )
        n_uploads = s.scalar(
            select(func.count()).select_from(Upload).where(Upload.bucket == bucket)
        )
        return {**bucket_view(b), "objects": n_objects, "open_uploads": n_uploads}


@router.get("/buckets/{bucket}/objects", operation_id="list_objects", openapi_extra=READ_ONLY)
def list_objects(
    ctx: Ctx,
    bucket: PathBucket,
    prefix: Prefix = None,
    limit: int = Query(100, ge=1, le=1000),
) -> dict[str, Any]:
    """List the current objects of a bucket (no bodies), optionally for keys with a
    prefix, in key order. Deleted keys (a delete marker on top) are not listed."""
    with Session(ctx.engine) as s:
        bucket_or_404(s, bucket)
        q = select(ObjectVersion).where(ObjectVersion.bucket == bucket, ObjectVersion.is_latest)
        q = q.where(ObjectVersion.delete_marker.is_(False))
        if prefix:
            q = q.where(ObjectVersion.key.startswith(prefix, autoescape=True))
        rows = list(s.scalars(q.order_by(ObjectVersion.key).limit(limit + 1)))
        listed = [version_view(v) for v in rows[:limit]]
        return {
            "bucket": bucket,
            "prefix": prefix,
            "objects": listed,
            "truncated": len(rows) > limit,
        }


@router.get("/buckets/{bucket}/object", operation_id="get_object", openapi_extra=READ_ONLY)
def get_object(
    ctx: Ctx, bucket: PathBucket, key: QueryKey, version_id: QueryVersion = None
) -> dict[str, Any]:
    """Read an object's body and metadata (the current version, or version_id)."""
    with Session(ctx.engine) as s:
        bucket_or_404(s, bucket)
        v = find_version(s, bucket, key, version_id)
        return {**version_view(v), "body": read_body(ctx.data_dir, v)}


@router.get(
    "/buckets/{bucket}/object/metadata", operation_id="head_object", openapi_extra=READ_ONLY
)
def head_object(
    ctx: Ctx, bucket: PathBucket, key: QueryKey, version_id: QueryVersion = None
) -> dict[str, Any]:
    """An object's metadata without its body: ETag, size, version id, last modified."""
    with Session(ctx.engine) as s:
        bucket_or_404(s, bucket)
        return version_view(find_version(s, bucket, key, version_id))


@router.get(
    "/buckets/{bucket}/versions", operation_id="list_object_versions", openapi_extra=READ_ONLY
)
def list_object_versions(ctx: Ctx, bucket: PathBucket, prefix: Prefix = None) -> dict[str, Any]:
    """List every version of the keys in a bucket (delete markers included), optionally for
    keys with a prefix: by key, newest version first, with is_latest on the current one."""
    with Session(ctx.engine) as s:
        bucket_or_404(s, bucket)
        q = select(ObjectVersion).where(ObjectVersion.bucket == bucket)
        if prefix:
            q = q.where(ObjectVersion.key.startswith(prefix, autoescape=True))
        rows = s.scalars(q.order_by(ObjectVersion.key, ObjectVersion.seq.desc()).limit(1000))
        return {"bucket": bucket, "prefix": prefix, "versions": [version_view(v) for v in rows]}


# ---- bucket mutations --------------------------------------------------------------


class BucketIn(Strict):
    name: BucketName


@router.post(
    "/buckets",
    operation_id="create_bucket",
    status_code=201,
    openapi_extra=effect_meta("bucket.create", "create_unique", ["name"], "constraint"),
)
def create_bucket(request: Request, body: BucketIn) -> JSONResponse:
    """Create a bucket (unversioned; see set_bucket_versioning). Names follow S3's rules:
    3-63 lowercase letters, digits, dots and hyphens. A name that exists is refused (409)."""

    def apply(s: Session, idem: str | None) -> tuple[int, Any]:
        found = s.get(Bucket, body.name)
        if found is not None:
            raise error(
                409,
                "BucketAlreadyOwnedByYou",
                f"Bucket {body.name} already exists (created {found.created}, versioning "
                f"{found.versioning}); read it with get_bucket instead of creating it again",
            )
        b = Bucket(name=body.name, versioning="Unversioned", created=now(s))
        s.add(b)
        record_commit(
            s,
            op="bucket.create",
            effect_class="create_unique",
            identity={"name": body.name},
            args=body.model_dump(),
            key=idem,
        )
        try:
            s.flush()
        except IntegrityError as exc:  # a concurrent create won the primary key
            raise error(409, "BucketAlreadyOwnedByYou", f"Bucket {body.name} exists") from exc
        return 201, bucket_view(b)

    return run_mutation(
        request, route="create_bucket", native=False, payload=body.model_dump(), apply=apply
    )


class VersioningIn(Strict):
    status: Literal["Enabled", "Suspended"]


@router.put(
    "/buckets/{bucket}/versioning",
    operation_id="set_bucket_versioning",
    openapi_extra=effect_meta("bucket.versioning", "set", ["bucket", "status"]),
)
def set_bucket_versioning(request: Request, bucket: PathBucket, body: VersioningIn) -> JSONResponse:
    """Turn versioning on ("Enabled") or pause it ("Suspended") for a bucket. With it on,
    every write keeps the earlier versions. Setting the same status again is harmless."""
    identity = {"bucket": bucket, "status": body.status}

    def apply(s: Session, idem: str | None) -> tuple[int, Any]:
        b = bucket_or_404(s, bucket)
        previous, b.versioning = b.versioning, body.status
        record_commit(
            s,
            op="bucket.versioning",
            effect_class="set",
            identity=identity,
            args={**identity, "previous": previous},
            key=idem,
        )
        return 200, bucket_view(b)

    return run_mutation(
        request, route="set_bucket_versioning", native=False, payload=identity, apply=apply
    )


# ---- domain definition -------------------------------------------------------------

_BUCKET_COLUMNS = {c.key for c in Bucket.__table__.columns}
_OBJECT_COLUMNS = {c.key for c in ObjectVersion.__table__.columns}


def seed_state(s: Session, seed: int) -> None:
    fx = build_fixture(seed)
    s.add_all(Bucket(**{k: b[k] for k in _BUCKET_COLUMNS}) for b in fx["buckets"])
    s.flush()
    s.add_all(ObjectVersion(**{k: o[k] for k in _OBJECT_COLUMNS}) for o in fx["objects"])


def seed_files(data_dir: FsPath, seed: int) -> None:
    """Wipe the bodies a previous episode left and write the fixture's."""
    blobs.wipe(data_dir)
    for o in build_fixture(seed)["objects"]:
        blobs.write_blob(data_dir, o["body"].encode())


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
    routers=[router, objects.router, multipart.router, composite.router],
    tables=TABLES,
    seed_state=seed_state,
    partial_state=partial_state,
    extra_state=extra_state,
    seed_files=seed_files,
)

__all__ = ["DOMAIN"]
