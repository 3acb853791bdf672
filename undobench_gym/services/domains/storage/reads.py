"""Read-only routes over buckets and objects (the multipart reads live in `multipart`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from sqlalchemy import func, select

from undobench_gym.services.domains._service.kit import DbSession
from undobench_gym.services.domains.storage import blobs
from undobench_gym.services.domains.storage.common import (
    PathBucket,
    Prefix,
    QueryKey,
    QueryVersion,
    bucket_or_404,
    find_version,
    read_body,
    read_route,
)
from undobench_gym.services.domains.storage.models import Bucket, ObjectVersion, Upload
from undobench_gym.services.domains.storage.views import (
    BucketDetailOut,
    BucketOut,
    ObjectListOut,
    ObjectOut,
    VersionListOut,
    VersionOut,
    bucket_view,
    version_view,
)

router = APIRouter(prefix="/v1")


@read_route(router, "/buckets", "list_buckets", list[BucketOut])
def list_buckets(s: DbSession) -> list[dict[str, Any]]:
    """List all buckets with their versioning state."""
    return [bucket_view(b) for b in s.scalars(select(Bucket).order_by(Bucket.name))]


@read_route(router, "/buckets/{bucket}", "get_bucket", BucketDetailOut)
def get_bucket(s: DbSession, bucket: PathBucket) -> dict[str, Any]:
    """One bucket: versioning state, number of objects and of open multipart uploads."""
    b = bucket_or_404(s, bucket)
    n_objects = s.scalar(
        select(func.count())
        .select_from(ObjectVersion)
        .where(ObjectVersion.bucket == bucket, ObjectVersion.is_latest)
        .where(ObjectVersion.delete_marker.is_(False))
    )
    n_uploads = s.scalar(select(func.count()).select_from(Upload).where(Upload.bucket == bucket))
    return {**bucket_view(b), "objects": n_objects, "open_uploads": n_uploads}


@read_route(router, "/buckets/{bucket}/objects", "list_objects", ObjectListOut)
def list_objects(
    s: DbSession,
    bucket: PathBucket,
    prefix: Prefix = None,
    limit: int = Query(100, ge=1, le=1000),
) -> dict[str, Any]:
    """List the current objects of a bucket (no bodies), optionally for keys with a
    prefix, in key order. Deleted keys (a delete marker on top) are not listed."""
    bucket_or_404(s, bucket)
    q = select(ObjectVersion).where(ObjectVersion.bucket == bucket, ObjectVersion.is_latest)
    q = q.where(ObjectVersion.delete_marker.is_(False))
    if prefix:
        q = q.where(ObjectVersion.key.startswith(prefix, autoescape=True))
    rows = list(s.scalars(q.order_by(ObjectVersion.key).limit(limit + 1)))
    listed = [version_view(v) for v in rows[:limit]]
    return {"bucket": bucket, "prefix": prefix, "objects": listed, "truncated": len(rows) > limit}


@read_route(router, "/buckets/{bucket}/object", "get_object", ObjectOut)
def get_object(
    s: DbSession, bucket: PathBucket, key: QueryKey, version_id: QueryVersion = None
) -> dict[str, Any]:
    """Read an object's body and metadata (the current version, or version_id)."""
    bucket_or_404(s, bucket)
    v = find_version(s, bucket, key, version_id)
    return {**version_view(v), "body": read_body(blobs.data_dir_of(s), v)}


@read_route(router, "/buckets/{bucket}/object/metadata", "head_object", VersionOut)
def head_object(
    s: DbSession, bucket: PathBucket, key: QueryKey, version_id: QueryVersion = None
) -> dict[str, Any]:
    """An object's metadata without its body: ETag, size, version id, last modified."""
    bucket_or_404(s, bucket)
    return version_view(find_version(s, bucket, key, version_id))


@read_route(router, "/buckets/{bucket}/versions", "list_object_versions", VersionListOut)
def list_object_versions(s: DbSession, bucket: PathBucket, prefix: Prefix = None) -> dict[str, Any]:
    """List every version of the keys in a bucket (delete markers included), optionally for
    keys with a prefix: by key, newest version first, with is_latest on the current one."""
    bucket_or_404(s, bucket)
    q = select(ObjectVersion).where(ObjectVersion.bucket == bucket)
    if prefix:
        q = q.where(ObjectVersion.key.startswith(prefix, autoescape=True))
    rows = s.scalars(q.order_by(ObjectVersion.key, ObjectVersion.seq.desc()).limit(1000))
    return {"bucket": bucket, "prefix": prefix, "versions": [version_view(v) for v in rows]}
