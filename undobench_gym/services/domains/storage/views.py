"""What the storage routes answer with: the views and their response models.

The views are S3's shapes, not table rows (a version hides its sequence number and body
hash), so each model is written out in the key order its view answers in: the OpenAPI
document then tells an agent the shape of every read's answer (and of the composite's),
and a read route's body stays what the view built.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from undobench_gym.services.domains.storage.models import Bucket, ObjectVersion, Part, Upload


class BucketOut(BaseModel):
    name: str
    versioning: str
    created: str


class BucketDetailOut(BucketOut):
    objects: int
    open_uploads: int


class VersionOut(BaseModel):
    bucket: str
    key: str
    version_id: str
    is_latest: bool
    delete_marker: bool
    etag: str | None
    size: int
    content_type: str
    last_modified: str


class ObjectOut(VersionOut):
    body: str


class CompletedOut(VersionOut):
    """An object a multipart upload completed into."""

    upload_id: str
    parts: int


class ObjectListOut(BaseModel):
    bucket: str
    prefix: str | None
    objects: list[VersionOut]
    truncated: bool


class VersionListOut(BaseModel):
    bucket: str
    prefix: str | None
    versions: list[VersionOut]


class UploadOut(BaseModel):
    upload_id: str
    bucket: str
    key: str
    content_type: str
    initiated: str
    parts: int


class UploadListOut(BaseModel):
    bucket: str
    uploads: list[UploadOut]


class PartOut(BaseModel):
    part_number: int
    etag: str
    size: int
    uploaded: str


class PartListOut(BaseModel):
    """An open upload with its parts listed (in place of their count)."""

    upload_id: str
    bucket: str
    key: str
    content_type: str
    initiated: str
    parts: list[PartOut]


def bucket_view(b: Bucket) -> dict[str, Any]:
    return {"name": b.name, "versioning": b.versioning, "created": b.created}


def version_view(v: ObjectVersion) -> dict[str, Any]:
    return {
        "bucket": v.bucket,
        "key": v.key,
        "version_id": v.version_id,
        "is_latest": v.is_latest,
        "delete_marker": v.delete_marker,
        "etag": v.etag,
        "size": v.size,
        "content_type": v.content_type,
        "last_modified": v.last_modified,
    }


def _part_count(s: Session, upload_id: str) -> int:
    q = select(func.count()).select_from(Part).where(Part.upload_id == upload_id)
    return int(s.scalar(q) or 0)


def upload_view(s: Session, u: Upload) -> dict[str, Any]:
    return {
        "upload_id": u.upload_id,
        "bucket": u.bucket,
        "key": u.key,
        "content_type": u.content_type,
        "initiated": u.initiated,
        "parts": _part_count(s, u.upload_id),
    }
