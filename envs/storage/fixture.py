"""The seeded initial state of the storage service: a pure function of the seed.

Five buckets of one project, each with a role the workflows draw from: versioned build
artifacts, versioned service configs (one service with a bad latest push), an unversioned
staging bucket, a versioned prod bucket with a promotions log, and unversioned datasets.
Object rows carry their `body`; the service writes the bodies to disk on reset.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

from undobench_gym.seeding import rng_for, stable_id

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


def md5_hex(text: str) -> str:
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


class _Objects:
    """Accumulates object versions with increasing sequence numbers and timestamps."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rows: list[dict[str, Any]] = []

    def add(self, bucket: str, key: str, body: str, versioned: bool) -> dict[str, Any]:
        n = len(self.rows) + 1
        for row in self.rows:
            if row["bucket"] == bucket and row["key"] == key:
                row["is_latest"] = False
        data = body.encode()
        row = {
            "seq": n,
            "bucket": bucket,
            "key": key,
            "version_id": stable_id("v", self.seed, bucket, key, n) if versioned else "null",
            "is_latest": True,
            "delete_marker": False,
            "etag": md5_hex(body),
            "size": len(data),
            "content_type": "application/json" if key.endswith(".json") else "text/plain",
            "blob": hashlib.sha256(data).hexdigest(),
            "last_modified": f"2025-12-{1 + n // 3:02d}T{8 + n % 3 * 4:02d}:15:00Z",
            "body": body,
        }
        self.rows.append(row)
        return row


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
        "timeout_ms": 15 if broken else rng.choice([800, 1200, 1500, 2000, 3000]),
        "feature_flags": sorted(rng.sample(["fast_path", "new_ui", "audit_v2", "geo_routing"], 2)),
    }
    return json.dumps(doc, sort_keys=True)


def manifest_body(dataset: str, rows: int, owner: str) -> str:
    doc = {"dataset": dataset, "schema_version": 1, "rows": rows, "owner": owner}
    return json.dumps(doc)


def build_fixture(seed: int) -> dict[str, list[dict[str, Any]]]:
    rng = rng_for("storage-fixture", seed)
    project = f"{rng.choice(PROJECTS)}-{rng.randint(10, 99)}"
    names = {role: f"{project}-{role}" for role in ROLES}
    apps = rng.sample(APPS, 4)
    objs = _Objects(seed)

    artifacts = names["artifacts"]
    for app in apps[:2]:
        major, minor, patch = _semver(rng)
        for v in (f"{major}.{minor}.{patch}", f"{major}.{minor}.{patch + 1}"):
            objs.add(artifacts, f"builds/{app}/{v}/bundle.txt", _build_body(app, v, rng), True)

    config = names["config"]
    broken_app = apps[0]
    for release in (1, 2):
        objs.add(
            config, f"services/{broken_app}/config.json", _config(broken_app, rng, release), True
        )
    for app in apps[1:3]:
        objs.add(config, f"services/{app}/config.json", _config(app, rng, 2), True)
    objs.add(config, f"services/{broken_app}/config.json", _config(broken_app, rng, 3, True), True)
    changelog = "".join(
        f"2025-12-0{d} deployed services/{app}/config.json\n"
        for d, app in zip((1, 2, 3), (apps[1], apps[2], broken_app), strict=True)
    )
    objs.add(config, CHANGELOG, changelog, True)

    staging, prod = names["staging"], names["prod"]
    app = apps[2]
    major, minor, patch = _semver(rng)
    old, new = f"{major}.{minor}.{patch}", f"{major}.{minor + 1}.0"
    old_body = _build_body(app, old, rng)
    objs.add(staging, f"builds/{app}/{old}/app.txt", old_body, False)
    objs.add(staging, f"builds/{app}/{new}/app.txt", _build_body(app, new, rng), False)
    objs.add(prod, f"builds/{app}/{old}/app.txt", old_body, True)
    objs.add(
        prod, PROMOTIONS, f"promoted {app} {old} from {staging} etag {md5_hex(old_body)}\n", True
    )

    for ds in rng.sample(DATASETS, 2):
        rows = rng.randint(10_000, 900_000)
        manifest = manifest_body(ds, rows, "data-platform")
        objs.add(names["datasets"], f"datasets/{ds}/MANIFEST", manifest, False)

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
