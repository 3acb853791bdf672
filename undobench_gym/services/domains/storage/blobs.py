"""Object bodies on disk, content-addressed, plus the validation of user-supplied names.

A body is stored once under `<data_dir>/objects/<sha256[:2]>/<sha256>`: the file name is
always a hash the service computed, so no key, bucket or upload id ever becomes a path.
Writes go to a temporary file in the same directory and are renamed into place, so a
crash leaves either the whole body or none (at worst an unreferenced blob, which nothing
reads and the next reset wipes).
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from undobench_gym.services.domains._service.kit import error
from undobench_gym.services.domains.storage.models import ObjectVersion, Part

OBJECTS_DIR = "objects"
MAX_BODY_BYTES = 64 * 1024
#: An object built from parts or appends may grow past one request body, up to this.
MAX_OBJECT_BYTES = 1024 * 1024
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_tmp_names = itertools.count()


def md5_hex(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def multipart_etag(part_etags: list[str]) -> str:
    """S3's ETag of a completed multipart upload: md5 of the parts' binary md5s, "-N"."""
    joined = b"".join(bytes.fromhex(e) for e in part_etags)
    return f"{md5_hex(joined)}-{len(part_etags)}"


def store_dir(data_dir: Path) -> Path:
    return data_dir / OBJECTS_DIR


def blob_path(data_dir: Path, digest: str) -> Path:
    if not _HEX64.fullmatch(digest):  # never build a path from anything but a hash
        raise ValueError(f"not a content hash: {digest!r}")
    return store_dir(data_dir) / digest[:2] / digest


def write_blob(data_dir: Path, data: bytes) -> str:
    """Store `data` (idempotent: the same bytes map to the same file); returns its hash."""
    digest = hashlib.sha256(data).hexdigest()
    path = blob_path(data_dir, digest)
    if path.is_file():
        return digest
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".tmp-{os.getpid()}-{next(_tmp_names)}"
    # No fsync (as in the git domain and SQLite's WAL with synchronous=NORMAL): the faults
    # kill processes, never the kernel, and a process's exit loses nothing it wrote; the
    # rename keeps a body whole or absent. fsync only matters for power loss, and cost
    # ~10 ms a body (a quarter of a second per reset).
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)
    return digest


def read_blob(data_dir: Path, digest: str) -> bytes:
    try:
        return blob_path(data_dir, digest).read_bytes()
    except FileNotFoundError:
        raise error(500, "InternalError", "The object's body is missing from disk") from None


def blob_ok(data_dir: Path, digest: str) -> bool:
    try:
        data = blob_path(data_dir, digest).read_bytes()
    except (FileNotFoundError, ValueError):
        return False
    return hashlib.sha256(data).hexdigest() == digest


def digests_of(bodies: list[bytes]) -> dict[str, bytes]:
    """Bodies by the name they are stored under."""
    return {hashlib.sha256(b).hexdigest(): b for b in bodies}


def keep_only(data_dir: Path, wanted: Mapping[str, bytes]) -> None:
    """Make the store hold exactly `wanted` (bodies by `digests_of` name): delete every
    other file, write the missing.

    A reset's job, done in place: names are content hashes and writes are renamed into
    place, so a file already there with a wanted name is that body, whole. Control and
    fault episodes of a pair reset to the same seed, so the second reset writes nothing
    (removing and re-creating the whole tree cost ~60 ms per reset in directory calls)."""
    root = store_dir(data_dir)
    root.mkdir(parents=True, exist_ok=True)
    present = set()
    for entry in os.scandir(root):
        if not entry.is_dir(follow_symlinks=False):
            os.unlink(entry.path)
            continue
        for blob in os.scandir(entry.path):
            if blob.name in wanted and blob.is_file(follow_symlinks=False):
                present.add(blob.name)
            elif blob.is_dir(follow_symlinks=False):
                shutil.rmtree(blob.path)
            else:
                os.unlink(blob.path)
    for digest, data in wanted.items():
        if digest not in present:
            write_blob(data_dir, data)


def collect_garbage(data_dir: Path, session: Session, digests: set[str]) -> None:
    """Remove the blobs in `digests` that no object version or part refers to any more.

    Runs after the transaction that dropped the references has committed; a crash before
    it only leaves an unreferenced file behind."""
    for digest in sorted(digests):
        used = session.scalar(select(ObjectVersion.seq).where(ObjectVersion.blob == digest))
        if used is None:
            used = session.scalar(select(Part.part_number).where(Part.blob == digest))
        if used is None:
            blob_path(data_dir, digest).unlink(missing_ok=True)


def data_dir_of(session: Session) -> Path:
    """The service's data dir: the directory of its SQLite file."""
    database = session.get_bind().engine.url.database
    assert database is not None
    return Path(database).parent


# ---- validation of user-supplied names ---------------------------------------------

BUCKET_PATTERN = r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"
_IPV4 = re.compile(r"^\d{1,3}(\.\d{1,3}){3}$")


def validate_bucket_name(name: str) -> str:
    """S3's bucket naming rules (general purpose buckets)."""
    if not re.fullmatch(BUCKET_PATTERN, name):
        raise ValueError(
            "bucket names are 3-63 characters of lowercase letters, digits, dots and "
            "hyphens, and begin and end with a letter or digit"
        )
    if ".." in name or ".-" in name or "-." in name:
        raise ValueError("bucket names may not contain '..', '.-' or '-.'")
    if _IPV4.fullmatch(name):
        raise ValueError("bucket names may not look like an IP address")
    if name.startswith(("xn--", "sthree-")) or name.endswith(("-s3alias", "--ol-s3")):
        raise ValueError("bucket names may not use a reserved prefix or suffix")
    return name


def utf8(text: str) -> bytes:
    try:
        return text.encode()
    except UnicodeEncodeError:
        raise ValueError("text must be valid UTF-8 (no lone surrogates)") from None


def validate_key(key: str) -> str:
    """Object keys: 1-1024 UTF-8 bytes, "/"-separated, no control characters, no
    backslash, no leading "/", no empty, "." or ".." segment (a trailing "/" is allowed)."""
    if not 1 <= len(utf8(key)) <= 1024:
        raise ValueError("keys are 1 to 1024 bytes of UTF-8")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in key):
        raise ValueError("keys may not contain control characters")
    if "\\" in key:
        raise ValueError("keys may not contain a backslash")
    if key.startswith("/"):
        raise ValueError("keys may not start with '/'")
    segments = key.split("/")
    if segments[-1] == "":
        segments = segments[:-1]
    if any(seg in ("", ".", "..") for seg in segments):
        raise ValueError("keys may not contain empty, '.' or '..' path segments")
    return key


def validate_body(body: str) -> str:
    if len(utf8(body)) > MAX_BODY_BYTES:
        raise ValueError(f"a body is at most {MAX_BODY_BYTES} bytes of UTF-8")
    return body
