"""Storage domain: seeded state, gold plans against the real routes, versioning, conditional
writes, idempotency keys, multipart uploads and the half-done composite, bodies on disk and
input validation, all in-process (no network, no service subprocess)."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import pytest

from undobench_gym.contract.specs import Boundary, WorkflowSpec
from undobench_gym.services.domains._service.context import CRASH_HEADER
from undobench_gym.services.domains.storage.blobs import multipart_etag
from undobench_gym.services.domains.storage.composite import CRASH_AFTER_PARTS
from undobench_gym.services.domains.storage.fixture import (
    bucket_for,
    build_fixture,
    current,
    versions_of,
)
from undobench_gym.services.domains.storage.service import DOMAIN
from undobench_gym.services.domains.storage.workflows import WORKFLOWS

from .service_harness import (
    MALFORMED_JSON,
    SEED,
    ServiceClient,
    assert_done,
    assert_gold_plan_completes,
    assert_key_ignored_unless_all,
    assert_key_replays,
    assert_malformed_json_rejected,
    assert_rejected,
    assert_reset_is_deterministic,
    assert_routes_declare_effects,
    assert_workflow_is_consistent,
    effect_count,
    failed_invariants,
    gold_plan_cases,
    params_for,
    retry_after_gold_plan,
    step_args,
)

pytestmark = pytest.mark.service(DOMAIN)

FX = build_fixture(SEED)
CONFIG = bucket_for(FX, "config")
STAGING = bucket_for(FX, "staging")
PROD = bucket_for(FX, "prod")
DATASETS = bucket_for(FX, "datasets")
ARTIFACTS = bucket_for(FX, "artifacts")


def md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def blob_files(svc: ServiceClient) -> set[str]:
    """The object bodies on disk, by content hash."""
    root = svc.ctx.data_dir / "objects"
    return {p.name for p in root.rglob("*") if p.is_file()}


# ---- seeded state ------------------------------------------------------------------


def test_seeded_state_is_deterministic(svc: ServiceClient) -> None:
    assert_reset_is_deterministic(svc)


def test_reset_restores_tables_and_disk(svc: ServiceClient) -> None:
    fresh = svc.reset(SEED)
    seeded_blobs = blob_files(svc)
    assert seeded_blobs == {hashlib.sha256(o["body"].encode()).hexdigest() for o in FX["objects"]}
    svc.ok("put_object", {"bucket": CONFIG, "key": "tmp/new.txt", "body": "scratch"})
    upload = svc.ok("create_multipart_upload", {"bucket": CONFIG, "key": "tmp/big.txt"})
    args = {"bucket": CONFIG, "upload_id": upload["upload_id"], "part_number": 1}
    svc.ok("upload_part", {**args, "body": "dangling part"})
    assert len(svc.state()["partial"]) == 1
    assert blob_files(svc) > seeded_blobs
    assert svc.reset(SEED) == fresh
    assert blob_files(svc) == seeded_blobs
    assert svc.commit_log() == [] and svc.state()["partial"] == []


def test_bodies_live_on_disk_by_content_hash(svc: ServiceClient) -> None:
    svc.ok("put_object", {"bucket": CONFIG, "key": "a/b/c.txt", "body": "hello disk"})
    digest = hashlib.sha256(b"hello disk").hexdigest()
    path = svc.ctx.data_dir / "objects" / digest[:2] / digest
    assert path.read_bytes() == b"hello disk"
    assert svc.ok("get_object", {"bucket": CONFIG, "key": "a/b/c.txt"})["body"] == "hello disk"
    path.unlink()
    state = svc.state()
    assert state["extra"]["missing_bodies"] == [digest]
    assert state["partial"] == [
        f"object {CONFIG}/a/b/c.txt version " + _vid(svc) + " has no body on disk"
    ]


def _vid(svc: ServiceClient) -> str:
    return str(svc.ok("head_object", {"bucket": CONFIG, "key": "a/b/c.txt"})["version_id"])


# ---- tool catalogue ----------------------------------------------------------------


def test_every_route_declares_its_effect(svc: ServiceClient) -> None:
    classes = assert_routes_declare_effects(svc)
    assert {c for c, _ in classes} <= {"additive", "set", "create_unique"}
    native = {name for name, tool in svc.tools.items() if tool.idempotency == "native"}
    assert native == {"copy_object", "complete_multipart_upload"}


def test_workflows_are_consistent(svc: ServiceClient) -> None:
    assert len(WORKFLOWS) == 8  # three of them the stress split's (cascades, a writer)
    splits = [w.split for w in WORKFLOWS]
    assert [splits.count(s) for s in ("dev", "val", "test", "stress")] == [2, 1, 2, 3]
    assert len({w.id for w in WORKFLOWS}) == 8
    boundaries = set()
    for wf in WORKFLOWS:
        assert_workflow_is_consistent(svc, wf, prefix="st-")
        for sc in wf.scenarios:
            boundaries.add(sc.boundary)
            assert sc.target.tool is not None, f"{wf.id}/{sc.id} never fires"
        text = wf.instruction.format(**params_for(wf)).lower()
        for word in ("fault", "inject", "retry", "retries", "benchmark", "test"):
            assert not re.search(rf"\b{word}", text), (wf.id, word)
    assert boundaries == set(Boundary)
    assert any(s.ambiguous for w in WORKFLOWS for s in w.scenarios)


# ---- gold plans --------------------------------------------------------------------


@gold_plan_cases(WORKFLOWS)
def test_gold_plan_leaves_invariants_true(svc: ServiceClient, wf: WorkflowSpec, seed: int) -> None:
    assert_gold_plan_completes(svc, wf, seed)


@pytest.mark.parametrize("wf_id", ["st-rollback-bad-config", "st-promote-build"])
def test_repeated_append_breaks_invariants(svc: ServiceClient, wf_id: str) -> None:
    wf = svc.workflow(wf_id)
    params, again = retry_after_gold_plan(svc, wf, "append_to_object")
    assert again.is_success, again.text
    assert failed_invariants(svc, wf, params) == [
        next(p.description for p in wf.invariants if "once" in p.description)
    ]
    rows = [r for r in svc.commit_log() if r["op"] == "object.append"]
    assert len(rows) == 2 and rows[0]["identity"] == rows[1]["identity"]


@pytest.mark.parametrize(
    ("wf_id", "tool"),
    [
        ("st-rollback-bad-config", "restore_object_version"),
        ("st-promote-build", "copy_object"),
        ("st-publish-build-artifact", "upload_object_multipart"),
        ("st-provision-team-bucket", "set_bucket_versioning"),
        ("st-provision-team-bucket", "put_object"),
    ],
)
def test_repeated_set_is_harmless(svc: ServiceClient, wf_id: str, tool: str) -> None:
    wf = svc.workflow(wf_id)
    params, again = retry_after_gold_plan(svc, wf, tool)
    assert again.is_success, again.text
    state = svc.state()
    assert failed_invariants(state, wf, params) == [] and state["partial"] == []


def test_wrong_rollbacks_are_caught(svc: ServiceClient) -> None:
    wf = svc.workflow("st-rollback-bad-config")
    params = params_for(wf)
    key = {"bucket": params["bucket"], "key": params["key"]}
    svc.ok("restore_object_version", {**key, "version_id": params["old_version"]})
    assert "the config is the good version again" in failed_invariants(svc, wf, params)
    svc.reset()
    # Deleting the bad version also brings the good one back, but destroys the evidence.
    svc.ok("delete_object", {**key, "version_id": params["bad_version"]})
    assert svc.ok("head_object", key)["etag"] == params["good_etag"]
    assert failed_invariants(svc, wf, params) == [
        "the bad version is kept in the history",
        "the changelog got the line exactly once",
    ]
    forbidden = wf.forbidden_effects[1]
    assert effect_count(svc.commit_log(), forbidden, params) == 1


# ---- conditional writes, buckets, versioning ---------------------------------------


def test_if_none_match_makes_a_put_create_once(svc: ServiceClient) -> None:
    wf = svc.workflow("st-register-dataset")
    params = params_for(wf)
    args = step_args(wf, "put_object", params)
    first = svc.call("put_object", args)
    assert first.status_code == 200 and first.json()["etag"] == params["etag"]
    again = svc.call("put_object", args)
    assert again.status_code == 412
    assert params["etag"] in again.json()["detail"]["message"]
    other = svc.call("put_object", {**args, "body": "overwrite"})
    assert other.status_code == 412
    assert svc.ops() == ["object.put"]
    assert failed_invariants(svc, wf, params) == []


def test_if_match_guards_an_overwrite(svc: ServiceClient) -> None:
    key = {"bucket": CONFIG, "key": "CHANGELOG.txt"}
    etag = current(FX, CONFIG, "CHANGELOG.txt")["etag"]
    stale = svc.call("put_object", {**key, "body": "x", "if_match": "0" * 32})
    assert stale.status_code == 412
    fresh = svc.ok("put_object", {**key, "body": "x", "if_match": etag})
    assert fresh["etag"] == md5("x")
    assert svc.call("put_object", {**key, "body": "y", "if_match": etag}).status_code == 412
    missing = {"bucket": CONFIG, "key": "nope.txt", "body": "x", "if_match": etag}
    assert svc.call("put_object", missing).status_code == 412


def test_create_bucket_is_unique(svc: ServiceClient) -> None:
    assert svc.call("create_bucket", {"name": "fresh-bucket.01"}).status_code == 201
    again = svc.call("create_bucket", {"name": "fresh-bucket.01"})
    assert again.status_code == 409 and again.json()["detail"]["type"] == "BucketAlreadyOwnedByYou"
    assert svc.call("create_bucket", {"name": CONFIG}).status_code == 409
    assert svc.ops() == ["bucket.create"]
    assert svc.ok("get_bucket", {"bucket": "fresh-bucket.01"})["versioning"] == "Unversioned"


def test_versioning_semantics(svc: ServiceClient) -> None:
    svc.ok("create_bucket", {"name": "team-docs"})
    key = {"bucket": "team-docs", "key": "notes/a.txt"}
    svc.ok("put_object", {**key, "body": "one"})
    svc.ok("put_object", {**key, "body": "two"})  # unversioned: replaces
    versions = svc.ok("list_object_versions", {"bucket": "team-docs"})["versions"]
    assert [(v["version_id"], v["etag"]) for v in versions] == [("null", md5("two"))]
    svc.ok("set_bucket_versioning", {"bucket": "team-docs", "status": "Enabled"})
    v3 = svc.ok("put_object", {**key, "body": "three"})["version_id"]
    v4 = svc.ok("put_object", {**key, "body": "three"})["version_id"]  # a repeat: new version
    assert len({v3, v4, "null"}) == 3
    versions = svc.ok("list_object_versions", {"bucket": "team-docs"})["versions"]
    assert [v["version_id"] for v in versions] == [v4, v3, "null"]
    assert [v["is_latest"] for v in versions] == [True, False, False]
    old = svc.ok("get_object", {**key, "version_id": "null"})
    assert old["body"] == "two" and old["is_latest"] is False

    marker = svc.ok("delete_object", key)
    assert marker["delete_marker"] is True
    assert svc.call("get_object", key).status_code == 404
    assert svc.ok("list_objects", {"bucket": "team-docs"})["objects"] == []
    marked = {**key, "version_id": marker["version_id"]}
    assert svc.call("get_object", marked).status_code == 405
    svc.ok("delete_object", marked)  # removing the marker brings the object back
    assert svc.ok("get_object", key)["version_id"] == v4
    svc.ok("delete_object", {**key, "version_id": v4})
    assert svc.ok("head_object", key)["version_id"] == v3
    assert svc.call("delete_object", {**key, "version_id": v4}).status_code == 404
    restored = svc.ok("restore_object_version", {**key, "version_id": "null"})
    assert restored["etag"] == md5("two") and restored["restored_from"] == "null"
    assert svc.ok("get_object", key)["body"] == "two"


def test_unversioned_delete_and_missing_objects(svc: ServiceClient) -> None:
    key = {"bucket": DATASETS, "key": "scratch.txt"}
    gone = svc.ok("delete_object", key)
    assert gone["deleted"] is False and svc.ops() == []
    svc.ok("put_object", {**key, "body": "tmp"})
    assert svc.ok("delete_object", key)["deleted"] is True
    assert svc.call("head_object", key).status_code == 404
    assert svc.call("get_object", {"bucket": "no-such-bucket", "key": "a"}).status_code == 404
    assert svc.ops() == ["object.put", "object.delete"]
    assert hashlib.sha256(b"tmp").hexdigest() not in blob_files(svc)


def test_append_creates_and_grows_a_log(svc: ServiceClient) -> None:
    key = {"bucket": PROD, "key": "logs/new.log"}
    svc.ok("append_to_object", {**key, "line": "first"})
    out = svc.ok("append_to_object", {**key, "line": "second"})
    assert out["etag"] == md5("first\nsecond\n")
    assert svc.ok("get_object", key)["body"] == "first\nsecond\n"


# ---- idempotency keys --------------------------------------------------------------


def test_copy_object_honours_idempotency_keys(svc: ServiceClient) -> None:
    wf = svc.workflow("st-promote-build")
    params = params_for(wf)
    args = step_args(wf, "copy_object", params)
    changed = {"key": "elsewhere.txt"}
    assert_key_replays(svc, "copy_object", args, "promote-1", changed=changed, status=200)
    assert svc.ops() == ["object.copy"]
    svc.ok("copy_object", args)  # without a key: copied again, one more version
    versions = svc.ok("list_object_versions", {"bucket": PROD, "prefix": params["key"]})
    assert [v["etag"] for v in versions["versions"]] == [params["etag"]] * 2


def test_keys_are_ignored_on_routes_without_native_keys(svc: ServiceClient) -> None:
    args = {"bucket": PROD, "key": "promotions.log", "line": "keyed"}
    assert_key_ignored_unless_all(svc, "append_to_object", args, status=200)
    assert svc.ops() == ["object.append"] * 3


def test_composite_replays_under_keys_in_all_mode(svc: ServiceClient) -> None:
    svc.configure(idempotency_mode="all")
    wf = svc.workflow("st-publish-build-artifact")
    args = step_args(wf, "upload_object_multipart", params_for(wf))
    assert_key_replays(svc, "upload_object_multipart", args, "pub-1", status=200)
    assert svc.ops().count("multipart.complete") == 1


# ---- multipart uploads -------------------------------------------------------------


def _open(svc: ServiceClient, key: str = "big/file.txt") -> dict[str, Any]:
    up = svc.ok("create_multipart_upload", {"bucket": ARTIFACTS, "key": key})
    return {"bucket": ARTIFACTS, "upload_id": up["upload_id"]}


def test_multipart_upload_step_by_step(svc: ServiceClient) -> None:
    up = _open(svc)
    p2 = svc.ok("upload_part", {**up, "part_number": 2, "body": "world"})
    p1 = svc.ok("upload_part", {**up, "part_number": 1, "body": "hello "})
    # An open upload is visible only in the upload listings, not as an object.
    assert svc.call("head_object", {"bucket": ARTIFACTS, "key": "big/file.txt"}).status_code == 404
    listed = svc.ok("list_multipart_uploads", {"bucket": ARTIFACTS})["uploads"]
    assert [(u["upload_id"], u["key"], u["parts"]) for u in listed] == [
        (up["upload_id"], "big/file.txt", 2)
    ]
    parts = svc.ok("list_parts", up)["parts"]
    assert [(p["part_number"], p["etag"]) for p in parts] == [(1, md5("hello ")), (2, md5("world"))]
    assert svc.ok("get_bucket", {"bucket": ARTIFACTS})["open_uploads"] == 1

    refs = [{"part_number": 1, "etag": p1["etag"]}, {"part_number": 2, "etag": p2["etag"]}]
    bad_etag = svc.call(
        "complete_multipart_upload", {**up, "parts": [refs[0], {**refs[1], "etag": "f" * 32}]}
    )
    assert bad_etag.status_code == 400 and bad_etag.json()["detail"]["type"] == "InvalidPart"
    bad_order = svc.call("complete_multipart_upload", {**up, "parts": refs[::-1]})
    assert bad_order.status_code == 400 and bad_order.json()["detail"]["type"] == "InvalidPartOrder"
    done = svc.ok("complete_multipart_upload", {**up, "parts": refs})
    assert done["etag"] == multipart_etag([md5("hello "), md5("world")]) and done["size"] == 11
    assert done["etag"].endswith("-2")
    assert (
        svc.ok("get_object", {"bucket": ARTIFACTS, "key": "big/file.txt"})["body"] == "hello world"
    )
    assert svc.ok("list_multipart_uploads", {"bucket": ARTIFACTS})["uploads"] == []
    again = svc.call("complete_multipart_upload", {**up, "parts": refs})
    assert again.status_code == 404 and again.json()["detail"]["type"] == "NoSuchUpload"
    # The parts' own bodies are gone from disk; the assembled body is there.
    files = blob_files(svc)
    assert hashlib.sha256(b"world").hexdigest() not in files
    assert hashlib.sha256(b"hello world").hexdigest() in files
    assert svc.state()["partial"] == []


def test_complete_honours_idempotency_keys(svc: ServiceClient) -> None:
    up = _open(svc)
    p1 = svc.ok("upload_part", {**up, "part_number": 1, "body": "solo"})
    args = {**up, "parts": [{"part_number": 1, "etag": p1["etag"]}]}
    assert_key_replays(svc, "complete_multipart_upload", args, "complete-1", status=200)
    assert svc.ops().count("multipart.complete") == 1


def test_abort_removes_parts_from_disk(svc: ServiceClient) -> None:
    up = _open(svc)
    svc.ok("upload_part", {**up, "part_number": 1, "body": "to be aborted"})
    digest = hashlib.sha256(b"to be aborted").hexdigest()
    assert digest in blob_files(svc)
    assert len(svc.state()["partial"]) == 1
    assert svc.ok("abort_multipart_upload", up)["aborted"] is True
    assert digest not in blob_files(svc)
    assert svc.state()["partial"] == []
    assert svc.call("abort_multipart_upload", up).status_code == 404
    assert svc.call("upload_part", {**up, "part_number": 1, "body": "x"}).status_code == 404
    assert svc.call("list_parts", up).status_code == 404


def test_reuploading_a_part_replaces_it(svc: ServiceClient) -> None:
    up = _open(svc)
    svc.ok("upload_part", {**up, "part_number": 1, "body": "draft"})
    svc.ok("upload_part", {**up, "part_number": 1, "body": "final"})
    parts = svc.ok("list_parts", up)["parts"]
    assert [(p["part_number"], p["etag"]) for p in parts] == [(1, md5("final"))]
    assert hashlib.sha256(b"draft").hexdigest() not in blob_files(svc)


@pytest.mark.usefixtures("crashable")
def test_crash_after_parts_leaves_an_open_upload_then_complete(svc: ServiceClient) -> None:
    wf = svc.workflow("st-publish-build-artifact")
    params = params_for(wf)
    args = step_args(wf, "upload_object_multipart", params)
    svc.call_until_crash("upload_object_multipart", args, CRASH_AFTER_PARTS)
    state = svc.state()
    assert len(state["partial"]) == 1
    assert f"for {params['bucket']}/{params['key']} is open with 3 part(s)" in state["partial"][0]
    assert (
        svc.call("head_object", {"bucket": params["bucket"], "key": params["key"]}).status_code
        == 404
    )
    assert "the bundle has the multipart ETag" in failed_invariants(state, wf, params)
    assert svc.ops() == ["multipart.create", *["multipart.part"] * 3]

    (upload,) = svc.ok("list_multipart_uploads", {"bucket": params["bucket"]})["uploads"]
    ref = {"bucket": params["bucket"], "upload_id": upload["upload_id"]}
    parts = svc.ok("list_parts", ref)["parts"]
    refs = [{"part_number": p["part_number"], "etag": p["etag"]} for p in parts]
    done = svc.ok("complete_multipart_upload", {**ref, "parts": refs})
    assert done["etag"] == params["etag"]
    assert_done(svc, wf, params)


@pytest.mark.usefixtures("crashable")
def test_crash_after_parts_then_abort_and_redo(svc: ServiceClient) -> None:
    wf = svc.workflow("st-publish-build-artifact")
    params = params_for(wf)
    args = step_args(wf, "upload_object_multipart", params)
    svc.call_until_crash("upload_object_multipart", args, CRASH_AFTER_PARTS)
    # Running the composite again completes a second upload but leaves the first open.
    svc.ok("upload_object_multipart", args)
    state = svc.state()
    assert len(state["partial"]) == 1 and failed_invariants(state, wf, params) == [
        "no multipart upload is left open"
    ]
    (upload,) = svc.ok("list_multipart_uploads", {"bucket": params["bucket"]})["uploads"]
    svc.ok("abort_multipart_upload", {"bucket": params["bucket"], "upload_id": upload["upload_id"]})
    state = svc.state()
    assert state["partial"] == [] and failed_invariants(state, wf, params) == []


def test_crash_point_is_ignored_when_disabled(svc: ServiceClient) -> None:
    svc.configure(crash_points=False)
    wf = svc.workflow("st-publish-build-artifact")
    params = params_for(wf)
    args = step_args(wf, "upload_object_multipart", params)
    svc.ok("upload_object_multipart", args, headers={CRASH_HEADER: CRASH_AFTER_PARTS})
    assert failed_invariants(svc, wf, params) == []


# ---- validation --------------------------------------------------------------------

OBJ = f"/v1/buckets/{CONFIG}/object"
TRAVERSAL_KEYS = [
    "../etc/passwd",
    "a/../../b",
    "/absolute/path",
    "a/./b",
    "a//b",
    "nul\x00byte",
    "back\\slash",
    "tab\there",
    "..",
    "",
    "k" * 1025,
]
BAD_BODIES: list[tuple[str, str, Any]] = [
    ("PUT", OBJ, {"key": "a.txt"}),
    ("PUT", OBJ, {"key": "a.txt", "body": 5}),
    ("PUT", OBJ, {"key": "a.txt", "body": "x", "extra": 1}),
    ("PUT", OBJ, {"key": "a.txt", "body": "x", "if_none_match": "abc"}),
    ("PUT", OBJ, {"key": "a.txt", "body": "x", "if_match": "not-an-etag"}),
    ("PUT", OBJ, {"key": "a.txt", "body": "x" * (64 * 1024 + 1)}),
    ("PUT", OBJ, {"key": "a.txt", "body": "é" * (32 * 1024 + 1)}),
    ("PUT", OBJ, {"key": "a.txt", "body": "x", "content_type": "../../x"}),
    ("PUT", OBJ, [1, 2]),
    ("PUT", OBJ, None),
    ("PUT", "/v1/buckets/no-such-bucket/object", {"key": "a.txt", "body": "x"}),
    ("PUT", "/v1/buckets/UPPER/object", {"key": "a.txt", "body": "x"}),
    ("PUT", "/v1/buckets/..%2F..%2Fetc/object", {"key": "a.txt", "body": "x"}),
    ("POST", "/v1/buckets", {"name": "ab"}),
    ("POST", "/v1/buckets", {"name": "Has-Upper"}),
    ("POST", "/v1/buckets", {"name": "a..b"}),
    ("POST", "/v1/buckets", {"name": "192.168.1.1"}),
    ("POST", "/v1/buckets", {"name": "xn--bucket"}),
    ("POST", "/v1/buckets", {"name": "bucket-s3alias"}),
    ("POST", "/v1/buckets", {"name": "-leading"}),
    ("POST", "/v1/buckets", {"name": "x" * 64}),
    ("POST", "/v1/buckets", {"name": "../../tmp"}),
    ("PUT", f"/v1/buckets/{CONFIG}/versioning", {"status": "enabled"}),
    ("PUT", f"/v1/buckets/{CONFIG}/versioning", {"status": "Unversioned"}),
    ("POST", f"{OBJ}/copy", {"key": "a", "source_bucket": STAGING, "source_key": "missing"}),
    ("POST", f"{OBJ}/copy", {"key": "a", "source_bucket": "Bad_Name", "source_key": "x"}),
    ("POST", f"{OBJ}/restore", {"key": "CHANGELOG.txt", "version_id": "v_nope"}),
    ("POST", f"{OBJ}/restore", {"key": "CHANGELOG.txt", "version_id": "../x"}),
    ("POST", f"{OBJ}/append", {"key": "log.txt", "line": "two\nlines"}),
    ("POST", f"{OBJ}/append", {"key": "log.txt", "line": ""}),
    ("POST", f"{OBJ}/append", {"key": "log.txt", "line": "x" * 1001}),
    ("POST", f"/v1/buckets/{CONFIG}/uploads", {"key": "../x"}),
    ("PUT", f"/v1/buckets/{CONFIG}/uploads/upl_nope/parts/1", {"body": "x"}),
    ("PUT", f"/v1/buckets/{CONFIG}/uploads/upl_nope/parts/0", {"body": "x"}),
    ("PUT", f"/v1/buckets/{CONFIG}/uploads/upl_nope/parts/101", {"body": "x"}),
    ("PUT", f"/v1/buckets/{CONFIG}/uploads/..%2Fx/parts/1", {"body": "x"}),
    ("POST", f"/v1/buckets/{CONFIG}/uploads/upl_nope/complete", {"parts": []}),
    (
        "POST",
        f"/v1/buckets/{CONFIG}/uploads/upl_nope/complete",
        {"parts": [{"part_number": 1, "etag": "0" * 32}]},
    ),
    (
        "POST",
        f"/v1/buckets/{CONFIG}/uploads/upl_nope/complete",
        {"parts": [{"part_number": "1", "etag": "0" * 32}]},
    ),
    ("DELETE", f"/v1/buckets/{CONFIG}/uploads/upl_nope", None),
    ("POST", f"/v1/buckets/{CONFIG}/multipart-objects", {"key": "a", "parts": []}),
    ("POST", f"/v1/buckets/{CONFIG}/multipart-objects", {"key": "a", "parts": ["x"] * 21}),
    ("POST", f"/v1/buckets/{CONFIG}/multipart-objects", {"key": "a", "parts": ["x" * 65000] * 17}),
    ("POST", f"/v1/buckets/{CONFIG}/multipart-objects", {"key": "../a", "parts": ["x"]}),
    ("POST", "/v1/buckets/no-such-bucket/multipart-objects", {"key": "a", "parts": ["x"]}),
]


@pytest.mark.parametrize(("method", "path", "body"), BAD_BODIES)
def test_bad_bodies_are_4xx(svc: ServiceClient, method: str, path: str, body: Any) -> None:
    before = blob_files(svc)
    assert_rejected(svc, method, path, json=body)
    assert svc.state()["partial"] == []
    assert blob_files(svc) == before


@pytest.mark.parametrize("key", TRAVERSAL_KEYS)
def test_path_traversal_keys_are_4xx(svc: ServiceClient, key: str) -> None:
    before = blob_files(svc)
    for tool, args in (
        ("put_object", {"bucket": CONFIG, "key": key, "body": "pwned"}),
        ("append_to_object", {"bucket": CONFIG, "key": key, "line": "pwned"}),
        ("create_multipart_upload", {"bucket": CONFIG, "key": key}),
        ("upload_object_multipart", {"bucket": CONFIG, "key": key, "parts": ["pwned"]}),
        (
            "copy_object",
            {"bucket": CONFIG, "key": key, "source_bucket": CONFIG, "source_key": "CHANGELOG.txt"},
        ),
        (
            "copy_object",
            {"bucket": CONFIG, "key": "ok.txt", "source_bucket": CONFIG, "source_key": key},
        ),
        ("get_object", {"bucket": CONFIG, "key": key}),
        ("head_object", {"bucket": CONFIG, "key": key}),
        ("delete_object", {"bucket": CONFIG, "key": key}),
    ):
        res = svc.call(tool, args)
        assert 400 <= res.status_code < 500, (tool, key, res.status_code)
    assert svc.commit_log() == []
    assert blob_files(svc) == before
    outside = [p for p in svc.ctx.data_dir.parent.rglob("*") if "pwned" in p.name]
    assert outside == []


def test_keys_with_slashes_and_unicode_are_fine(svc: ServiceClient) -> None:
    for key in ("a/b/c.txt", "dir/", "ünï/cödé.txt", "x.y-z_1"):
        svc.ok("put_object", {"bucket": CONFIG, "key": key, "body": key})
        assert svc.ok("get_object", {"bucket": CONFIG, "key": key})["body"] == key
    names = blob_files(svc)
    assert all(re.fullmatch(r"[0-9a-f]{64}", n) for n in names)


@pytest.mark.parametrize("raw", [*MALFORMED_JSON, b'{"key": "a", "body": "x"'])
def test_malformed_json_is_4xx(svc: ServiceClient, raw: bytes) -> None:
    routes = [
        ("PUT", OBJ),
        ("POST", f"{OBJ}/append"),
        ("POST", f"{OBJ}/copy"),
        ("POST", "/v1/buckets"),
        ("POST", f"/v1/buckets/{CONFIG}/uploads"),
        ("POST", f"/v1/buckets/{CONFIG}/multipart-objects"),
    ]
    assert_malformed_json_rejected(svc, routes, raw)


def test_bad_queries_are_4xx(svc: ServiceClient) -> None:
    base = f"/v1/buckets/{CONFIG}"
    assert svc.public.get(f"{base}/objects", params={"limit": 0}).status_code == 422
    assert svc.public.get(f"{base}/objects", params={"limit": "many"}).status_code == 422
    assert svc.public.get(f"{base}/object").status_code == 422
    assert (
        svc.public.get(
            f"{base}/object", params={"key": "CHANGELOG.txt", "version_id": "a b"}
        ).status_code
        == 422
    )
    assert svc.public.get(f"{base}/object", params={"key": "nope"}).status_code == 404
    assert svc.public.get("/v1/buckets/nope-nope").status_code == 404
    assert svc.public.get("/v1/buckets/" + "a" * 64).status_code == 422
    assert svc.public.get(f"{base}/uploads/upl_nope/parts").status_code == 404


def test_oversize_request_is_413(svc: ServiceClient) -> None:
    body = json.dumps({"key": "a", "parts": ["x" * 60000] * 20})
    res = svc.public.post(
        f"/v1/buckets/{CONFIG}/multipart-objects",
        content=body,
        headers={"content-type": "application/json"},
    )
    assert res.status_code == 413


def test_suspended_versioning_replaces_the_null_version(svc: ServiceClient) -> None:
    key = {"bucket": CONFIG, "key": "CHANGELOG.txt"}
    kept = svc.ok("head_object", key)["version_id"]
    svc.ok("set_bucket_versioning", {"bucket": CONFIG, "status": "Suspended"})
    svc.ok("put_object", {**key, "body": "a"})
    svc.ok("put_object", {**key, "body": "b"})
    versions = svc.ok("list_object_versions", {"bucket": CONFIG, "prefix": "CHANGELOG"})
    history = [v["version_id"] for v in reversed(versions_of(FX, CONFIG, "CHANGELOG.txt"))]
    assert history[0] == kept
    assert [(v["version_id"], v["is_latest"]) for v in versions["versions"]] == [
        ("null", True),
        *[(vid, False) for vid in history],
    ]
    assert svc.ok("get_object", key)["body"] == "b"
    assert hashlib.sha256(b"a").hexdigest() not in blob_files(svc)
    svc.ok("delete_object", key)  # a delete marker takes the null version's place
    assert svc.call("head_object", key).status_code == 404
    assert (
        svc.ok("head_object", {**key, "version_id": kept})["etag"]
        == current(FX, CONFIG, "CHANGELOG.txt")["etag"]
    )
