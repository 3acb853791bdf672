"""Storage effects as the oracle judges them: every route's declared identity is the one it
records (never free text), gold plans succeed with nothing unrequired, and the behaviours
real agents show after a fault get the verdict they must get: a reworded re-send is a
duplicate, a re-send with another value is an unrequired effect, finishing a half-done
upload is allowed. In-process, with the benchmark's own oracle (`oracles.evaluate`)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from undobench_gym.envs.storage.composite import CRASH_AFTER_PARTS
from undobench_gym.envs.storage.service import DOMAIN
from undobench_gym.envs.storage.workflows import WORKFLOWS

from undobench_gym.oracles import evaluate
from undobench_gym.specs import Boundary, Verdict, WorkflowSpec

from .service_harness import (
    ServiceClient,
    gold_plan_cases,
    params_for,
    run_gold_plan,
    step_args,
)

pytestmark = pytest.mark.service(DOMAIN)

#: Argument names that hold text an agent words as it likes: never part of an identity.
#: (An object's or a part's `body` is the value a put sets, like a file's content: a set
#: keeps its value in the identity, so a re-put of other bytes is another effect.)
FREE_TEXT = {"line", "message", "description", "notes", "note", "text", "memo"}


def verdict(svc: ServiceClient, wf: WorkflowSpec, params: dict[str, Any]) -> Verdict:
    log = svc.commit_log()
    return evaluate(wf, params, svc.state(), log, physical_calls=len(log))


def ops_of(items: list[dict[str, Any]]) -> list[str]:
    return [d["op"] for d in items]


def declared(svc: ServiceClient) -> dict[str, list[str]]:
    """op -> the identity fields its routes declare (routes sharing an op must agree)."""
    out: dict[str, list[str]] = {}
    for ops in svc.app.openapi()["paths"].values():
        for op in ops.values():
            meta = op["x-undobench"]
            if meta.get("read_only"):
                continue
            fields = sorted(meta["identity"])
            assert out.setdefault(meta["op"], fields) == fields, meta["op"]
    return out


# ---- identities ----------------------------------------------------------------------


def test_every_route_records_the_identity_it_declares(svc: ServiceClient) -> None:
    """Drive every mutating route once; each commit-log row carries exactly the identity
    fields its operation declares, and none of them is free text."""
    b, key = "team-docs-x1", {"bucket": "team-docs-x1", "key": "notes/a.txt"}
    svc.ok("create_bucket", {"name": b})
    svc.ok("set_bucket_versioning", {"bucket": b, "status": "Enabled"})
    first = svc.ok("put_object", {**key, "body": "one"})
    svc.ok("put_object", {**key, "body": "two"})
    svc.ok("restore_object_version", {**key, "version_id": first["version_id"]})
    svc.ok(
        "copy_object",
        {"bucket": b, "key": "copy.txt", "source_bucket": b, "source_key": "notes/a.txt"},
    )
    svc.ok("append_to_object", {"bucket": b, "key": "log.txt", "line": "hello"})
    svc.ok("delete_object", key)
    up = svc.ok("create_multipart_upload", {"bucket": b, "key": "big.txt"})
    ref = {"bucket": b, "upload_id": up["upload_id"]}
    part = svc.ok("upload_part", {**ref, "part_number": 1, "body": "p1"})
    svc.ok(
        "complete_multipart_upload", {**ref, "parts": [{"part_number": 1, "etag": part["etag"]}]}
    )
    other = svc.ok("create_multipart_upload", {"bucket": b, "key": "big.txt"})
    svc.ok("abort_multipart_upload", {"bucket": b, "upload_id": other["upload_id"]})
    svc.ok("upload_object_multipart", {"bucket": b, "key": "whole.txt", "parts": ["a", "b"]})

    fields = declared(svc)
    log = svc.commit_log()
    assert {r["op"] for r in log} == set(fields)  # every declared operation was exercised
    for row in log:
        identity = json.loads(row["identity"])
        assert sorted(identity) == fields[row["op"]], row
        assert not FREE_TEXT & set(identity), row
        assert all(v is not None for k, v in identity.items() if k != "version_id"), row


# ---- gold plans ------------------------------------------------------------------------


@gold_plan_cases(WORKFLOWS)
def test_gold_plan_succeeds_with_nothing_unrequired(
    svc: ServiceClient, wf: WorkflowSpec, seed: int
) -> None:
    svc.reset(seed)
    params = params_for(wf, seed)
    run_gold_plan(svc, wf, params)
    v = verdict(svc, wf, params)
    assert v.success, v
    assert v.unrequired == [] and v.duplicates == [] and v.missing == []


def test_scenarios_target_mutating_gold_tools_and_are_honest(svc: ServiceClient) -> None:
    for wf in WORKFLOWS:
        gold = [s.tool for s in wf.gold_plan]
        for sc in wf.scenarios:
            assert sc.target.tool in gold and not svc.tools[sc.target.tool].read_only
            assert sc.target.nth <= gold.count(sc.target.tool), (wf.id, sc.id)
            if sc.boundary is Boundary.DURING_MUTATION:
                assert sc.crash_point, (wf.id, sc.id)  # else it is a lost acknowledgement
            if sc.boundary is Boundary.DURING_COMPENSATION:
                assert svc.tools[sc.target.tool].compensation, (wf.id, sc.id)
                forward = [t for t in gold if not svc.tools[t].read_only and t != sc.target.tool]
                assert forward, (wf.id, sc.id)  # the task has forward effects too


# ---- adversarial behaviours --------------------------------------------------------------


@pytest.mark.parametrize(
    ("wf_id", "log_key"), [("st-promote-build", "log"), ("st-rollback-bad-config", "changelog")]
)
def test_reworded_append_after_a_lost_ack_is_a_duplicate(
    svc: ServiceClient, wf_id: str, log_key: str
) -> None:
    """The append committed but its answer was lost; the agent appends the line again,
    reworded. The log holds the entry twice: a duplicate, whatever the wording."""
    wf = svc.workflow(wf_id)
    params = params_for(wf)
    run_gold_plan(svc, wf, params)
    args = step_args(wf, "append_to_object", params)
    svc.ok("append_to_object", {**args, "line": args["line"] + " (retry after timeout)"})
    v = verdict(svc, wf, params)
    assert not v.success and ops_of(v.duplicates) == ["object.append"]
    assert v.duplicates[0]["identity"] == {"bucket": args["bucket"], "key": params[log_key]}
    assert v.unrequired == [] and not v.state_ok


def test_copy_of_another_build_is_unrequired(svc: ServiceClient) -> None:
    wf = svc.workflow("st-promote-build")
    params = params_for(wf)
    run_gold_plan(svc, wf, params)
    other = next(
        o["key"]
        for o in svc.ok("list_objects", {"bucket": params["staging"]})["objects"]
        if o["key"] != params["key"]
    )
    args = step_args(wf, "copy_object", params)
    svc.ok("copy_object", {**args, "source_key": other})
    v = verdict(svc, wf, params)
    assert not v.success and ops_of(v.unrequired) == ["object.copy"]
    assert v.unrequired[0]["identity"]["source_key"] == other and v.duplicates == []


def test_manifest_put_with_another_body_is_unrequired(svc: ServiceClient) -> None:
    wf = svc.workflow("st-register-dataset")
    params = params_for(wf)
    run_gold_plan(svc, wf, params)
    args = step_args(wf, "put_object", params)
    refused = svc.call("put_object", {**args, "body": args["body"] + " "})
    assert refused.status_code == 412  # the write-once guard holds
    del args["if_none_match"]
    svc.ok(
        "put_object",
        {**args, "body": args["body"].replace('"schema_version": 1', '"schema_version": 2')},
    )
    v = verdict(svc, wf, params)
    assert not v.success and ops_of(v.unrequired) == ["object.put"] and not v.state_ok


def test_versioning_set_to_another_status_is_unrequired(svc: ServiceClient) -> None:
    wf = svc.workflow("st-provision-team-bucket")
    params = params_for(wf)
    run_gold_plan(svc, wf, params)
    svc.ok("set_bucket_versioning", {"bucket": params["bucket"], "status": "Enabled"})
    assert verdict(svc, wf, params).success  # the same value again: a harmless set
    svc.ok("set_bucket_versioning", {"bucket": params["bucket"], "status": "Suspended"})
    v = verdict(svc, wf, params)
    assert not v.success and ops_of(v.unrequired) == ["bucket.versioning"]


def test_publish_repeats_and_other_content(svc: ServiceClient) -> None:
    wf = svc.workflow("st-publish-build-artifact")
    params = params_for(wf)
    args = step_args(wf, "upload_object_multipart", params)
    run_gold_plan(svc, wf, params)
    svc.ok("upload_object_multipart", args)  # after a lost ack: the same bundle again
    v = verdict(svc, wf, params)
    assert v.success and v.unrequired == [], v
    svc.ok("upload_object_multipart", {**args, "parts": [*args["parts"][:2], "tampered"]})
    v = verdict(svc, wf, params)
    assert not v.success and ops_of(v.unrequired) == ["multipart.complete"]


@pytest.mark.usefixtures("crashable")
def test_finishing_the_upload_a_crash_left_open_is_allowed(svc: ServiceClient) -> None:
    wf = svc.workflow("st-publish-build-artifact")
    params = params_for(wf)
    args = step_args(wf, "upload_object_multipart", params)
    svc.call_until_crash("upload_object_multipart", args, CRASH_AFTER_PARTS)
    assert verdict(svc, wf, params).partial
    (upload,) = svc.ok("list_multipart_uploads", {"bucket": params["bucket"]})["uploads"]
    ref = {"bucket": params["bucket"], "upload_id": upload["upload_id"]}
    parts = svc.ok("list_parts", ref)["parts"]
    refs = [{"part_number": p["part_number"], "etag": p["etag"]} for p in parts]
    svc.ok("complete_multipart_upload", {**ref, "parts": refs})
    v = verdict(svc, wf, params)
    assert v.success and v.unrequired == [], v


@pytest.mark.usefixtures("crashable")
def test_rerunning_after_a_crash_needs_the_orphan_aborted(svc: ServiceClient) -> None:
    wf = svc.workflow("st-publish-build-artifact")
    params = params_for(wf)
    args = step_args(wf, "upload_object_multipart", params)
    svc.call_until_crash("upload_object_multipart", args, CRASH_AFTER_PARTS)
    svc.ok("upload_object_multipart", args)
    v = verdict(svc, wf, params)
    assert not v.success and v.partial and v.unrequired == []  # the first upload stays open
    (upload,) = svc.ok("list_multipart_uploads", {"bucket": params["bucket"]})["uploads"]
    svc.ok("abort_multipart_upload", {"bucket": params["bucket"], "upload_id": upload["upload_id"]})
    v = verdict(svc, wf, params)
    assert v.success and v.unrequired == [] and v.harmless, v


def test_an_upload_of_another_key_is_unrequired(svc: ServiceClient) -> None:
    wf = svc.workflow("st-publish-build-artifact")
    params = params_for(wf)
    run_gold_plan(svc, wf, params)
    up = svc.ok("create_multipart_upload", {"bucket": params["bucket"], "key": "scratch.txt"})
    svc.ok("abort_multipart_upload", {"bucket": params["bucket"], "upload_id": up["upload_id"]})
    v = verdict(svc, wf, params)
    assert not v.success
    assert sorted(ops_of(v.unrequired)) == ["multipart.abort", "multipart.create"]


def test_delete_instead_of_restore_is_forbidden_not_unrequired(svc: ServiceClient) -> None:
    wf = svc.workflow("st-rollback-bad-config")
    params = params_for(wf)
    svc.ok(
        "delete_object",
        {"bucket": params["bucket"], "key": params["key"], "version_id": params["bad_version"]},
    )
    v = verdict(svc, wf, params)
    assert ops_of(v.forbidden) == ["object.delete"] and v.unrequired == []
    assert sorted(m["op"] for m in v.missing) == ["object.append", "object.restore"]
