"""The composite `upload_object_multipart`: open an upload, store the parts, complete it,
each step its own transaction, with the crash point `storage.after_parts_uploaded`
between the last part and the completion.

A crash there leaves a real open upload with every part on disk and no object: the
partial state that list_multipart_uploads reveals and complete_multipart_upload or
abort_multipart_upload settles.

Each step writes the commit-log row of the single route it stands for (multipart.create,
multipart.part, multipart.complete), so the composite and the step-by-step routes have
the same effects; the composite declares the effect it exists for, the completion.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import Field
from sqlalchemy.orm import Session

from .._service.context import get_ctx, maybe_crash
from .._service.mutation import (
    claim_key,
    complete_key,
    effect_meta,
    error,
    honoured_key,
    release_key,
)
from . import blobs
from .common import Body, ContentType, Key, PathBucket, Strict, collect, upload_or_404, version_view
from .multipart import finish_upload, open_upload, store_part

router = APIRouter(prefix="/v1")
CRASH_AFTER_PARTS = "storage.after_parts_uploaded"


class MultipartObjectIn(Strict):
    key: Key
    parts: list[Body] = Field(min_length=1, max_length=20)
    content_type: ContentType = "text/plain"


@router.post(
    "/buckets/{bucket}/multipart-objects",
    operation_id="upload_object_multipart",
    openapi_extra=effect_meta("multipart.complete", "set", ["bucket", "key", "etag"]),
)
def upload_object_multipart(
    request: Request, bucket: PathBucket, body: MultipartObjectIn
) -> JSONResponse:
    """Upload a text object in parts with one call: open a multipart upload, upload the
    parts in the order given (part numbers 1..N), then complete it. The steps commit one
    after the other: if the call fails midway, the upload can be left open with its parts
    uploaded and no object written. list_multipart_uploads shows such an upload; settle it
    with complete_multipart_upload (ETags from list_parts) or abort_multipart_upload. A
    set: a repeat writes the same content again (on a versioned bucket, one more
    identical version) and leaves no upload open."""
    ctx = get_ctx(request)
    if sum(len(blobs.utf8(p)) for p in body.parts) > blobs.MAX_OBJECT_BYTES:
        raise error(400, "EntityTooLarge", "A completed object is at most 1 MiB")
    payload = {"bucket": bucket, **body.model_dump()}
    claim = claim_key(ctx, honoured_key(request, native=False), "upload_object_multipart", payload)
    if isinstance(claim, JSONResponse):
        return claim
    try:
        with Session(ctx.engine) as s, s.begin():
            upload_id = open_upload(
                s, bucket, body.key, body.content_type, claim.key if claim else None
            ).upload_id
    except Exception:
        release_key(ctx, claim)
        raise
    refs: list[tuple[int, str]] = []
    dropped: set[str] = set()
    for number, text in enumerate(body.parts, start=1):
        with Session(ctx.engine) as s, s.begin():
            u = upload_or_404(s, bucket, upload_id)
            view, gone = store_part(s, ctx.data_dir, u, number, text, None)
            refs.append((number, view["etag"]))
            dropped |= gone
    maybe_crash(request, CRASH_AFTER_PARTS)
    with Session(ctx.engine) as s, s.begin():
        u = upload_or_404(s, bucket, upload_id)
        v, gone = finish_upload(s, ctx.data_dir, u, refs, None)
        dropped |= gone
        result = {**version_view(v), "upload_id": upload_id, "parts": len(refs)}
        complete_key(s, claim, 200, result)
    collect(request, dropped)
    return JSONResponse(status_code=200, content=result)
