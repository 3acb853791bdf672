"""Storage metadata tables (SQLAlchemy 2.0 declarative). Object bodies live on disk.

Every object version row names its body by content hash (`blob`, a sha256); the bytes sit
under the service's data dir in `objects/<hash[:2]>/<hash>`, never under a path built
from a user-supplied key.
"""

from __future__ import annotations

from sqlalchemy import ForeignKey, Integer, String, Table, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from undobench_gym.services.domains._service.kit import Base


class Bucket(Base):
    __tablename__ = "st_buckets"
    name: Mapped[str] = mapped_column(String(63), primary_key=True)
    #: Unversioned | Enabled | Suspended (S3's states: once enabled, never unversioned again).
    versioning: Mapped[str] = mapped_column(String(16))
    created: Mapped[str] = mapped_column(String(32))


class ObjectVersion(Base):
    """One version of one key; an unversioned or suspended bucket keeps version_id "null"."""

    __tablename__ = "st_objects"
    __table_args__ = (UniqueConstraint("bucket", "key", "version_id"),)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    bucket: Mapped[str] = mapped_column(ForeignKey("st_buckets.name"))
    key: Mapped[str] = mapped_column(String(1024))
    version_id: Mapped[str] = mapped_column(String(32))
    is_latest: Mapped[bool] = mapped_column(default=True)
    delete_marker: Mapped[bool] = mapped_column(default=False)
    etag: Mapped[str | None] = mapped_column(String(48), nullable=True)
    size: Mapped[int] = mapped_column(Integer, default=0)
    content_type: Mapped[str] = mapped_column(String(128), default="text/plain")
    blob: Mapped[str | None] = mapped_column(String(64), nullable=True)
    last_modified: Mapped[str] = mapped_column(String(32))


class Upload(Base):
    """A multipart upload in progress: completing or aborting it removes the row."""

    __tablename__ = "st_uploads"
    upload_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    bucket: Mapped[str] = mapped_column(ForeignKey("st_buckets.name"))
    key: Mapped[str] = mapped_column(String(1024))
    content_type: Mapped[str] = mapped_column(String(128))
    initiated: Mapped[str] = mapped_column(String(32))


class Part(Base):
    __tablename__ = "st_parts"
    upload_id: Mapped[str] = mapped_column(ForeignKey("st_uploads.upload_id"), primary_key=True)
    part_number: Mapped[int] = mapped_column(Integer, primary_key=True)
    etag: Mapped[str] = mapped_column(String(32))
    size: Mapped[int] = mapped_column(Integer)
    blob: Mapped[str] = mapped_column(String(64))
    uploaded: Mapped[str] = mapped_column(String(32))


# Parents first: reset deletes in reverse order.
TABLES: list[Table] = [
    Base.metadata.tables[m.__tablename__] for m in (Bucket, ObjectVersion, Upload, Part)
]
