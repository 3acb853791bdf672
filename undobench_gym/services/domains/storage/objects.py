"""Object mutations: put (with preconditions), delete, copy, restore a version, append.

Each is one SQLite transaction (`run_collecting`, over `run_mutation`) that writes the
version row and its commit-log row together. A new body is written to disk inside that
transaction, before it commits: if the process dies in between, the body file exists with
no row naming it, which nothing can observe (bodies are content-addressed) and reset
wipes. Bodies no version refers to any more are removed right after the commit.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from undobench_gym.services.domains._service.kit import (
    Effect,
    KeyHeader,
    error,
    get_ctx,
    write_route,
)
from undobench_gym.services.domains.storage import blobs
from undobench_gym.services.domains.storage.common import (
    Body,
    BucketName,
    ContentType,
    Key,
    PathBucket,
    QueryKey,
    QueryVersion,
    Strict,
    VersionId,
    bucket_or_404,
    copy_version,
    find_version,
    latest,
    read_body,
    remove_version,
    run_collecting,
    write_version,
)
from undobench_gym.services.domains.storage.models import ObjectVersion
from undobench_gym.services.domains.storage.views import version_view

router = APIRouter(prefix="/v1")
ETAG_PATTERN = r"^[0-9a-f]{32}(-[0-9]{1,5})?$"
PUT_OBJECT = Effect(
    "object.put",
    "set",
    ("bucket", "key", "body"),
    "constraint",
    preconditions=("if_match", "if_none_match"),
)
#: A delete undoes the put whose version it removes or hides (a repair, if it was unwanted).
DELETE_OBJECT = Effect("object.delete", "set", ("bucket", "key", "version_id"), compensation=True)
COPY_OBJECT = Effect(
    "object.copy", "set", ("bucket", "key", "source_bucket", "source_key", "etag"), "native"
)
RESTORE_OBJECT = Effect("object.restore", "set", ("bucket", "key", "version_id"), compensation=True)
APPEND_OBJECT = Effect("object.append", "additive", ("bucket", "key"))


def version_ref(v: ObjectVersion) -> str:
    """A version's address, what a put's commit-log row says it created."""
    return f"{v.bucket}/{v.key}?versionId={v.version_id}"


def _undoes_put(v: ObjectVersion | None) -> dict[str, Any] | None:
    """What removing or hiding `v` undoes: the put that wrote it (not a delete marker)."""
    if v is None or v.delete_marker:
        return None
    return {"op": PUT_OBJECT.op, "ref": version_ref(v)}


class PutIn(Strict):
    key: Key
    body: Body
    content_type: ContentType = "text/plain"
    if_match: str | None = Field(
        None, pattern=ETAG_PATTERN, description="write only if the current ETag is this one"
    )
    if_none_match: Literal["*"] | None = Field(
        None, description='"*": write only if the key does not exist yet (else 412)'
    )


@write_route(router, "PUT", "/buckets/{bucket}/object", "put_object", PUT_OBJECT)
def put_object(request: Request, bucket: PathBucket, body: PutIn) -> JSONResponse:
    """Write a text object (body up to 64 KiB); the ETag is the md5 of the body. Conditional
    writes: if_none_match "*" refuses with 412 when the key already exists, if_match refuses
    with 412 unless the current ETag matches. The effect is keyed by bucket, key and body:
    putting the same body to the same key again leaves the same current object (a set).
    On a versioned bucket every put, a repeat included, adds a version, so a repeat grows
    the version history by an identical copy without changing what the key holds."""
    ctx = get_ctx(request)
    payload = {"bucket": bucket, **body.model_dump()}

    def apply(s: Session, idem: str | None, dropped: set[str]) -> tuple[int, Any]:
        b = bucket_or_404(s, bucket)
        cur = latest(s, bucket, body.key)
        exists = cur is not None and not cur.delete_marker
        if body.if_none_match == "*" and exists:
            assert cur is not None
            raise error(
                412,
                "PreconditionFailed",
                f"{body.key} already exists (ETag {cur.etag}, version {cur.version_id})",
            )
        if body.if_match is not None and (cur is None or not exists or cur.etag != body.if_match):
            found = cur.etag if cur is not None and exists else "none"
            raise error(412, "PreconditionFailed", f"{body.key} has ETag {found}, not the if_match")
        data = blobs.utf8(body.body)
        etag = blobs.md5_hex(data)
        digest = blobs.write_blob(ctx.data_dir, data)
        v, gone = write_version(
            s, b, body.key, etag=etag, size=len(data), blob=digest, content_type=body.content_type
        )
        dropped.update(gone)
        args = {"bucket": bucket, **body.model_dump(exclude={"body"})}
        # The identity holds the body, which the row's args leave out.
        identity = {"bucket": bucket, "key": body.key, "body": body.body}
        row_args = {**args, "etag": etag, "size": len(data)}
        PUT_OBJECT.commit(s, row_args, idem, identity, ref=version_ref(v))
        return 200, version_view(v)

    return run_collecting(request, PUT_OBJECT, route="put_object", payload=payload, apply=apply)


@write_route(router, "DELETE", "/buckets/{bucket}/object", "delete_object", DELETE_OBJECT)
def delete_object(
    request: Request, bucket: PathBucket, key: QueryKey, version_id: QueryVersion = None
) -> JSONResponse:
    """Delete an object. With version_id: remove that version for good (the newest one left
    becomes current). Without: on a versioned bucket, add a delete marker (earlier versions
    stay and can be restored); on an unversioned bucket, remove the object. Deleting what is
    already gone changes nothing."""
    payload = {"bucket": bucket, "key": key, "version_id": version_id}

    def apply(s: Session, idem: str | None, dropped: set[str]) -> tuple[int, Any]:
        b = bucket_or_404(s, bucket)
        out: dict[str, Any] = {"bucket": bucket, "key": key}
        if version_id is not None:
            row = s.scalar(
                select(ObjectVersion).where(
                    ObjectVersion.bucket == bucket,
                    ObjectVersion.key == key,
                    ObjectVersion.version_id == version_id,
                )
            )
            if row is None:
                raise error(404, "NoSuchVersion", f"Key {key} has no version {version_id}")
            out.update(version_id=version_id, delete_marker=row.delete_marker, deleted=True)
            undoes = _undoes_put(row)
            dropped.update(remove_version(s, row))
        elif b.versioning == "Unversioned":
            cur = latest(s, bucket, key)
            if cur is None:
                return 200, {**out, "version_id": None, "delete_marker": False, "deleted": False}
            undoes = _undoes_put(cur)
            dropped.update(remove_version(s, cur))
            out.update(version_id=cur.version_id, delete_marker=False, deleted=True)
        else:
            undoes = _undoes_put(latest(s, bucket, key))  # the version the marker hides
            marker, gone = write_version(
                s, b, key, etag=None, size=0, blob=None, delete_marker=True
            )
            dropped.update(gone)
            out.update(version_id=marker.version_id, delete_marker=True, deleted=True)
        # The identity is the version asked for, not the one hit.
        DELETE_OBJECT.commit(s, out, idem, payload, undoes=undoes)
        return 200, out

    return run_collecting(
        request, DELETE_OBJECT, route="delete_object", payload=payload, apply=apply
    )


class CopyIn(Strict):
    key: Key
    source_bucket: BucketName
    source_key: Key
    source_version_id: VersionId | None = None


@write_route(router, "POST", "/buckets/{bucket}/object/copy", "copy_object", COPY_OBJECT)
def copy_object(
    request: Request, bucket: PathBucket, body: CopyIn, idempotency_key: KeyHeader = None
) -> JSONResponse:
    """Copy an object (its current version, or source_version_id) to `key` in this bucket.
    A set: a repeat leaves the same content, though on a versioned bucket it adds another
    identical version. Accepts an Idempotency-Key header: a retry with the same key replays
    the first response instead of copying again."""
    ctx = get_ctx(request)
    payload = {"bucket": bucket, **body.model_dump()}

    def apply(s: Session, idem: str | None, dropped: set[str]) -> tuple[int, Any]:
        bucket_or_404(s, body.source_bucket)
        src = find_version(s, body.source_bucket, body.source_key, body.source_version_id)
        dest = bucket_or_404(s, bucket)
        v, gone = copy_version(s, ctx.data_dir, dest, body.key, src)
        dropped.update(gone)
        args = {**payload, "etag": v.etag, "source_version_id": src.version_id}
        COPY_OBJECT.commit(s, args, idem)
        return 200, {**version_view(v), "copy_source_version_id": src.version_id}

    return run_collecting(request, COPY_OBJECT, route="copy_object", payload=payload, apply=apply)


class RestoreIn(Strict):
    key: Key
    version_id: VersionId


@write_route(
    router, "POST", "/buckets/{bucket}/object/restore", "restore_object_version", RESTORE_OBJECT
)
def restore_object_version(request: Request, bucket: PathBucket, body: RestoreIn) -> JSONResponse:
    """Roll a key back to an earlier version: copy that version on top, so it is current
    again while every version, the one rolled back included, stays in the history. A set:
    a repeat makes the same content current again (adding one more identical version)."""
    ctx = get_ctx(request)
    payload = {"bucket": bucket, **body.model_dump()}

    def apply(s: Session, idem: str | None, dropped: set[str]) -> tuple[int, Any]:
        b = bucket_or_404(s, bucket)
        src = find_version(s, bucket, body.key, body.version_id)
        v, gone = copy_version(s, ctx.data_dir, b, body.key, src)
        dropped.update(gone)
        args = {**payload, "new_version_id": v.version_id, "etag": v.etag}
        RESTORE_OBJECT.commit(s, args, idem)
        return 200, {**version_view(v), "restored_from": body.version_id}

    return run_collecting(
        request, RESTORE_OBJECT, route="restore_object_version", payload=payload, apply=apply
    )


class AppendIn(Strict):
    key: Key
    line: str = Field(min_length=1, max_length=1000, pattern=r"^[^\r\n\x00]+$")


@write_route(router, "POST", "/buckets/{bucket}/object/append", "append_to_object", APPEND_OBJECT)
def append_to_object(request: Request, bucket: PathBucket, body: AppendIn) -> JSONResponse:
    """Append one line (a newline is added) to a text object such as a log or changelog,
    creating it if it does not exist. Not idempotent: every call appends the line again."""
    ctx = get_ctx(request)
    payload = {"bucket": bucket, **body.model_dump()}

    def apply(s: Session, idem: str | None, dropped: set[str]) -> tuple[int, Any]:
        b = bucket_or_404(s, bucket)
        cur = latest(s, bucket, body.key)
        base, ctype = "", "text/plain"
        if cur is not None and not cur.delete_marker:
            base, ctype = read_body(ctx.data_dir, cur), cur.content_type
        if base and not base.endswith("\n"):
            base += "\n"
        data = blobs.utf8(base + body.line + "\n")
        if len(data) > blobs.MAX_OBJECT_BYTES:
            raise error(400, "EntityTooLarge", f"{body.key} would exceed 1 MiB")
        digest = blobs.write_blob(ctx.data_dir, data)
        v, gone = write_version(
            s,
            b,
            body.key,
            etag=blobs.md5_hex(data),
            size=len(data),
            blob=digest,
            content_type=ctype,
        )
        dropped.update(gone)
        APPEND_OBJECT.commit(s, {**payload, "etag": v.etag, "size": v.size}, idem)
        return 200, version_view(v)

    return run_collecting(
        request, APPEND_OBJECT, route="append_to_object", payload=payload, apply=apply
    )
