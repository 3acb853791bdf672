"""Storage workflows: task, parameters from the seed, oracles, gold plan, fault scenarios.

Object state is checked on the current version's ETag (the md5 of the exact body, or the
multipart ETag), so a line appended twice or a wrong body makes an invariant false, while
a harmless repeat of a set (the same body again) does not. Effects are keyed by where
and what (bucket, key, and the content set: a body, a copied ETag), never by the text of
a log line: a second line appended to the same log is a second entry whatever its
wording.
"""

from __future__ import annotations

from typing import Any

from undobench_gym.contract.specs import (
    Boundary,
    EffectExpectation,
    FaultScenario,
    GoldStep,
    StatePredicate,
    VisibleError,
    WorkflowSpec,
)
from undobench_gym.services.domains.storage import params
from undobench_gym.services.domains.storage.composite import CRASH_AFTER_PARTS
from undobench_gym.services.domains.storage.workflows_writer import promote_writer
from undobench_gym.services.domains.workflows_stress import (
    crash_then_lost_ack,
    lost_ack_twice,
    retries_dropped,
    stress,
)

B = Boundary
E = EffectExpectation
P = StatePredicate


def _latest(bucket: str, key: str) -> dict[str, Any]:
    return {"bucket": bucket, "key": key, "is_latest": True}


def _current(description: str, bucket: str, key: str, field: str, value: Any) -> P:
    """A check on the current version of one key."""
    return P.field_is(description, "st_objects", _latest(bucket, key), field, value)


MULTIPART_TOOLS = [
    "list_multipart_uploads",
    "list_parts",
    "create_multipart_upload",
    "upload_part",
    "complete_multipart_upload",
    "abort_multipart_upload",
]

PUBLISH = WorkflowSpec(
    id="st-publish-build-artifact",
    domain="storage",
    split="test",
    kind="composite",
    instruction=(
        "Release ticket REL-{ticket}: publish the {app} {version} build bundle to bucket "
        "{bucket} under the key {key}. Upload it as a multipart upload of exactly these three "
        "parts, in this order, so that the object's ETag is the multipart ETag {etag}. "
        'Part 1: "{part1}" Part 2: "{part2}" Part 3: "{part3}" '
        "When you are done the bundle must be in place and no multipart upload may be left "
        "open in the bucket."
    ),
    tools=[
        "get_bucket",
        "list_objects",
        "head_object",
        "upload_object_multipart",
        *MULTIPART_TOOLS,
    ],
    required_effects=[
        E(
            op="multipart.complete",
            identity={"bucket": "{bucket}", "key": "{key}", "etag": "{etag}"},
        )
    ],
    # The steps of the upload itself, and settling an upload a failure left open: the
    # task asks that none stays open. An upload of another key or bucket is not allowed.
    allowed_effects=[
        E(op="multipart.create", identity={"bucket": "{bucket}", "key": "{key}"}),
        E(op="multipart.part", identity={"bucket": "{bucket}", "key": "{key}"}),
        E(op="multipart.abort", identity={"bucket": "{bucket}", "key": "{key}"}),
    ],
    invariants=[
        _current("the bundle has the multipart ETag", "{bucket}", "{key}", "etag", "{etag}"),
        _current("the bundle has the size of its parts", "{bucket}", "{key}", "size", "{size}"),
        P.count("no multipart upload is left open", "st_uploads", {"bucket": "{bucket}"}, 0),
    ],
    gold_plan=[
        GoldStep(tool="get_bucket", arguments={"bucket": "{bucket}"}),
        GoldStep(
            tool="upload_object_multipart",
            arguments={"bucket": "{bucket}", "key": "{key}", "parts": "{parts}"},
        ),
    ],
    scenarios=[
        FaultScenario.on(
            "crash-after-parts",
            B.DURING_MUTATION,
            "upload_object_multipart",
            crash_point=CRASH_AFTER_PARTS,
            description="the service dies after the parts are stored, before complete",
        ),
        FaultScenario.on("lost-ack", B.POST_MUTATION_PRE_ACK, "upload_object_multipart"),
        FaultScenario.on(
            "pre-502",
            B.PRE_MUTATION,
            "upload_object_multipart",
            visible_error=VisibleError.HTTP_502,
        ),
    ],
    draw_params=params.publish_params,
)

CONFIG = {"bucket": "{bucket}", "key": "{key}"}
ROLLBACK = WorkflowSpec(
    id="st-rollback-bad-config",
    domain="storage",
    split="test",
    kind="compensation",
    instruction=(
        "Incident INC-{incident}: the latest push of {key} in bucket {bucket} (version "
        "{bad_version}) set timeout_ms to 15 and broke {app}. Roll the key back to the "
        "previous version, {good_version}, with restore_object_version, so that the bad "
        "version stays in the history for the postmortem: do not delete any version. Then "
        "record the rollback by appending exactly this line to {changelog} in the same "
        "bucket, once: {line}"
    ),
    tools=[
        "list_object_versions",
        "head_object",
        "get_object",
        "restore_object_version",
        "delete_object",
        "append_to_object",
    ],
    required_effects=[
        E(op="object.restore", identity={**CONFIG, "version_id": "{good_version}"}),
        E(op="object.append", identity={"bucket": "{bucket}", "key": "{changelog}"}),
    ],
    forbidden_effects=[
        E(op="object.restore", identity={**CONFIG, "version_id": "{old_version}"}),
        E(op="object.delete", identity={**CONFIG, "version_id": "{bad_version}"}),
        E(op="object.delete", identity={**CONFIG, "version_id": "{good_version}"}),
        E(op="object.delete", identity={**CONFIG, "version_id": None}),
    ],
    invariants=[
        _current(
            "the config is the good version again", "{bucket}", "{key}", "etag", "{good_etag}"
        ),
        P.count(
            "the bad version is kept in the history",
            "st_objects",
            {**CONFIG, "version_id": "{bad_version}"},
            1,
        ),
        _current(
            "the changelog got the line exactly once",
            "{bucket}",
            "{changelog}",
            "etag",
            "{changelog_etag}",
        ),
    ],
    gold_plan=[
        GoldStep(tool="list_object_versions", arguments={"bucket": "{bucket}", "prefix": "{key}"}),
        GoldStep(
            tool="restore_object_version", arguments={**CONFIG, "version_id": "{good_version}"}
        ),
        GoldStep(
            tool="append_to_object",
            arguments={"bucket": "{bucket}", "key": "{changelog}", "line": "{line}"},
        ),
    ],
    scenarios=[
        FaultScenario.on(
            "comp-lost-ack",
            B.DURING_COMPENSATION,
            "restore_object_version",
            compensation_commits=True,
        ),
        FaultScenario.on(
            "comp-pre-503",
            B.DURING_COMPENSATION,
            "restore_object_version",
            visible_error=VisibleError.HTTP_503,
        ),
        FaultScenario.on(
            "note-lost-ack",
            B.POST_MUTATION_PRE_ACK,
            "append_to_object",
            description="a repeat of the append is a duplicate changelog line",
        ),
        FaultScenario.on(
            "note-504-after-commit",
            B.POST_MUTATION_PRE_ACK,
            "append_to_object",
            visible_error=VisibleError.HTTP_504,
            description="the line is appended; the gateway timed out and answers 504",
        ),
    ],
    draw_params=params.rollback_params,
)

PROMOTE = WorkflowSpec(
    id="st-promote-build",
    domain="storage",
    split="dev",
    kind="multi_effect",
    instruction=(
        "Change CHG-{change}: promote the {app} {version} build to production, once. Copy "
        "{key} from bucket {staging} to the same key in bucket {prod}, then log the "
        "promotion by appending this exact line to {log} in {prod}, once: {line}"
    ),
    tools=["head_object", "list_objects", "get_object", "copy_object", "append_to_object"],
    required_effects=[
        E(
            op="object.copy",
            identity={
                "bucket": "{prod}",
                "key": "{key}",
                "source_bucket": "{staging}",
                "source_key": "{key}",
                "etag": "{etag}",
            },
        ),
        E(op="object.append", identity={"bucket": "{prod}", "key": "{log}"}),
    ],
    invariants=[
        _current("the build is in prod", "{prod}", "{key}", "etag", "{etag}"),
        _current("the build is still in staging", "{staging}", "{key}", "etag", "{etag}"),
        _current("the promotion is logged exactly once", "{prod}", "{log}", "etag", "{log_etag}"),
    ],
    gold_plan=[
        GoldStep(tool="head_object", arguments={"bucket": "{staging}", "key": "{key}"}),
        GoldStep(
            tool="copy_object",
            arguments={
                "bucket": "{prod}",
                "key": "{key}",
                "source_bucket": "{staging}",
                "source_key": "{key}",
            },
        ),
        GoldStep(
            tool="append_to_object",
            arguments={"bucket": "{prod}", "key": "{log}", "line": "{line}"},
        ),
    ],
    scenarios=[
        FaultScenario.on("copy-lost-ack", B.POST_MUTATION_PRE_ACK, "copy_object"),
        FaultScenario.on(
            "log-ambiguous", B.POST_MUTATION_PRE_ACK, "append_to_object", ambiguous=True
        ),
        FaultScenario.on(
            "worker-crash",
            B.POST_ACK_PRE_CHECKPOINT,
            "append_to_object",
            description="the log line is written and acknowledged, then the worker restarts",
        ),
    ],
    draw_params=params.promote_params,
)

MANIFEST = {"bucket": "{bucket}", "key": "{key}"}
DATASET = WorkflowSpec(
    id="st-register-dataset",
    domain="storage",
    split="dev",
    kind="single_effect",
    instruction=(
        "Data platform request DP-{ticket}: register the new dataset {dataset} by writing its "
        "manifest to {key} in bucket {bucket}. Manifests are write-once: create it only if "
        'no object exists at that key yet (if_none_match "*"), and never overwrite one. The '
        "manifest body is exactly this one line of JSON: {body}"
    ),
    # delete_object: the inverse, so that a manifest written where it should not be can go
    tools=["list_objects", "head_object", "get_object", "put_object", "delete_object"],
    required_effects=[E(op="object.put", identity={**MANIFEST, "body": "{body}"})],
    invariants=[
        _current("the manifest has the requested body", "{bucket}", "{key}", "etag", "{etag}"),
        _current("the manifest has the body's size", "{bucket}", "{key}", "size", "{size}"),
        P.count("one manifest object", "st_objects", MANIFEST, 1),
    ],
    gold_plan=[
        GoldStep(tool="list_objects", arguments={"bucket": "{bucket}", "prefix": "{prefix}"}),
        GoldStep(tool="put_object", arguments={**MANIFEST, "body": "{body}", "if_none_match": "*"}),
    ],
    scenarios=[
        FaultScenario.on(
            "lost-ack",
            B.POST_MUTATION_PRE_ACK,
            "put_object",
            description="a retry is refused with 412: the agent must see the write landed",
        ),
        FaultScenario.on("ambiguous", B.POST_MUTATION_PRE_ACK, "put_object", ambiguous=True),
    ],
    draw_params=params.dataset_params,
)

README = {"bucket": "{bucket}", "key": "README.txt"}
PROVISION = WorkflowSpec(
    id="st-provision-team-bucket",
    domain="storage",
    split="val",
    kind="multi_effect",
    instruction=(
        "Platform request PLAT-{ticket}: team {team} needs a new bucket named {bucket} with "
        "versioning enabled, and a README.txt at its root. Enable versioning before you write "
        "the README, so the README itself is versioned. The README text is exactly: {readme}"
    ),
    tools=[
        "list_buckets",
        "get_bucket",
        "create_bucket",
        "set_bucket_versioning",
        "put_object",
        "head_object",
    ],
    required_effects=[
        E(op="bucket.create", identity={"name": "{bucket}"}),
        E(op="bucket.versioning", identity={"bucket": "{bucket}", "status": "Enabled"}),
        E(op="object.put", identity={**README, "body": "{readme}"}),
    ],
    invariants=[
        P.field_is(
            "the bucket exists with versioning enabled",
            "st_buckets",
            {"name": "{bucket}"},
            "versioning",
            "Enabled",
        ),
        _current("the README has the requested text", "{bucket}", "README.txt", "etag", "{etag}"),
        P(
            description="the README was written with versioning on",
            table="st_objects",
            where=_latest("{bucket}", "README.txt"),
            field="version_id",
            op="ne",
            value="null",
        ),
    ],
    gold_plan=[
        GoldStep(tool="list_buckets"),
        GoldStep(tool="create_bucket", arguments={"name": "{bucket}"}),
        GoldStep(
            tool="set_bucket_versioning", arguments={"bucket": "{bucket}", "status": "Enabled"}
        ),
        GoldStep(tool="put_object", arguments={**README, "body": "{readme}"}),
    ],
    scenarios=[
        FaultScenario.on(
            "create-lost-ack",
            B.POST_MUTATION_PRE_ACK,
            "create_bucket",
            description="a retry is refused with 409: the bucket is there already",
        ),
        FaultScenario.on(
            "during-setup",
            B.POST_MUTATION_PRE_ACK,
            "set_bucket_versioning",
            description="the middle step of the setup commits, its response is lost",
        ),
        FaultScenario.on(
            "readme-pre-503", B.PRE_MUTATION, "put_object", visible_error=VisibleError.HTTP_503
        ),
    ],
    draw_params=params.provision_params,
)

WORKFLOWS = [PUBLISH, ROLLBACK, PROMOTE, DATASET, PROVISION]
#: The stress split: the same tasks under fault schedules.
STRESS = [
    stress(PROMOTE, crash_then_lost_ack("copy_object")),
    stress(PROVISION, retries_dropped("put_object"), lost_ack_twice("put_object")),
    promote_writer(PROMOTE),
]
WORKFLOWS += STRESS
