"""Storage effects as the oracle judges them: the shared `WorkflowContract` (every route's
declared identity is the one it records, never free text; gold plans succeed with
nothing unrequired; a reworded re-sent append is a duplicate), and here the behaviours
particular to storage: another build copied, another manifest or versioning status put,
a bundle re-published, finishing or aborting the upload a crash left open. In-process,
with the benchmark's own oracle (`oracles.evaluate`)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from undobench_gym.contract.specs import Verdict
from undobench_gym.services.domains.storage.composite import CRASH_AFTER_PARTS
from undobench_gym.services.domains.storage.service import DOMAIN
from undobench_gym.services.domains.storage.workflows import WORKFLOWS

from .service_harness import ServiceClient, params_for, step_args
from .workflow_harness import (
    Episode,
    Resend,
    Row,
    WorkflowContract,
    gold,
    ops,
    resend_step,
    verdict,
)

pytestmark = pytest.mark.service(DOMAIN)


def _logged_to(log_key: str) -> Callable[[Episode, Verdict], None]:
    """The duplicate is the append to the log, named by bucket and key: not by the line."""

    def check(ep: Episode, v: Verdict) -> None:
        args = step_args(ep.wf, "append_to_object", ep.params)
        assert v.duplicates[0]["identity"] == {"bucket": args["bucket"], "key": ep.params[log_key]}

    return check


class TestWorkflowContract(WorkflowContract):
    workflows = WORKFLOWS
    #: (An object's or a part's `body` is the value a put sets, like a file's content: a set
    #: keeps its value in the identity, so a re-put of other bytes is another effect.)
    free_text = frozenset({"line", "message", "description", "notes", "note", "text", "memo"})
    #: An unversioned bucket's objects have no version id.
    nullable = frozenset({"version_id"})
    #: The rollback's undo is the task; its forward effect is the changelog note after it.
    forward_effect_first = False
    resends = [
        Resend(
            wf_id,
            "reworded append",
            resend_step("append_to_object", {"line": "{line} (retry after timeout)"}),
            duplicates=["object.append"],
            check=_logged_to(log_key),
        )
        for wf_id, log_key in [("st-promote-build", "log"), ("st-rollback-bad-config", "changelog")]
    ]

    def exercise(self, svc: ServiceClient) -> list[Row]:
        """Drive every mutating route once."""
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
        parts = [{"part_number": 1, "etag": part["etag"]}]
        svc.ok("complete_multipart_upload", {**ref, "parts": parts})
        other = svc.ok("create_multipart_upload", {"bucket": b, "key": "big.txt"})
        svc.ok("abort_multipart_upload", {"bucket": b, "upload_id": other["upload_id"]})
        svc.ok("upload_object_multipart", {"bucket": b, "key": "whole.txt", "parts": ["a", "b"]})
        return svc.commit_log()


# ---- adversarial behaviours --------------------------------------------------------------


def test_copy_of_another_build_is_unrequired(svc: ServiceClient) -> None:
    ep = gold(svc, "st-promote-build")
    other = next(
        o["key"]
        for o in svc.ok("list_objects", {"bucket": ep.params["staging"]})["objects"]
        if o["key"] != ep.params["key"]
    )
    args = step_args(ep.wf, "copy_object", ep.params)
    svc.ok("copy_object", {**args, "source_key": other})
    v = ep.verdict()
    assert not v.success and ops(v.unrequired) == ["object.copy"]
    assert v.unrequired[0]["identity"]["source_key"] == other and v.duplicates == []


def test_manifest_put_with_another_body_is_unrequired(svc: ServiceClient) -> None:
    ep = gold(svc, "st-register-dataset")
    args = step_args(ep.wf, "put_object", ep.params)
    refused = svc.call("put_object", {**args, "body": args["body"] + " "})
    assert refused.status_code == 412  # the write-once guard holds
    del args["if_none_match"]
    svc.ok(
        "put_object",
        {**args, "body": args["body"].replace('"schema_version": 1', '"schema_version": 2')},
    )
    v = ep.verdict()
    assert not v.success and ops(v.unrequired) == ["object.put"] and not v.state_ok


def test_versioning_set_to_another_status_is_unrequired(svc: ServiceClient) -> None:
    ep = gold(svc, "st-provision-team-bucket")
    svc.ok("set_bucket_versioning", {"bucket": ep.params["bucket"], "status": "Enabled"})
    assert ep.verdict().success  # the same value again: a harmless set
    svc.ok("set_bucket_versioning", {"bucket": ep.params["bucket"], "status": "Suspended"})
    v = ep.verdict()
    assert not v.success and ops(v.unrequired) == ["bucket.versioning"]


def test_publish_repeats_and_other_content(svc: ServiceClient) -> None:
    ep = gold(svc, "st-publish-build-artifact")
    args = step_args(ep.wf, "upload_object_multipart", ep.params)
    svc.ok("upload_object_multipart", args)  # after a lost ack: the same bundle again
    v = ep.verdict()
    assert v.success and v.unrequired == [], v
    svc.ok("upload_object_multipart", {**args, "parts": [*args["parts"][:2], "tampered"]})
    v = ep.verdict()
    assert not v.success and ops(v.unrequired) == ["multipart.complete"]


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
    ep = gold(svc, "st-publish-build-artifact")
    bucket = ep.params["bucket"]
    up = svc.ok("create_multipart_upload", {"bucket": bucket, "key": "scratch.txt"})
    svc.ok("abort_multipart_upload", {"bucket": bucket, "upload_id": up["upload_id"]})
    v = ep.verdict()
    assert not v.success
    assert ops(v.unrequired) == ["multipart.abort", "multipart.create"]


def test_delete_instead_of_restore_is_forbidden_not_unrequired(svc: ServiceClient) -> None:
    wf = svc.workflow("st-rollback-bad-config")
    params = params_for(wf)
    svc.ok(
        "delete_object",
        {"bucket": params["bucket"], "key": params["key"], "version_id": params["bad_version"]},
    )
    v = verdict(svc, wf, params)
    assert ops(v.forbidden) == ["object.delete"] and v.unrequired == []
    assert ops(v.missing) == ["object.append", "object.restore"]
