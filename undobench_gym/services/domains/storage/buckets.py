"""Bucket mutations: create a bucket, turn its versioning on or pause it."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from undobench_gym.services.domains._service.kit import (
    Effect,
    error,
    now,
    run_mutation,
    write_route,
)
from undobench_gym.services.domains.storage.common import (
    BucketName,
    PathBucket,
    Strict,
    bucket_or_404,
)
from undobench_gym.services.domains.storage.models import Bucket
from undobench_gym.services.domains.storage.views import bucket_view

router = APIRouter(prefix="/v1")
CREATE_BUCKET = Effect("bucket.create", "create_unique", ("name",), "constraint")
SET_VERSIONING = Effect("bucket.versioning", "set", ("bucket", "status"))


class BucketIn(Strict):
    name: BucketName


@write_route(router, "POST", "/buckets", "create_bucket", CREATE_BUCKET, None, 201)
def create_bucket(request: Request, body: BucketIn) -> JSONResponse:
    """Create a bucket (unversioned; see set_bucket_versioning). Names follow S3's rules:
    3-63 lowercase letters, digits, dots and hyphens. A name that exists is refused (409)."""
    payload = body.model_dump()

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
        CREATE_BUCKET.commit(s, payload, idem)
        try:
            s.flush()
        except IntegrityError as exc:  # a concurrent create won the primary key
            raise error(409, "BucketAlreadyOwnedByYou", f"Bucket {body.name} exists") from exc
        return 201, bucket_view(b)

    return run_mutation(
        request, route="create_bucket", native=CREATE_BUCKET.native, payload=payload, apply=apply
    )


class VersioningIn(Strict):
    status: Literal["Enabled", "Suspended"]


@write_route(router, "PUT", "/buckets/{bucket}/versioning", "set_bucket_versioning", SET_VERSIONING)
def set_bucket_versioning(request: Request, bucket: PathBucket, body: VersioningIn) -> JSONResponse:
    """Turn versioning on ("Enabled") or pause it ("Suspended") for a bucket. With it on,
    every write keeps the earlier versions. Setting the same status again is harmless."""
    payload = {"bucket": bucket, "status": body.status}

    def apply(s: Session, idem: str | None) -> tuple[int, Any]:
        b = bucket_or_404(s, bucket)
        previous, b.versioning = b.versioning, body.status
        SET_VERSIONING.commit(s, {**payload, "previous": previous}, idem)
        return 200, bucket_view(b)

    return run_mutation(
        request,
        route="set_bucket_versioning",
        native=SET_VERSIONING.native,
        payload=payload,
        apply=apply,
    )
