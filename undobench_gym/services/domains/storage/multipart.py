"""Multipart uploads: create, upload parts, complete, abort, list (the composite
`upload_object_multipart`, all of it in one call, lives in `composite`).

An upload that was created but never completed nor aborted is visible only through
list_multipart_uploads (and list_parts): no object exists for its key yet, but its parts
sit on disk. That open upload is the partial state a crash mid-composite leaves behind.

Effect identities: an upload is an entity of its own (its upload_id is in the create's
identity), so a second upload of the same key is another upload, not a repeat of the
first; the harm an extra upload does is to stay open, which `partial_state` reports. A
part is (key, upload, part number, body); completing sets the key to the multipart ETag,
whichever upload carried the parts, so the same content completed twice is a harmless
repeat of a set.
"""

from __future__ import annotations

from pathlib import Path as FsPath
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from fastapi.responses import JSONResponse
from pydantic import Field
from sqlalchemy import select
from sqlalchemy.orm import Session

from undobench_gym.services.domains._service.kit import (
    DbSession,
    Effect,
    KeyHeader,
    error,
    get_ctx,
    new_id,
    now,
    run_mutation,
    write_route,
)
from undobench_gym.services.domains.storage import blobs
from undobench_gym.services.domains.storage.common import (
    Body,
    ContentType,
    Key,
    PathBucket,
    Prefix,
    Strict,
    UploadId,
    bucket_or_404,
    read_route,
    run_collecting,
    upload_or_404,
    write_version,
)
from undobench_gym.services.domains.storage.models import ObjectVersion, Part, Upload
from undobench_gym.services.domains.storage.views import (
    PartListOut,
    UploadListOut,
    upload_view,
    version_view,
)

router = APIRouter(prefix="/v1")
MAX_PARTS = 100
PartNumber = Annotated[int, Path(ge=1, le=MAX_PARTS)]
CREATE_UPLOAD = Effect("multipart.create", "additive", ("bucket", "key", "upload_id"))
UPLOAD_PART = Effect("multipart.part", "set", ("bucket", "key", "upload_id", "part_number", "body"))
COMPLETE_UPLOAD = Effect("multipart.complete", "set", ("bucket", "key", "etag"), "native")
ABORT_UPLOAD = Effect("multipart.abort", "set", ("bucket", "key", "upload_id"))


# ---- steps shared by the single routes and the composite ---------------------------


def open_upload(s: Session, bucket: str, key: str, content_type: str, idem: str | None) -> Upload:
    bucket_or_404(s, bucket)
    u = Upload(
        upload_id=new_id(s, "upl"),
        bucket=bucket,
        key=key,
        content_type=content_type,
        initiated=now(s),
    )
    s.add(u)
    s.flush()
    args = {"bucket": bucket, "key": key, "upload_id": u.upload_id, "content_type": content_type}
    CREATE_UPLOAD.commit(s, args, idem)
    return u


def store_part(
    s: Session, data_dir: FsPath, u: Upload, number: int, text: str, idem: str | None
) -> tuple[dict[str, Any], set[str]]:
    """Write one part's body to disk and record it (a re-upload replaces the part)."""
    data = blobs.utf8(text)
    etag, digest = blobs.md5_hex(data), blobs.write_blob(data_dir, data)
    dropped: set[str] = set()
    uploaded = now(s)
    part = s.get(Part, (u.upload_id, number))
    if part is None:
        part = Part(upload_id=u.upload_id, part_number=number)
        part.etag, part.size, part.blob, part.uploaded = etag, len(data), digest, uploaded
        s.add(part)
    else:
        if part.blob != digest:
            dropped.add(part.blob)
        part.etag, part.size, part.blob, part.uploaded = etag, len(data), digest, uploaded
    where = {"bucket": u.bucket, "key": u.key, "upload_id": u.upload_id, "part_number": number}
    # The identity holds the part's body, which the row's args leave out.
    UPLOAD_PART.commit(s, {**where, "etag": etag, "size": len(data)}, idem, {**where, "body": text})
    view = {"upload_id": u.upload_id, "part_number": number, "etag": etag, "size": len(data)}
    return view, dropped


def finish_upload(
    s: Session, data_dir: FsPath, u: Upload, refs: list[tuple[int, str]], idem: str | None
) -> tuple[ObjectVersion, set[str]]:
    """Assemble the listed parts into the object and close the upload (parts not listed
    are discarded, as S3 does)."""
    numbers = [n for n, _ in refs]
    if numbers != sorted(set(numbers)):
        raise error(400, "InvalidPartOrder", "List the parts once each, in ascending order")
    stored = {
        p.part_number: p for p in s.scalars(select(Part).where(Part.upload_id == u.upload_id))
    }
    chunks = []
    for number, etag in refs:
        part = stored.get(number)
        if part is None or part.etag != etag:
            found = "missing" if part is None else f"ETag {part.etag}"
            raise error(400, "InvalidPart", f"Part {number} is {found}, not ETag {etag}")
        chunks.append(blobs.read_blob(data_dir, part.blob))
    data = b"".join(chunks)
    if len(data) > blobs.MAX_OBJECT_BYTES:
        raise error(400, "EntityTooLarge", "A completed object is at most 1 MiB")
    digest = blobs.write_blob(data_dir, data)
    etag = blobs.multipart_etag([e for _, e in refs])
    bucket = bucket_or_404(s, u.bucket)
    v, dropped = write_version(
        s, bucket, u.key, etag=etag, size=len(data), blob=digest, content_type=u.content_type
    )
    dropped |= {p.blob for p in stored.values()}
    for part in stored.values():
        s.delete(part)
    s.flush()
    s.delete(u)
    args = {"bucket": u.bucket, "key": u.key, "etag": etag, "upload_id": u.upload_id}
    COMPLETE_UPLOAD.commit(s, {**args, "parts": numbers, "size": len(data)}, idem)
    return v, dropped


# ---- read-only routes --------------------------------------------------------------


@read_route(router, "/buckets/{bucket}/uploads", "list_multipart_uploads", UploadListOut)
def list_multipart_uploads(
    s: DbSession, bucket: PathBucket, prefix: Prefix = None
) -> dict[str, Any]:
    """List the multipart uploads of a bucket that are still open (created, neither
    completed nor aborted), optionally for keys with a prefix, with their part counts."""
    bucket_or_404(s, bucket)
    q = select(Upload).where(Upload.bucket == bucket)
    if prefix:
        q = q.where(Upload.key.startswith(prefix, autoescape=True))
    uploads = [upload_view(s, u) for u in s.scalars(q.order_by(Upload.initiated, Upload.key))]
    return {"bucket": bucket, "uploads": uploads}


@read_route(router, "/buckets/{bucket}/uploads/{upload_id}/parts", "list_parts", PartListOut)
def list_parts(s: DbSession, bucket: PathBucket, upload_id: UploadId) -> dict[str, Any]:
    """List the parts uploaded so far to an open multipart upload, with their ETags (what
    complete_multipart_upload needs)."""
    u = upload_or_404(s, bucket, upload_id)
    q = select(Part).where(Part.upload_id == upload_id).order_by(Part.part_number)
    parts = [
        {"part_number": p.part_number, "etag": p.etag, "size": p.size, "uploaded": p.uploaded}
        for p in s.scalars(q)
    ]
    return {**upload_view(s, u), "parts": parts}


# ---- mutating routes ---------------------------------------------------------------


class CreateUploadIn(Strict):
    key: Key
    content_type: ContentType = "text/plain"


@write_route(router, "POST", "/buckets/{bucket}/uploads", "create_multipart_upload", CREATE_UPLOAD)
def create_multipart_upload(
    request: Request, bucket: PathBucket, body: CreateUploadIn
) -> JSONResponse:
    """Start a multipart upload for a key; returns its upload_id. Every call opens another
    upload (not idempotent); an upload stays open, holding its parts, until it is completed
    or aborted."""

    def apply(s: Session, idem: str | None) -> tuple[int, Any]:
        u = open_upload(s, bucket, body.key, body.content_type, idem)
        return 200, upload_view(s, u)

    payload = {"bucket": bucket, **body.model_dump()}
    return run_mutation(
        request,
        route="create_multipart_upload",
        native=CREATE_UPLOAD.native,
        payload=payload,
        apply=apply,
    )


class PartIn(Strict):
    body: Body


@write_route(
    router,
    "PUT",
    "/buckets/{bucket}/uploads/{upload_id}/parts/{part_number}",
    "upload_part",
    UPLOAD_PART,
)
def upload_part(
    request: Request, bucket: PathBucket, upload_id: UploadId, part_number: PartNumber, body: PartIn
) -> JSONResponse:
    """Upload part `part_number` (1-100, body up to 64 KiB) of an open multipart upload;
    returns the part's ETag. Uploading the same part number again replaces it (a set)."""
    ctx = get_ctx(request)

    def apply(s: Session, idem: str | None, dropped: set[str]) -> tuple[int, Any]:
        u = upload_or_404(s, bucket, upload_id)
        view, gone = store_part(s, ctx.data_dir, u, part_number, body.body, idem)
        dropped.update(gone)
        return 200, view

    payload = {"bucket": bucket, "upload_id": upload_id, "part_number": part_number}
    payload["body"] = body.body
    return run_collecting(request, UPLOAD_PART, route="upload_part", payload=payload, apply=apply)


class PartRef(Strict):
    part_number: int = Field(strict=True, ge=1, le=MAX_PARTS)
    etag: str = Field(pattern=r"^[0-9a-f]{32}$")


class CompleteIn(Strict):
    parts: list[PartRef] = Field(min_length=1, max_length=MAX_PARTS)


@write_route(
    router,
    "POST",
    "/buckets/{bucket}/uploads/{upload_id}/complete",
    "complete_multipart_upload",
    COMPLETE_UPLOAD,
)
def complete_multipart_upload(
    request: Request,
    bucket: PathBucket,
    upload_id: UploadId,
    body: CompleteIn,
    idempotency_key: KeyHeader = None,
) -> JSONResponse:
    """Complete an open multipart upload from the listed parts (part_number and ETag each,
    ascending): the object appears under the upload's key with the multipart ETag
    ("<md5>-<number of parts>") and the upload closes. A completed upload is gone, so
    completing it again is refused with 404 NoSuchUpload; head_object shows the result.
    Accepts an Idempotency-Key header: a retry with the same key replays the response."""
    ctx = get_ctx(request)

    def apply(s: Session, idem: str | None, dropped: set[str]) -> tuple[int, Any]:
        u = upload_or_404(s, bucket, upload_id)
        refs = [(p.part_number, p.etag) for p in body.parts]
        v, gone = finish_upload(s, ctx.data_dir, u, refs, idem)
        dropped.update(gone)
        return 200, {**version_view(v), "upload_id": upload_id, "parts": len(refs)}

    payload = {"bucket": bucket, "upload_id": upload_id, **body.model_dump()}
    return run_collecting(
        request, COMPLETE_UPLOAD, route="complete_multipart_upload", payload=payload, apply=apply
    )


@write_route(
    router,
    "DELETE",
    "/buckets/{bucket}/uploads/{upload_id}",
    "abort_multipart_upload",
    ABORT_UPLOAD,
)
def abort_multipart_upload(
    request: Request, bucket: PathBucket, upload_id: UploadId
) -> JSONResponse:
    """Abort an open multipart upload: its parts are deleted and no object is written. An
    upload already completed or aborted is gone (404 NoSuchUpload)."""

    def apply(s: Session, idem: str | None, dropped: set[str]) -> tuple[int, Any]:
        u = upload_or_404(s, bucket, upload_id)
        parts = list(s.scalars(select(Part).where(Part.upload_id == upload_id)))
        dropped.update(p.blob for p in parts)
        for p in parts:
            s.delete(p)
        s.flush()
        args = {"bucket": bucket, "key": u.key, "upload_id": upload_id, "parts": len(parts)}
        s.delete(u)
        ABORT_UPLOAD.commit(s, args, idem)
        return 200, {**args, "aborted": True}

    payload = {"bucket": bucket, "upload_id": upload_id}
    return run_collecting(
        request, ABORT_UPLOAD, route="abort_multipart_upload", payload=payload, apply=apply
    )
