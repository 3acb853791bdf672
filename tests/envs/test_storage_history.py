"""Storage fixture history: for several seeds, the seeded history agrees with the current
state (versions, ETags, the changelog and promotions log against the pushes and copies
they record), the service seeds exactly that, and task parameters and read-backs can tell
an episode's effects from the history."""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from typing import Any

import pytest

from undobench_gym.services.domains.storage.fixture import (
    BROKEN_TIMEOUT_MS,
    CHANGELOG,
    HISTORY_INCIDENTS_BELOW,
    PROMOTIONS,
    VERSIONING,
    broken_config,
    bucket_for,
    build_fixture,
    current,
    keys_in,
    multipart_etag,
    versions_of,
)
from undobench_gym.services.domains.storage.service import DOMAIN
from undobench_gym.services.domains.storage.workflows import WORKFLOWS

from .service_harness import GOLD_SEEDS, ServiceClient
from .workflow_harness import (
    CLOCK,
    assert_new_rows_follow_history,
    tables_around_gold_plan,
    where,
)

pytestmark = pytest.mark.service(DOMAIN)

SEEDS = (0, 1, 3, 7, 11, 42, 12345)
DEPLOY = re.compile(r"^(\d{4}-\d\d-\d\d) deployed (\S+) release (\S+) version (\S+)$")
ROLLBACK = re.compile(r"^(\d{4}-\d\d-\d\d) INC-(\d+) rolled back (\S+) to version (\S+)$")
PROMOTED = re.compile(r"^promoted (\S+) (\S+) from (\S+) etag ([0-9a-f]{32})$")
PART = re.compile(r"app=[^;]+;version=[^;]+;part=\d/3;payload=[0-9a-f]{48};")


def md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def _rows(fx: dict[str, Any], bucket: str) -> list[dict[str, Any]]:
    return where(fx["objects"], bucket=bucket)


def _lines(body: str) -> list[str]:
    return body.splitlines()


# ---- the fixture agrees with itself --------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_versions_follow_the_bucket_rules(seed: int) -> None:
    fx = build_fixture(seed)
    seqs = [o["seq"] for o in fx["objects"]]
    assert seqs == sorted(set(seqs))
    stamps = [o["last_modified"] for o in fx["objects"]]
    assert stamps == sorted(stamps) and stamps[-1] < CLOCK
    for b in fx["buckets"]:
        assert b["versioning"] == VERSIONING[b["role"]]
        assert b["created"] < stamps[0]
        by_key: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for o in _rows(fx, b["name"]):
            by_key[o["key"]].append(o)
        for key, versions in by_key.items():
            latest = [v for v in versions if v["is_latest"]]
            assert latest == [versions[-1]], (b["name"], key)
            if b["versioning"] == "Unversioned":
                assert [v["version_id"] for v in versions] == ["null"], (b["name"], key)
            else:
                ids = [v["version_id"] for v in versions]
                assert len(set(ids)) == len(ids) and "null" not in ids
    ids = [o["version_id"] for o in fx["objects"] if o["version_id"] != "null"]
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize("seed", SEEDS)
def test_bodies_match_their_etags_and_sizes(seed: int) -> None:
    fx = build_fixture(seed)
    bundles = 0
    for o in fx["objects"]:
        body = o["body"]
        assert o["size"] == len(body.encode())
        assert o["blob"] == hashlib.sha256(body.encode()).hexdigest()
        if o["key"].endswith("/bundle.txt"):
            # Published as a three-part multipart upload, like the publish task does it.
            parts = PART.findall(body)
            assert len(parts) == 3 and "".join(parts) == body
            assert o["etag"] == multipart_etag(parts)
            bundles += 1
        else:
            assert o["etag"] == md5(body)
        if o["key"].endswith(".json"):
            assert o["content_type"] == "application/json"
    assert bundles == 4


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("role", "log"), [("config", CHANGELOG), ("prod", PROMOTIONS)])
def test_logs_grow_by_one_appended_line_per_version(seed: int, role: str, log: str) -> None:
    fx = build_fixture(seed)
    versions = versions_of(fx, bucket_for(fx, role), log)
    assert len(versions) >= 2
    for n, v in enumerate(versions, start=1):
        lines = _lines(v["body"])
        assert len(lines) == n and v["body"].endswith("\n")
        if n > 1:
            assert v["body"] == versions[n - 2]["body"] + lines[-1] + "\n"


@pytest.mark.parametrize("seed", SEEDS)
def test_changelog_records_every_config_push_and_rollback(seed: int) -> None:
    fx = build_fixture(seed)
    bucket = bucket_for(fx, "config")
    rows = _rows(fx, bucket)
    pushes = [o for o in rows if o["key"] != CHANGELOG]
    logs = [o for o in rows if o["key"] == CHANGELOG]
    lines = _lines(current(fx, bucket, CHANGELOG)["body"])
    # One line per config version, in order, each logged right after the version it names.
    assert len(lines) == len(pushes) == len(logs)
    rollbacks = 0
    for line, pushed, logged in zip(lines, pushes, logs, strict=True):
        assert logged["seq"] > pushed["seq"]
        assert _lines(logged["body"])[-1] == line
        date = pushed["last_modified"][:10]
        if deploy := DEPLOY.match(line):
            assert deploy.groups() == (
                date,
                pushed["key"],
                json.loads(pushed["body"])["release"],
                pushed["version_id"],
            )
            continue
        rollback = ROLLBACK.match(line)
        assert rollback is not None, line
        rollbacks += 1
        day, incident, key, restored_from = rollback.groups()
        assert (day, key) == (date, pushed["key"])
        assert int(incident) < HISTORY_INCIDENTS_BELOW
        (source,) = [v for v in versions_of(fx, bucket, key) if v["version_id"] == restored_from]
        # A restore copies the earlier version's bytes on top.
        assert source["seq"] < pushed["seq"] and source["body"] == pushed["body"]
        assert source["etag"] == pushed["etag"] and source["blob"] == pushed["blob"]
    assert rollbacks == 1


@pytest.mark.parametrize("seed", SEEDS)
def test_one_bad_config_push_is_live(seed: int) -> None:
    fx = build_fixture(seed)
    bucket = bucket_for(fx, "config")
    live = {
        k: json.loads(current(fx, bucket, k)["body"])["timeout_ms"]
        for k in keys_in(fx, bucket)
        if k != CHANGELOG
    }
    assert list(live.values()).count(BROKEN_TIMEOUT_MS) == 1
    key = broken_config(fx)
    old, good, bad = versions_of(fx, bucket, key)
    assert json.loads(bad["body"])["timeout_ms"] == BROKEN_TIMEOUT_MS
    assert json.loads(good["body"])["timeout_ms"] != BROKEN_TIMEOUT_MS
    assert len({old["etag"], good["etag"], bad["etag"]}) == 3


@pytest.mark.parametrize("seed", SEEDS)
def test_promotions_log_matches_the_builds_in_prod(seed: int) -> None:
    fx = build_fixture(seed)
    staging, prod = bucket_for(fx, "staging"), bucket_for(fx, "prod")
    builds = {
        o["key"]: o for o in _rows(fx, prod) if o["key"].startswith("builds/") and o["is_latest"]
    }
    logged = {}
    for line in _lines(current(fx, prod, PROMOTIONS)["body"]):
        match = PROMOTED.match(line)
        assert match is not None, line
        app, version, source, etag = match.groups()
        assert source == staging
        key = f"builds/{app}/{version}/app.txt"
        assert key not in logged
        logged[key] = etag
    assert set(logged) == set(builds) and len(builds) == 2
    for key, etag in logged.items():
        assert builds[key]["etag"] == etag
        if key in keys_in(fx, staging):  # a build still in staging is the same bytes
            assert current(fx, staging, key)["etag"] == etag
    # Staging holds one build that was never promoted: the one the promote task moves.
    assert len([k for k in keys_in(fx, staging) if k not in builds]) == 1


# ---- task parameters stay right with the history --------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_task_parameters_name_what_the_history_lacks(seed: int) -> None:
    fx = build_fixture(seed)
    wf = {w.id: w for w in WORKFLOWS}
    pub = wf["st-publish-build-artifact"].draw_params(seed, fx)
    assert pub["key"] not in keys_in(fx, pub["bucket"])
    assert pub["etag"] not in {o["etag"] for o in fx["objects"]}

    rb = wf["st-rollback-bad-config"].draw_params(seed, fx)
    assert rb["key"] == broken_config(fx)
    changelog = current(fx, rb["bucket"], CHANGELOG)["body"]
    assert rb["line"] not in changelog and f"INC-{rb['incident']} " not in changelog
    assert rb["incident"] >= HISTORY_INCIDENTS_BELOW
    assert rb["good_etag"] != current(fx, rb["bucket"], rb["key"])["etag"]

    pr = wf["st-promote-build"].draw_params(seed, fx)
    assert pr["key"] not in keys_in(fx, pr["prod"])
    assert pr["line"] not in current(fx, pr["prod"], PROMOTIONS)["body"]

    ds = wf["st-register-dataset"].draw_params(seed, fx)
    assert not [k for k in keys_in(fx, ds["bucket"]) if k.startswith(ds["prefix"])]

    pv = wf["st-provision-team-bucket"].draw_params(seed, fx)
    assert pv["bucket"] not in {b["name"] for b in fx["buckets"]}


# ---- the service seeds that history, and an episode's rows stand apart from it ----------


@pytest.mark.parametrize("seed", (3, 11))
def test_service_seeds_the_history(svc: ServiceClient, seed: int) -> None:
    svc.reset(seed)
    fx = build_fixture(seed)
    state = svc.state()
    rows = state["tables"]["st_objects"]
    assert rows == [{k: v for k, v in o.items() if k != "body"} for o in fx["objects"]]
    assert state["partial"] == [] and svc.commit_log() == []
    for o in fx["objects"]:
        got = svc.ok(
            "get_object", {"bucket": o["bucket"], "key": o["key"], "version_id": o["version_id"]}
        )
        assert got["body"] == o["body"] and got["etag"] == o["etag"]


@pytest.mark.parametrize("seed", GOLD_SEEDS)
@pytest.mark.parametrize("wf", WORKFLOWS, ids=lambda w: w.id)
def test_episode_rows_are_newer_than_all_history(svc: ServiceClient, wf: Any, seed: int) -> None:
    """What a read-back sees: every row the gold plan wrote is dated at or after the
    epoch, every seeded row before it, so the new effect cannot be mistaken for history."""
    before, after = tables_around_gold_plan(svc, wf, seed)
    added = assert_new_rows_follow_history(before, after, {"st_objects": ("seq", "last_modified")})
    assert added["st_objects"], wf.id
