"""The composite `upload_object_multipart`: open an upload, store the parts, complete it,
each step its own transaction, with the crash point `storage.after_parts_uploaded`
between the last part and the completion.

A crash there leaves a real open upload with every part on disk and no object: the
partial state that list_multipart_uploads reveals and complete_multipart_upload or
abort_multipart_upload settles.

Each step writes the commit-log row of the single route it stands for (multipart.create,
multipart.part, multipart.complete), so the composite and the step-by-step routes have
the same effects; the composite declares the effect it exists for, the completion. The
completion commits together with the answer stored under the Idempotency-Key (the
`view` of `run_composite`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import Field
from sqlalchemy.orm import Session

from undobench_gym.services.domains._service.kit import (
    error,
    get_ctx,
    maybe_crash,
    run_composite,
    write_route,
)
from undobench_gym.services.domains.storage import blobs
from undobench_gym.services.domains.storage.common import (
    Body,
    ContentType,
    Key,
    PathBucket,
    Strict,
    collect,
    upload_or_404,
)
from undobench_gym.services.domains.storage.multipart import (
    COMPLETE_UPLOAD,
    finish_upload,
    open_upload,
    store_part,
)
from undobench_gym.services.domains.storage.views import CompletedOut, version_view

router = APIRouter(prefix="/v1")
CRASH_AFTER_PARTS = "storage.after_parts_uploaded"
#: The completion's effect; unlike complete_multipart_upload, not keyed natively.
UPLOAD_MULTIPART = replace(COMPLETE_UPLOAD, idempotency="none")


class MultipartObjectIn(Strict):
    key: Key
    parts: list[Body] = Field(min_length=1, max_length=20)
    content_type: ContentType = "text/plain"


@dataclass
class _Upload:
    """The composite's handle: the upload it opened, the parts stored so far, and the
    bodies its steps dropped (removed once the last step has committed)."""

    upload_id: str = ""
    refs: list[tuple[int, str]] = field(default_factory=list)
    dropped: set[str] = field(default_factory=set)


@write_route(
    router,
    "POST",
    "/buckets/{bucket}/multipart-objects",
    "upload_object_multipart",
    UPLOAD_MULTIPART,
    CompletedOut,
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
    upload = _Upload()

    def start(s: Session, idem: str | None) -> _Upload:
        upload.upload_id = open_upload(s, bucket, body.key, body.content_type, idem).upload_id
        return upload

    def store_parts(h: _Upload) -> None:
        for number, text in enumerate(body.parts, start=1):
            with Session(ctx.engine) as s, s.begin():
                u = upload_or_404(s, bucket, h.upload_id)
                view, gone = store_part(s, ctx.data_dir, u, number, text, None)
                h.refs.append((number, view["etag"]))
                h.dropped |= gone
        maybe_crash(request, CRASH_AFTER_PARTS)

    def complete(s: Session, h: _Upload) -> dict[str, Any]:
        """The last step, in the transaction that stores the answer with the key."""
        u = upload_or_404(s, bucket, h.upload_id)
        v, gone = finish_upload(s, ctx.data_dir, u, h.refs, None)
        h.dropped |= gone
        return {**version_view(v), "upload_id": h.upload_id, "parts": len(h.refs)}

    res = run_composite(
        request,
        route="upload_object_multipart",
        payload={"bucket": bucket, **body.model_dump()},
        start=start,
        advance=store_parts,
        view=complete,
        status=200,
        native=UPLOAD_MULTIPART.native,
    )
    collect(request, upload.dropped)
    return res
