"""Task parameters of the storage workflows, drawn from the seed and the fixture.

Every expected ETag and size is computed here from the exact bodies, so the oracles check
values: a line appended twice or a part in the wrong order changes the ETag.
"""

from __future__ import annotations

from typing import Any

from undobench_gym.contract.seeding import rng_for
from undobench_gym.services.domains.storage.fixture import (
    CHANGELOG,
    DATASETS,
    HISTORY_INCIDENTS_BELOW,
    PROMOTIONS,
    appended,
    broken_config,
    bucket_for,
    bundle_parts,
    current,
    keys_in,
    manifest_body,
    md5_hex,
    multipart_etag,
    project_of,
    promotion_line,
    rollback_line,
    versions_of,
)

TEAMS = ["analytics", "growth", "payments", "search", "mobile", "security", "finance"]
#: The date of the episode: the virtual clock starts at 2026-01-01T00:00:00Z.
TODAY = "2026-01-01"


def publish_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("st-publish-build-artifact", seed)
    bucket = bucket_for(fx, "artifacts")
    keys = keys_in(fx, bucket)
    app = rng.choice(sorted({k.split("/")[1] for k in keys}))
    major = rng.randint(5, 9)
    version = f"{major}.{rng.randint(0, 9)}.0"
    key = f"builds/{app}/{version}/bundle.txt"
    assert key not in keys
    parts = bundle_parts(app, version, rng)
    return {
        "ticket": rng.randint(1000, 9999),
        "bucket": bucket,
        "app": app,
        "version": version,
        "key": key,
        "parts": parts,
        "part1": parts[0],
        "part2": parts[1],
        "part3": parts[2],
        "etag": multipart_etag(parts),
        "size": sum(len(p.encode()) for p in parts),
    }


def rollback_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("st-rollback-bad-config", seed)
    bucket = bucket_for(fx, "config")
    key = broken_config(fx)
    old, good, bad = versions_of(fx, bucket, key)
    incident = rng.randint(HISTORY_INCIDENTS_BELOW, 999)
    line = rollback_line(TODAY, incident, key, good["version_id"])
    changelog = appended(current(fx, bucket, CHANGELOG)["body"], line)
    return {
        "incident": incident,
        "bucket": bucket,
        "app": key.split("/")[1],
        "key": key,
        "old_version": old["version_id"],
        "good_version": good["version_id"],
        "good_etag": good["etag"],
        "bad_version": bad["version_id"],
        "changelog": CHANGELOG,
        "line": line,
        "changelog_etag": md5_hex(changelog),
    }


def promote_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("st-promote-build", seed)
    staging, prod = bucket_for(fx, "staging"), bucket_for(fx, "prod")
    in_prod = set(keys_in(fx, prod))
    key = next(k for k in keys_in(fx, staging) if k not in in_prod)
    source = current(fx, staging, key)
    _, app, version, _ = key.split("/")
    line = promotion_line(app, version, staging, source["etag"])
    log = appended(current(fx, prod, PROMOTIONS)["body"], line)
    return {
        "change": rng.randint(10000, 99999),
        "staging": staging,
        "prod": prod,
        "app": app,
        "version": version,
        "key": key,
        "etag": source["etag"],
        "log": PROMOTIONS,
        "line": line,
        "log_etag": md5_hex(log),
    }


def dataset_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("st-register-dataset", seed)
    bucket = bucket_for(fx, "datasets")
    taken = {k.split("/")[1] for k in keys_in(fx, bucket)}
    base = rng.choice([d for d in DATASETS if d not in taken])
    dataset = f"{base}-{rng.choice(['eu', 'us', 'apac'])}"
    body = manifest_body(dataset, rng.randint(10_000, 900_000), rng.choice(TEAMS))
    return {
        "ticket": rng.randint(1000, 9999),
        "bucket": bucket,
        "dataset": dataset,
        "key": f"datasets/{dataset}/MANIFEST",
        "prefix": f"datasets/{dataset}/",
        "body": body,
        "etag": md5_hex(body),
        "size": len(body.encode()),
    }


def provision_params(seed: int, fx: dict[str, Any]) -> dict[str, Any]:
    rng = rng_for("st-provision-team-bucket", seed)
    team = rng.choice(TEAMS)
    project = project_of(fx)
    bucket = f"{project}-{team}-{rng.choice(['reports', 'exports', 'backups'])}"
    assert bucket not in {b["name"] for b in fx["buckets"]}
    readme = (
        f"Bucket owned by team {team} of {project}. Contact {team}@{project}.example.com. "
        f"Retention {rng.choice([30, 90, 180, 365])} days."
    )
    return {
        "ticket": rng.randint(1000, 9999),
        "team": team,
        "bucket": bucket,
        "readme": readme,
        "etag": md5_hex(readme),
    }
