"""Storage domain: seeded state, gold plans against the real routes, versioning, conditional
writes, idempotency keys, multipart uploads and the half-done composite, bodies on disk and
input validation, all in-process (no network, no service subprocess)."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from httpx import Response
from undobench_gym.envs._service.app import create_apps
from undobench_gym.envs._service.context import ServiceContext
from undobench_gym.envs.storage.blobs import multipart_etag
from undobench_gym.envs.storage.composite import CRASH_AFTER_PARTS
from undobench_gym.envs.storage.fixture import bucket_for, build_fixture, current
from undobench_gym.envs.storage.service import DOMAIN
from undobench_gym.envs.storage.workflows import WORKFLOWS

from undobench_gym.specs import Boundary, EffectExpectation, StatePredicate, WorkflowSpec, fill

SEED = 3
FX = build_fixture(SEED)
CONFIG = bucket_for(FX, "config")
STAGING = bucket_for(FX, "staging")
PROD = bucket_for(FX, "prod")
DATASETS = bucket_for(FX, "datasets")
ARTIFACTS = bucket_for(FX, "artifacts")
CRASH = {"x-undobench-crash-point": CRASH_AFTER_PARTS}


def md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


class Service:
    """The public and admin apps of one storage service, plus a tool-name router."""

    def __init__(self, ctx: ServiceContext, public: FastAPI, admin: FastAPI) -> None:
        self.ctx = ctx
        self.app = public
        self.public = TestClient(public)
        self.admin = TestClient(admin)
        self.routes = routes_by_tool(public)

    def reset(self, seed: int = SEED) -> str:
        res = self.admin.post("/admin/reset", json={"seed": seed})
        assert res.status_code == 200, res.text
        return str(res.json()["hash"])

    def state(self) -> dict[str, Any]:
        res = self.admin.get("/admin/state")
        assert res.status_code == 200, res.text
        return dict(res.json())

    def commit_log(self) -> list[dict[str, Any]]:
        return list(self.admin.get("/admin/commit-log").json())

    def ops(self) -> list[str]:
        return [r["op"] for r in self.commit_log()]

    def call(self, tool: str, args: dict[str, Any] | None = None, **kw: Any) -> Response:
        """Call a tool the way the env does: path params in the URL, the rest in the query
        (GET, DELETE) or the JSON body."""
        method, path = self.routes[tool]
        rest = dict(args or {})
        for name in re.findall(r"\{(\w+)\}", path):
            path = path.replace(f"{{{name}}}", str(rest.pop(name)))
        if method in ("get", "delete"):
            return self.public.request(method.upper(), path, params=rest, **kw)
        return self.public.request(method.upper(), path, json=rest, **kw)

    def ok(self, tool: str, args: dict[str, Any] | None = None, **kw: Any) -> Any:
        res = self.call(tool, args, **kw)
        assert res.status_code < 300, (tool, res.status_code, res.text)
        return res.json()

    def blob_files(self) -> set[str]:
        root = self.ctx.data_dir / "objects"
        return {p.name for p in root.rglob("*") if p.is_file()}


def routes_by_tool(app: FastAPI) -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    for path, ops in app.openapi()["paths"].items():
        for method, op in ops.items():
            out[op["operationId"]] = (method, path)
    return out


@pytest.fixture
def svc(tmp_path: Path) -> Iterator[Service]:
    ctx = ServiceContext.open(DOMAIN, tmp_path)
    public, admin = create_apps(DOMAIN, ctx)
    service = Service(ctx, public, admin)
    service.reset()
    yield service
    ctx.engine.dispose()


class Crashed(Exception):
    """Stands in for the process exit of an armed crash point."""


@pytest.fixture
def crashable(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_exit(code: int) -> None:
        raise Crashed(code)

    monkeypatch.setattr(os, "_exit", fake_exit)


# ---- evaluation helpers ------------------------------------------------------------


def resolve(value: Any, responses: list[Any]) -> Any:
    if isinstance(value, str) and (m := re.fullmatch(r"@(\d+)\.([\w.]+)", value)):
        out = responses[int(m.group(1))]
        for part in m.group(2).split("."):
            out = out[int(part)] if isinstance(out, list) else out[part]
        return out
    if isinstance(value, dict):
        return {k: resolve(v, responses) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, responses) for v in value]
    return value


def run_gold(svc: Service, wf: WorkflowSpec, params: dict[str, Any]) -> list[Any]:
    responses: list[Any] = []
    for step in wf.gold_plan:
        responses.append(svc.ok(step.tool, resolve(fill(step.arguments, params), responses)))
    return responses


def evaluate(pred: StatePredicate, params: dict[str, Any], tables: dict[str, Any]) -> bool:
    where = fill(pred.where, params)
    rows = [r for r in tables[pred.table] if all(r.get(k) == v for k, v in where.items())]
    expected = fill(pred.value, params)
    if pred.op == "count":
        return len(rows) == expected
    if len(rows) != 1 or pred.field is None:
        return False
    actual = rows[0][pred.field]
    return bool(actual == expected) if pred.op == "eq" else bool(actual != expected)


def failing(wf: WorkflowSpec, params: dict[str, Any], state: dict[str, Any]) -> list[str]:
    return [p.description for p in wf.invariants if not evaluate(p, params, state["tables"])]


def effect_count(
    log: list[dict[str, Any]], effect: EffectExpectation, params: dict[str, Any]
) -> int:
    identity = fill(effect.identity, params)
    return sum(1 for r in log if r["op"] == effect.op and json.loads(r["identity"]) == identity)


def params_for(wf: WorkflowSpec, seed: int = SEED) -> dict[str, Any]:
    return wf.draw_params(seed, build_fixture(seed))


def workflow(wf_id: str) -> WorkflowSpec:
    return next(w for w in WORKFLOWS if w.id == wf_id)


def gold_args(wf: WorkflowSpec, tool: str, params: dict[str, Any]) -> dict[str, Any]:
    step = next(s for s in wf.gold_plan if s.tool == tool)
    return dict(fill(step.arguments, params))


# ---- seeded state ------------------------------------------------------------------


def test_seeded_state_is_deterministic(svc: Service) -> None:
    first = svc.reset(SEED)
    assert svc.reset(SEED) == first
    assert svc.state()["hash"] == first
    assert svc.reset(SEED + 1) != first
    assert build_fixture(SEED) == build_fixture(SEED)
    assert build_fixture(SEED) != build_fixture(SEED + 1)


def test_reset_restores_tables_and_disk(svc: Service) -> None:
    fresh = svc.reset(SEED)
    seeded_blobs = svc.blob_files()
    assert seeded_blobs == {hashlib.sha256(o["body"].encode()).hexdigest() for o in FX["objects"]}
    svc.ok("put_object", {"bucket": CONFIG, "key": "tmp/new.txt", "body": "scratch"})
    upload = svc.ok("create_multipart_upload", {"bucket": CONFIG, "key": "tmp/big.txt"})
    args = {"bucket": CONFIG, "upload_id": upload["upload_id"], "part_number": 1}
    svc.ok("upload_part", {**args, "body": "dangling part"})
    assert len(svc.state()["partial"]) == 1
    assert svc.blob_files() > seeded_blobs
    assert svc.reset(SEED) == fresh
    assert svc.blob_files() == seeded_blobs
    assert svc.commit_log() == [] and svc.state()["partial"] == []


def test_bodies_live_on_disk_by_content_hash(svc: Service) -> None:
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


def _vid(svc: Service) -> str:
    return str(svc.ok("head_object", {"bucket": CONFIG, "key": "a/b/c.txt"})["version_id"])


# ---- tool catalogue ----------------------------------------------------------------


def test_every_route_declares_its_effect(svc: Service) -> None:
    native = set()
    for path, ops in svc.app.openapi()["paths"].items():
        for method, op in ops.items():
            meta = op["x-undobench"]
            assert op["operationId"] and op.get("description"), path
            if method == "get":
                assert meta == {"read_only": True}, path
            else:
                assert meta["effect_class"] in {"additive", "set", "create_unique"}, path
                assert meta["op"] and meta["identity"], path
                headers = [p["name"] for p in op.get("parameters", []) if p["in"] == "header"]
                assert (meta["idempotency"] == "native") == (headers == ["Idempotency-Key"])
                if meta["idempotency"] == "native":
                    native.add(op["operationId"])
    assert native == {"copy_object", "complete_multipart_upload"}


def test_workflows_are_consistent(svc: Service) -> None:
    assert len(WORKFLOWS) == 5
    splits = [w.split for w in WORKFLOWS]
    assert (splits.count("dev"), splits.count("val"), splits.count("test")) == (2, 1, 2)
    assert len({w.id for w in WORKFLOWS}) == 5 and all(w.id.startswith("st-") for w in WORKFLOWS)
    boundaries = set()
    for wf in WORKFLOWS:
        assert wf.domain == "storage"
        gold_tools = [s.tool for s in wf.gold_plan]
        for tool in [*wf.tools, *gold_tools]:
            assert tool in svc.routes, f"{wf.id}: unknown tool {tool}"
        assert set(gold_tools) <= set(wf.tools)
        for sc in wf.scenarios:
            boundaries.add(sc.boundary)
            assert sc.target.tool in gold_tools, f"{wf.id}/{sc.id} never fires"
        if wf.split == "test":
            assert any(s.boundary is Boundary.POST_MUTATION_PRE_ACK for s in wf.scenarios)
        text = wf.instruction.format(**params_for(wf)).lower()
        for word in ("fault", "inject", "retry", "retries", "benchmark", "test"):
            assert not re.search(rf"\b{word}", text), (wf.id, word)
    assert boundaries == set(Boundary)
    assert any(s.ambiguous for w in WORKFLOWS for s in w.scenarios)


# ---- gold plans --------------------------------------------------------------------


@pytest.mark.parametrize("seed", [SEED, 11, 12345])
@pytest.mark.parametrize("wf", WORKFLOWS, ids=lambda w: w.id)
def test_gold_plan_leaves_invariants_true(svc: Service, wf: WorkflowSpec, seed: int) -> None:
    svc.reset(seed)
    params = params_for(wf, seed)
    assert failing(wf, params, svc.state())  # the task is not already done
    run_gold(svc, wf, params)
    state = svc.state()
    assert failing(wf, params, state) == []
    assert state["partial"] == []
    log = svc.commit_log()
    for effect in wf.required_effects:
        assert effect_count(log, effect, params) == 1, effect
    for effect in wf.forbidden_effects:
        assert effect_count(log, effect, params) == 0, effect


@pytest.mark.parametrize("wf_id", ["st-rollback-bad-config", "st-promote-build"])
def test_repeated_append_breaks_invariants(svc: Service, wf_id: str) -> None:
    wf = workflow(wf_id)
    params = params_for(wf)
    run_gold(svc, wf, params)
    svc.ok("append_to_object", gold_args(wf, "append_to_object", params))
    assert failing(wf, params, svc.state()) == [
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
def test_repeated_set_is_harmless(svc: Service, wf_id: str, tool: str) -> None:
    wf = workflow(wf_id)
    params = params_for(wf)
    run_gold(svc, wf, params)
    svc.ok(tool, gold_args(wf, tool, params))
    state = svc.state()
    assert failing(wf, params, state) == [] and state["partial"] == []


def test_wrong_rollbacks_are_caught(svc: Service) -> None:
    wf = workflow("st-rollback-bad-config")
    params = params_for(wf)
    key = {"bucket": params["bucket"], "key": params["key"]}
    svc.ok("restore_object_version", {**key, "version_id": params["old_version"]})
    assert "the config is the good version again" in failing(wf, params, svc.state())
    svc.reset()
    # Deleting the bad version also brings the good one back, but destroys the evidence.
    svc.ok("delete_object", {**key, "version_id": params["bad_version"]})
    assert svc.ok("head_object", key)["etag"] == params["good_etag"]
    assert failing(wf, params, svc.state()) == [
        "the bad version is kept in the history",
        "the changelog got the line exactly once",
    ]
    forbidden = wf.forbidden_effects[1]
    assert effect_count(svc.commit_log(), forbidden, params) == 1


# ---- conditional writes, buckets, versioning ---------------------------------------


def test_if_none_match_makes_a_put_create_once(svc: Service) -> None:
    wf = workflow("st-register-dataset")
    params = params_for(wf)
    args = gold_args(wf, "put_object", params)
    first = svc.call("put_object", args)
    assert first.status_code == 200 and first.json()["etag"] == params["etag"]
    again = svc.call("put_object", args)
    assert again.status_code == 412
    assert params["etag"] in again.json()["detail"]["message"]
    other = svc.call("put_object", {**args, "body": "overwrite"})
    assert other.status_code == 412
    assert svc.ops() == ["object.put"]
    assert failing(wf, params, svc.state()) == []


def test_if_match_guards_an_overwrite(svc: Service) -> None:
    key = {"bucket": CONFIG, "key": "CHANGELOG.txt"}
    etag = current(FX, CONFIG, "CHANGELOG.txt")["etag"]
    stale = svc.call("put_object", {**key, "body": "x", "if_match": "0" * 32})
    assert stale.status_code == 412
    fresh = svc.ok("put_object", {**key, "body": "x", "if_match": etag})
    assert fresh["etag"] == md5("x")
    assert svc.call("put_object", {**key, "body": "y", "if_match": etag}).status_code == 412
    missing = {"bucket": CONFIG, "key": "nope.txt", "body": "x", "if_match": etag}
    assert svc.call("put_object", missing).status_code == 412


def test_create_bucket_is_unique(svc: Service) -> None:
    assert svc.call("create_bucket", {"name": "fresh-bucket.01"}).status_code == 201
    again = svc.call("create_bucket", {"name": "fresh-bucket.01"})
    assert again.status_code == 409 and again.json()["detail"]["type"] == "BucketAlreadyOwnedByYou"
    assert svc.call("create_bucket", {"name": CONFIG}).status_code == 409
    assert svc.ops() == ["bucket.create"]
    assert svc.ok("get_bucket", {"bucket": "fresh-bucket.01"})["versioning"] == "Unversioned"


def test_versioning_semantics(svc: Service) -> None:
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


def test_unversioned_delete_and_missing_objects(svc: Service) -> None:
    key = {"bucket": DATASETS, "key": "scratch.txt"}
    gone = svc.ok("delete_object", key)
    assert gone["deleted"] is False and svc.ops() == []
    svc.ok("put_object", {**key, "body": "tmp"})
    assert svc.ok("delete_object", key)["deleted"] is True
    assert svc.call("head_object", key).status_code == 404
    assert svc.call("get_object", {"bucket": "no-such-bucket", "key": "a"}).status_code == 404
    assert svc.ops() == ["object.put", "object.delete"]
    assert hashlib.sha256(b"tmp").hexdigest() not in svc.blob_files()


def test_append_creates_and_grows_a_log(svc: Service) -> None:
    key = {"bucket": PROD, "key": "logs/new.log"}
    svc.ok("append_to_object", {**key, "line": "first"})
    out = svc.ok("append_to_object", {**key, "line": "second"})
    assert out["etag"] == md5("first\nsecond\n")
    assert svc.ok("get_object", key)["body"] == "first\nsecond\n"


# ---- idempotency keys --------------------------------------------------------------


def test_copy_object_honours_idempotency_keys(svc: Service) -> None:
    wf = workflow("st-promote-build")
    params = params_for(wf)
    args = gold_args(wf, "copy_object", params)
    key = {"Idempotency-Key": "promote-1"}
    first, again = (
        svc.call("copy_object", args, headers=key),
        svc.call("copy_object", args, headers=key),
    )
    assert first.status_code == again.status_code == 200
    assert again.json() == first.json() and again.headers.get("Idempotent-Replayed") == "true"
    assert svc.ops() == ["object.copy"]
    other = svc.call("copy_object", {**args, "key": "elsewhere.txt"}, headers=key)
    assert other.status_code == 422
    svc.ok("copy_object", args)  # without a key: copied again, one more version
    versions = svc.ok("list_object_versions", {"bucket": PROD, "prefix": params["key"]})
    assert [v["etag"] for v in versions["versions"]] == [params["etag"]] * 2


def test_keys_are_ignored_on_routes_without_native_keys(svc: Service) -> None:
    args = {"bucket": PROD, "key": "promotions.log", "line": "keyed"}
    key = {"Idempotency-Key": "k"}
    svc.ok("append_to_object", args, headers=key)
    svc.ok("append_to_object", args, headers=key)
    assert svc.ops() == ["object.append", "object.append"]
    assert svc.admin.post("/admin/config", json={"idempotency_mode": "all"}).status_code == 200
    svc.ok("append_to_object", args, headers={"Idempotency-Key": "k2"})
    again = svc.call("append_to_object", args, headers={"Idempotency-Key": "k2"})
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert svc.ops().count("object.append") == 3


def test_composite_replays_under_keys_in_all_mode(svc: Service) -> None:
    assert svc.admin.post("/admin/config", json={"idempotency_mode": "all"}).status_code == 200
    wf = workflow("st-publish-build-artifact")
    args = gold_args(wf, "upload_object_multipart", params_for(wf))
    key = {"Idempotency-Key": "pub-1"}
    first = svc.call("upload_object_multipart", args, headers=key)
    again = svc.call("upload_object_multipart", args, headers=key)
    assert first.status_code == again.status_code == 200 and again.json() == first.json()
    assert svc.ops().count("multipart.complete") == 1


# ---- multipart uploads -------------------------------------------------------------


def _open(svc: Service, key: str = "big/file.txt") -> dict[str, Any]:
    up = svc.ok("create_multipart_upload", {"bucket": ARTIFACTS, "key": key})
    return {"bucket": ARTIFACTS, "upload_id": up["upload_id"]}


def test_multipart_upload_step_by_step(svc: Service) -> None:
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
    files = svc.blob_files()
    assert hashlib.sha256(b"world").hexdigest() not in files
    assert hashlib.sha256(b"hello world").hexdigest() in files
    assert svc.state()["partial"] == []


def test_complete_honours_idempotency_keys(svc: Service) -> None:
    up = _open(svc)
    p1 = svc.ok("upload_part", {**up, "part_number": 1, "body": "solo"})
    args = {**up, "parts": [{"part_number": 1, "etag": p1["etag"]}]}
    key = {"Idempotency-Key": "complete-1"}
    first = svc.call("complete_multipart_upload", args, headers=key)
    again = svc.call("complete_multipart_upload", args, headers=key)
    assert first.status_code == again.status_code == 200 and first.json() == again.json()
    assert svc.ops().count("multipart.complete") == 1


def test_abort_removes_parts_from_disk(svc: Service) -> None:
    up = _open(svc)
    svc.ok("upload_part", {**up, "part_number": 1, "body": "to be aborted"})
    digest = hashlib.sha256(b"to be aborted").hexdigest()
    assert digest in svc.blob_files()
    assert len(svc.state()["partial"]) == 1
    assert svc.ok("abort_multipart_upload", up)["aborted"] is True
    assert digest not in svc.blob_files()
    assert svc.state()["partial"] == []
    assert svc.call("abort_multipart_upload", up).status_code == 404
    assert svc.call("upload_part", {**up, "part_number": 1, "body": "x"}).status_code == 404
    assert svc.call("list_parts", up).status_code == 404


def test_reuploading_a_part_replaces_it(svc: Service) -> None:
    up = _open(svc)
    svc.ok("upload_part", {**up, "part_number": 1, "body": "draft"})
    svc.ok("upload_part", {**up, "part_number": 1, "body": "final"})
    parts = svc.ok("list_parts", up)["parts"]
    assert [(p["part_number"], p["etag"]) for p in parts] == [(1, md5("final"))]
    assert hashlib.sha256(b"draft").hexdigest() not in svc.blob_files()


@pytest.mark.usefixtures("crashable")
def test_crash_after_parts_leaves_an_open_upload_then_complete(svc: Service) -> None:
    wf = workflow("st-publish-build-artifact")
    params = params_for(wf)
    args = gold_args(wf, "upload_object_multipart", params)
    with pytest.raises(Crashed):
        svc.call("upload_object_multipart", args, headers=CRASH)
    state = svc.state()
    assert len(state["partial"]) == 1
    assert f"for {params['bucket']}/{params['key']} is open with 3 part(s)" in state["partial"][0]
    assert (
        svc.call("head_object", {"bucket": params["bucket"], "key": params["key"]}).status_code
        == 404
    )
    assert "the bundle has the multipart ETag" in failing(wf, params, state)
    assert svc.ops() == ["multipart.create", *["multipart.part"] * 3]

    (upload,) = svc.ok("list_multipart_uploads", {"bucket": params["bucket"]})["uploads"]
    ref = {"bucket": params["bucket"], "upload_id": upload["upload_id"]}
    parts = svc.ok("list_parts", ref)["parts"]
    refs = [{"part_number": p["part_number"], "etag": p["etag"]} for p in parts]
    done = svc.ok("complete_multipart_upload", {**ref, "parts": refs})
    assert done["etag"] == params["etag"]
    state = svc.state()
    assert state["partial"] == [] and failing(wf, params, state) == []
    assert effect_count(svc.commit_log(), wf.required_effects[0], params) == 1


@pytest.mark.usefixtures("crashable")
def test_crash_after_parts_then_abort_and_redo(svc: Service) -> None:
    wf = workflow("st-publish-build-artifact")
    params = params_for(wf)
    args = gold_args(wf, "upload_object_multipart", params)
    with pytest.raises(Crashed):
        svc.call("upload_object_multipart", args, headers=CRASH)
    # Running the composite again completes a second upload but leaves the first open.
    svc.ok("upload_object_multipart", args)
    state = svc.state()
    assert len(state["partial"]) == 1 and failing(wf, params, state) == [
        "no multipart upload is left open"
    ]
    (upload,) = svc.ok("list_multipart_uploads", {"bucket": params["bucket"]})["uploads"]
    svc.ok("abort_multipart_upload", {"bucket": params["bucket"], "upload_id": upload["upload_id"]})
    state = svc.state()
    assert state["partial"] == [] and failing(wf, params, state) == []


def test_crash_point_is_ignored_when_disabled(svc: Service) -> None:
    assert svc.admin.post("/admin/config", json={"crash_points": False}).status_code == 200
    wf = workflow("st-publish-build-artifact")
    params = params_for(wf)
    svc.ok(
        "upload_object_multipart", gold_args(wf, "upload_object_multipart", params), headers=CRASH
    )
    assert failing(wf, params, svc.state()) == []


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
def test_bad_bodies_are_4xx(svc: Service, method: str, path: str, body: Any) -> None:
    before = svc.blob_files()
    res = svc.public.request(method, path, json=body)
    assert 400 <= res.status_code < 500, res.text
    assert svc.commit_log() == []
    assert svc.state()["partial"] == []
    assert svc.blob_files() == before


@pytest.mark.parametrize("key", TRAVERSAL_KEYS)
def test_path_traversal_keys_are_4xx(svc: Service, key: str) -> None:
    before = svc.blob_files()
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
    assert svc.blob_files() == before
    outside = [p for p in svc.ctx.data_dir.parent.rglob("*") if "pwned" in p.name]
    assert outside == []


def test_keys_with_slashes_and_unicode_are_fine(svc: Service) -> None:
    for key in ("a/b/c.txt", "dir/", "ünï/cödé.txt", "x.y-z_1"):
        svc.ok("put_object", {"bucket": CONFIG, "key": key, "body": key})
        assert svc.ok("get_object", {"bucket": CONFIG, "key": key})["body"] == key
    names = svc.blob_files()
    assert all(re.fullmatch(r"[0-9a-f]{64}", n) for n in names)


@pytest.mark.parametrize("raw", [b"{not json", b"", b"\xff\xfe", b'{"key": "a", "body": "x"'])
def test_malformed_json_is_4xx(svc: Service, raw: bytes) -> None:
    headers = {"content-type": "application/json"}
    for method, path in (
        ("PUT", OBJ),
        ("POST", f"{OBJ}/append"),
        ("POST", f"{OBJ}/copy"),
        ("POST", "/v1/buckets"),
        ("POST", f"/v1/buckets/{CONFIG}/uploads"),
        ("POST", f"/v1/buckets/{CONFIG}/multipart-objects"),
    ):
        res = svc.public.request(method, path, content=raw, headers=headers)
        assert 400 <= res.status_code < 500, (path, res.status_code, res.text)
    assert svc.commit_log() == []


def test_bad_queries_are_4xx(svc: Service) -> None:
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


def test_oversize_request_is_413(svc: Service) -> None:
    body = json.dumps({"key": "a", "parts": ["x" * 60000] * 20})
    res = svc.public.post(
        f"/v1/buckets/{CONFIG}/multipart-objects",
        content=body,
        headers={"content-type": "application/json"},
    )
    assert res.status_code == 413


def test_suspended_versioning_replaces_the_null_version(svc: Service) -> None:
    key = {"bucket": CONFIG, "key": "CHANGELOG.txt"}
    kept = svc.ok("head_object", key)["version_id"]
    svc.ok("set_bucket_versioning", {"bucket": CONFIG, "status": "Suspended"})
    svc.ok("put_object", {**key, "body": "a"})
    svc.ok("put_object", {**key, "body": "b"})
    versions = svc.ok("list_object_versions", {"bucket": CONFIG, "prefix": "CHANGELOG"})
    assert [(v["version_id"], v["is_latest"]) for v in versions["versions"]] == [
        ("null", True),
        (kept, False),
    ]
    assert svc.ok("get_object", key)["body"] == "b"
    assert hashlib.sha256(b"a").hexdigest() not in svc.blob_files()
    svc.ok("delete_object", key)  # a delete marker takes the null version's place
    assert svc.call("head_object", key).status_code == 404
    assert (
        svc.ok("head_object", {**key, "version_id": kept})["etag"]
        == current(FX, CONFIG, "CHANGELOG.txt")["etag"]
    )
