"""The seeded initial state of the storage service: a pure function of the seed.

Five buckets of one project, each with a role the workflows draw from: versioned build
artifacts, versioned service configs (one service with a bad latest push), an unversioned
staging bucket, a versioned prod bucket with a promotions log, and unversioned datasets.
Object rows carry their `body`; the service writes the bodies to disk on reset.

The buckets carry the history that led to their current state, written the way the
service itself would have written it, so that a read-back cannot take old history for
the effect it looks for:
- every build bundle was published as a three-part multipart upload (multipart ETag);
- every config push and every rollback (a restored earlier version, identical bytes) has
  its line in CHANGELOG.txt, one appended line per CHANGELOG version, dated like the push;
- every build in prod was copied from staging and has one line in promotions.log with
  the ETag it was promoted with, again one line per log version;
- every timestamp lies before the virtual clock's epoch (2026-01-01), so anything an
  episode writes is later than all of it.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

from undobench_gym.contract.seeding import rng_for, stable_id

PROJECTS = ["acme", "globex", "initech", "umbrella", "hooli", "vandelay", "stark", "wonka"]
APPS = ["checkout", "search", "billing", "inventory", "gateway", "ledger", "notifier", "catalog"]
DATASETS = ["clickstream", "orders", "sensor-readings", "support-tickets", "ad-impressions"]
CREATED = "2025-11-03T09:00:00Z"
#: Bucket roles, in the order the buckets are created.
ROLES = ("artifacts", "config", "staging", "prod", "datasets")
VERSIONING = {
    "artifacts": "Enabled",
    "config": "Enabled",
    "staging": "Unversioned",
    "prod": "Enabled",
    "datasets": "Unversioned",
}
CHANGELOG = "CHANGELOG.txt"
PROMOTIONS = "promotions.log"
#: The timeout a bad config push sets (it breaks the service).
BROKEN_TIMEOUT_MS = 15
#: Incident numbers of the seeded history lie below this; a task's incident lies above.
HISTORY_INCIDENTS_BELOW = 500


def md5_hex(text: str) -> str:
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


def multipart_etag(parts: list[str]) -> str:
    """S3's ETag of an object completed from these parts (md5 of the parts' md5s, -N)."""
    digests = b"".join(hashlib.md5(p.encode(), usedforsecurity=False).digest() for p in parts)
    return f"{hashlib.md5(digests, usedforsecurity=False).hexdigest()}-{len(parts)}"


def bundle_parts(app: str, version: str, rng: random.Random) -> list[str]:
    """The three parts a build bundle is published in (the publish task uses the same form)."""
    return [
        f"app={app};version={version};part={i}/3;payload="
        + "".join(rng.choice("0123456789abcdef") for _ in range(48))
        + ";"
        for i in (1, 2, 3)
    ]


def appended(body: str, line: str) -> str:
    """`body` after append_to_object added `line`."""
    if body and not body.endswith("\n"):
        body += "\n"
    return body + line + "\n"


def deploy_line(date: str, key: str, release: str, version_id: str) -> str:
    return f"{date} deployed {key} release {release} version {version_id}"


def rollback_line(date: str, incident: int, key: str, version_id: str) -> str:
    return f"{date} INC-{incident} rolled back {key} to version {version_id}"


def promotion_line(app: str, version: str, source_bucket: str, etag: str) -> str:
    return f"promoted {app} {version} from {source_bucket} etag {etag}"


class _Objects:
    """Accumulates object versions with increasing sequence numbers and timestamps, the
    way the service's routes write them (put, restore, append, delete)."""

    def __init__(self, seed: int, versioned: dict[str, bool]) -> None:
        self.seed = seed
        self.versioned = versioned
        self.rows: list[dict[str, Any]] = []
        self.seq = 0

    def add(self, bucket: str, key: str, body: str, etag: str | None = None) -> dict[str, Any]:
        """A new current version of `key` (on an unversioned bucket it replaces the old)."""
        self.seq += 1
        n = self.seq
        versioned = self.versioned[bucket]
        for row in self.versions(bucket, key):
            row["is_latest"] = False
        if not versioned:
            self.rows = [r for r in self.rows if not (r["bucket"] == bucket and r["key"] == key)]
        data = body.encode()
        row = {
            "seq": n,
            "bucket": bucket,
            "key": key,
            "version_id": stable_id("v", self.seed, bucket, key, n) if versioned else "null",
            "is_latest": True,
            "delete_marker": False,
            "etag": etag or md5_hex(body),
            "size": len(data),
            "content_type": "application/json" if key.endswith(".json") else "text/plain",
            "blob": hashlib.sha256(data).hexdigest(),
            "last_modified": f"2025-12-{1 + n // 3:02d}T{8 + n % 3 * 4:02d}:15:00Z",
            "body": body,
        }
        self.rows.append(row)
        return row

    def append(self, bucket: str, key: str, line: str) -> dict[str, Any]:
        cur = self.current(bucket, key)
        return self.add(bucket, key, appended(cur["body"] if cur else "", line))

    def remove(self, bucket: str, key: str) -> None:
        """Delete a key of an unversioned bucket: no trace is left."""
        assert not self.versioned[bucket]
        self.rows = [r for r in self.rows if not (r["bucket"] == bucket and r["key"] == key)]

    def versions(self, bucket: str, key: str) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["bucket"] == bucket and r["key"] == key]

    def current(self, bucket: str, key: str) -> dict[str, Any] | None:
        return next((r for r in self.versions(bucket, key) if r["is_latest"]), None)


def _semver(rng: random.Random) -> tuple[int, int, int]:
    return rng.randint(1, 4), rng.randint(0, 9), rng.randint(0, 9)


def _build_body(app: str, version: str, rng: random.Random) -> str:
    commit = "".join(rng.choice("0123456789abcdef") for _ in range(12))
    return f"app={app}\nversion={version}\ncommit={commit}\nchecksum=sha256:{md5_hex(commit)}\n"


def _config(app: str, rng: random.Random, release: int, broken: bool = False) -> str:
    doc = {
        "service": app,
        "release": f"2025.12.{release}",
        "replicas": rng.randint(2, 8),
        "timeout_ms": BROKEN_TIMEOUT_MS if broken else rng.choice([800, 1200, 1500, 2000, 3000]),
        "feature_flags": sorted(rng.sample(["fast_path", "new_ui", "audit_v2", "geo_routing"], 2)),
    }
    return json.dumps(doc, sort_keys=True)


def manifest_body(dataset: str, rows: int, owner: str) -> str:
    doc = {"dataset": dataset, "schema_version": 1, "rows": rows, "owner": owner}
    return json.dumps(doc)


def config_key(app: str) -> str:
    return f"services/{app}/config.json"


def _config_history(objs: _Objects, bucket: str, apps: list[str], rng: random.Random) -> None:
    """Config pushes of three services, each logged in CHANGELOG.txt; the first service
    once had a bad push rolled back (a restore of its first release), the last one's
    latest push is bad and still live."""
    first, other, broken = apps

    def push(app: str, release: int, bad: bool = False) -> None:
        row = objs.add(bucket, config_key(app), _config(app, rng, release, bad))
        date = row["last_modified"][:10]
        line = deploy_line(date, row["key"], f"2025.12.{release}", row["version_id"])
        objs.append(bucket, CHANGELOG, line)

    push(first, 1)
    push(broken, 1)
    push(other, 1)
    push(first, 2, bad=True)
    good = objs.versions(bucket, config_key(first))[0]
    restored = objs.add(bucket, config_key(first), good["body"])
    incident = rng.randint(100, HISTORY_INCIDENTS_BELOW - 1)
    date = restored["last_modified"][:10]
    line = rollback_line(date, incident, restored["key"], good["version_id"])
    objs.append(bucket, CHANGELOG, line)
    push(broken, 2)
    push(broken, 3, bad=True)


def _promotions(objs: _Objects, staging: str, prod: str, app: str, rng: random.Random) -> None:
    """Three builds of one app reach staging; the first two were promoted to prod (copied,
    then logged); the oldest was cleaned out of staging since."""
    major, minor, patch = _semver(rng)
    versions = [f"{major}.{minor}.{patch}", f"{major}.{minor}.{patch + 1}"]
    versions.append(f"{major}.{minor + 1}.0")
    for i, version in enumerate(versions):
        key = f"builds/{app}/{version}/app.txt"
        built = objs.add(staging, key, _build_body(app, version, rng))
        if i < 2:
            objs.add(prod, key, built["body"])
            objs.append(prod, PROMOTIONS, promotion_line(app, version, staging, built["etag"]))
        if i == 1:
            objs.remove(staging, f"builds/{app}/{versions[0]}/app.txt")


def build_fixture(seed: int) -> dict[str, list[dict[str, Any]]]:
    rng = rng_for("storage-fixture", seed)
    project = f"{rng.choice(PROJECTS)}-{rng.randint(10, 99)}"
    names = {role: f"{project}-{role}" for role in ROLES}
    apps = rng.sample(APPS, 4)
    objs = _Objects(seed, {names[r]: VERSIONING[r] == "Enabled" for r in ROLES})

    artifacts = names["artifacts"]
    for app in apps[:2]:
        major, minor, patch = _semver(rng)
        for v in (f"{major}.{minor}.{patch}", f"{major}.{minor}.{patch + 1}"):
            parts = bundle_parts(app, v, rng)
            key = f"builds/{app}/{v}/bundle.txt"
            objs.add(artifacts, key, "".join(parts), etag=multipart_etag(parts))

    _config_history(objs, names["config"], [apps[1], apps[2], apps[0]], rng)
    _promotions(objs, names["staging"], names["prod"], apps[2], rng)

    for ds in rng.sample(DATASETS, 2):
        rows = rng.randint(10_000, 900_000)
        manifest = manifest_body(ds, rows, "data-platform")
        objs.add(names["datasets"], f"datasets/{ds}/MANIFEST", manifest)

    buckets = [
        {"name": names[r], "versioning": VERSIONING[r], "created": CREATED, "role": r}
        for r in ROLES
    ]
    return {"buckets": buckets, "objects": objs.rows}


def project_of(fx: dict[str, Any]) -> str:
    return str(fx["buckets"][0]["name"]).rsplit("-", 1)[0]


def bucket_for(fx: dict[str, Any], role: str) -> str:
    return str(next(b["name"] for b in fx["buckets"] if b["role"] == role))


def versions_of(fx: dict[str, Any], bucket: str, key: str) -> list[dict[str, Any]]:
    """The versions of one key, oldest first."""
    return [o for o in fx["objects"] if o["bucket"] == bucket and o["key"] == key]


def current(fx: dict[str, Any], bucket: str, key: str) -> dict[str, Any]:
    return next(o for o in versions_of(fx, bucket, key) if o["is_latest"])


def keys_in(fx: dict[str, Any], bucket: str) -> list[str]:
    return sorted({str(o["key"]) for o in fx["objects"] if o["bucket"] == bucket})


def broken_config(fx: dict[str, Any]) -> str:
    """The config key whose live version is the bad push (the one incident still open)."""
    bucket = bucket_for(fx, "config")
    (key,) = [
        k
        for k in keys_in(fx, bucket)
        if k.startswith("services/")
        and json.loads(current(fx, bucket, k)["body"])["timeout_ms"] == BROKEN_TIMEOUT_MS
    ]
    return key
