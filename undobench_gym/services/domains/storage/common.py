"""What the storage routes share: typed inputs, lookups and the versioning rules."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path as FsPath
from typing import Annotated, Any

from fastapi import Path, Query, Request
from fastapi.responses import JSONResponse
from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from undobench_gym.services.domains._service.kit import (
    Effect,
    error,
    get_ctx,
    id_types,
    new_id,
    now,
    run_mutation,
)
from undobench_gym.services.domains._service.kit import (
    read_route as read_route,  # one definition, in the kit
)
from undobench_gym.services.domains.storage import blobs
from undobench_gym.services.domains.storage.models import Bucket, ObjectVersion, Upload

BucketName = Annotated[
    str, Field(min_length=3, max_length=63), AfterValidator(blobs.validate_bucket_name)
]
PathBucket = Annotated[str, Path(min_length=3, max_length=63, pattern=blobs.BUCKET_PATTERN)]
Key = Annotated[
    str,
    Field(min_length=1, max_length=1024, description="object key, e.g. logs/2026/app.log"),
    AfterValidator(blobs.validate_key),
]
QueryKey = Annotated[
    str,
    Query(min_length=1, max_length=1024, description="the object key"),
    AfterValidator(blobs.validate_key),
]
Prefix = Annotated[str | None, Query(max_length=1024, description="only keys with this prefix")]
ID_PATTERN = r"^[A-Za-z0-9_]+$"
#: A version id in a body, an upload id in a path.
VersionId, UploadId = id_types(ID_PATTERN, max_length=32)
QueryVersion = Annotated[
    str | None,
    Query(min_length=1, max_length=32, pattern=ID_PATTERN, description="a version id"),
]
Body = Annotated[str, Field(max_length=blobs.MAX_BODY_BYTES), AfterValidator(blobs.validate_body)]
ContentType = Annotated[
    str, Field(max_length=128, pattern=r"^[a-z]+/[A-Za-z0-9.+-]+(; ?charset=[A-Za-z0-9-]+)?$")
]
NULL_VERSION = "null"


class Strict(BaseModel):
    """Request bodies refuse unknown fields (422)."""

    model_config = ConfigDict(extra="forbid")


def collect(request: Request, dropped: set[str]) -> None:
    """Remove the bodies a committed mutation dropped, if nothing else refers to them."""
    if dropped:
        ctx = get_ctx(request)
        with Session(ctx.engine) as s:
            blobs.collect_garbage(ctx.data_dir, s, dropped)


#: `apply` of a mutation that may drop bodies: it adds their hashes to the set it is given.
DroppingApply = Callable[[Session, str | None, set[str]], tuple[int, Any]]


def run_collecting(
    request: Request, effect: Effect, *, route: str, payload: dict[str, Any], apply: DroppingApply
) -> JSONResponse:
    """`run_mutation` of a route with `effect`, then `collect` the bodies the committed
    mutation dropped."""
    dropped: set[str] = set()

    def applied(s: Session, idem: str | None) -> tuple[int, Any]:
        return apply(s, idem, dropped)

    res = run_mutation(request, route=route, native=effect.native, payload=payload, apply=applied)
    collect(request, dropped)
    return res


def bucket_or_404(s: Session, name: str) -> Bucket:
    b = s.get(Bucket, name)
    if b is None:
        raise error(404, "NoSuchBucket", f"The bucket {name} does not exist")
    return b


def upload_or_404(s: Session, bucket: str, upload_id: str) -> Upload:
    u = s.get(Upload, upload_id)
    if u is None or u.bucket != bucket:
        raise error(
            404,
            "NoSuchUpload",
            f"No multipart upload {upload_id} in bucket {bucket}: it was completed or aborted, "
            "or never existed (list_multipart_uploads shows the open ones)",
        )
    return u


def latest(s: Session, bucket: str, key: str) -> ObjectVersion | None:
    q = select(ObjectVersion).where(
        ObjectVersion.bucket == bucket, ObjectVersion.key == key, ObjectVersion.is_latest
    )
    return s.scalar(q)


def find_version(s: Session, bucket: str, key: str, version_id: str | None) -> ObjectVersion:
    """The version asked for, or the current one; 404 if none (or a delete marker)."""
    if version_id is None:
        v = latest(s, bucket, key)
        if v is None or v.delete_marker:
            raise error(404, "NoSuchKey", f"The key {key} does not exist in bucket {bucket}")
        return v
    q = select(ObjectVersion).where(
        ObjectVersion.bucket == bucket,
        ObjectVersion.key == key,
        ObjectVersion.version_id == version_id,
    )
    v = s.scalar(q)
    if v is None:
        raise error(404, "NoSuchVersion", f"Key {key} has no version {version_id}")
    if v.delete_marker:
        raise error(405, "MethodNotAllowed", f"Version {version_id} of {key} is a delete marker")
    return v


def write_version(
    s: Session,
    bucket: Bucket,
    key: str,
    *,
    etag: str | None,
    size: int,
    blob: str | None,
    content_type: str = "text/plain",
    delete_marker: bool = False,
) -> tuple[ObjectVersion, set[str]]:
    """Make a new current version of `key`, following the bucket's versioning state.

    Enabled: a new version with a fresh id; the earlier ones stay. Unversioned or
    Suspended: the "null" version is replaced. Returns the row and the blobs it dropped."""
    dropped: set[str] = set()
    if bucket.versioning == "Enabled":
        version_id = new_id(s, "v")
    else:
        version_id = NULL_VERSION
        old = s.scalar(
            select(ObjectVersion).where(
                ObjectVersion.bucket == bucket.name,
                ObjectVersion.key == key,
                ObjectVersion.version_id == NULL_VERSION,
            )
        )
        if old is not None:
            if old.blob:
                dropped.add(old.blob)
            s.delete(old)
            s.flush()
    current = latest(s, bucket.name, key)
    if current is not None:
        current.is_latest = False
    v = ObjectVersion(
        bucket=bucket.name,
        key=key,
        version_id=version_id,
        is_latest=True,
        delete_marker=delete_marker,
        etag=etag,
        size=size,
        content_type=content_type,
        blob=blob,
        last_modified=now(s),
    )
    s.add(v)
    s.flush()
    return v, dropped


def copy_version(
    s: Session, data_dir: FsPath, bucket: Bucket, key: str, src: ObjectVersion
) -> tuple[ObjectVersion, set[str]]:
    """Make a copy of version `src` the current version of `key` in `bucket` (a copy
    shares the body on disk); returns the row and the blobs it dropped."""
    data = blobs.utf8(read_body(data_dir, src))
    return write_version(
        s,
        bucket,
        key,
        etag=blobs.md5_hex(data),
        size=len(data),
        blob=src.blob,
        content_type=src.content_type,
    )


def remove_version(s: Session, v: ObjectVersion) -> set[str]:
    """Delete one version for good; the newest one left becomes current."""
    dropped = {v.blob} if v.blob else set()
    bucket, key, was_latest = v.bucket, v.key, v.is_latest
    s.delete(v)
    s.flush()
    if was_latest:
        q = select(ObjectVersion).where(ObjectVersion.bucket == bucket, ObjectVersion.key == key)
        newest = s.scalar(q.order_by(ObjectVersion.seq.desc()))
        if newest is not None:
            newest.is_latest = True
    return dropped


def read_body(data_dir: FsPath, v: ObjectVersion) -> str:
    if v.blob is None:
        return ""
    return blobs.read_blob(data_dir, v.blob).decode()
