"""Messaging workflows under the semantic-identity oracle, in-process: what each mutating
route commits as its identity, the verdict of every gold plan (no unrequired effect), and
the verdicts that behaviours of real agents must get (a reworded re-send is a duplicate,
a re-send with another value is unrequired, a resume after a crash is allowed)."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import pytest
from undobench_gym.agents.scripted import resolve_refs
from undobench_gym.envs.messaging import webhooks
from undobench_gym.envs.messaging.batches import CRASH_MID_BATCH
from undobench_gym.envs.messaging.fixture import build_fixture
from undobench_gym.envs.messaging.service import DOMAIN
from undobench_gym.envs.messaging.workflows import WORKFLOWS, created_id

from undobench_gym.oracles import evaluate
from undobench_gym.specs import Boundary, Verdict, WorkflowSpec

from .service_harness import (
    GOLD_SEEDS,
    SEED,
    ServiceClient,
    gold_plan_cases,
    params_for,
    run_gold_plan,
    step_args,
)

pytestmark = pytest.mark.service(DOMAIN)

#: Argument names that hold text a person or an agent writes: never part of an identity.
FREE_TEXT = {"text", "body", "note", "summary", "subject", "message"}
#: Effects a route commits besides its own, and their identity fields.
SUB_EFFECTS = {
    "email.send": {"reference", "recipient"},
    "webhook.deliver": {"endpoint_id", "event", "ref"},
}


@pytest.fixture
def svc(svc: ServiceClient, monkeypatch: pytest.MonkeyPatch) -> ServiceClient:
    """The service, with webhook deliveries handed to its own admin app's receiver."""
    svc.ctx.ports = {"public": 1, "admin": 2}

    def deliver(url: str, payload: dict[str, Any], headers: dict[str, str]) -> int:
        return int(svc.admin.post(urlsplit(url).path, json=payload, headers=headers).status_code)

    monkeypatch.setattr(webhooks, "deliver", deliver)
    return svc


def verdict(svc: ServiceClient, wf: WorkflowSpec, params: dict[str, Any]) -> Verdict:
    """The benchmark's own verdict on the service's final state and commit log."""
    return evaluate(wf, params, svc.state(), svc.commit_log(), physical_calls=0)


def ops_of(items: list[dict[str, Any]]) -> list[str]:
    return sorted(e["op"] for e in items)


def gold_then_resend(
    svc: ServiceClient, wf: WorkflowSpec, params: dict[str, Any], tool: str, change: Any
) -> None:
    """Run the gold plan, then send gold step `tool` once more with `change` applied to its
    arguments, as an agent that never saw the first answer would."""
    bodies = run_gold_plan(svc, wf, params)
    args = resolve_refs(step_args(wf, tool, params), bodies)
    svc.ok(tool, {**args, **change})


# ---- identities --------------------------------------------------------------------

Call = tuple[str, dict[str, Any], list[dict[str, Any]]]


def _exercise(svc: ServiceClient) -> list[Call]:
    """Call every mutating tool once with arguments that commit: (tool, arguments, the
    commit-log rows the call wrote), in order."""
    fx = build_fixture(SEED)
    ops, svc0 = fx["channels"][0]["id"], fx["services"][0]
    live, acked = fx["pages"][0]["id"], fx["pages"][1]["id"]
    batch = {
        "reference": "R-1",
        "subject": "s",
        "recipients": ["a@x.example.com", "b@x.example.com"],
    }
    calls: list[tuple[str, dict[str, Any]]] = [
        ("post_chat_message", {"channel_id": ops, "text": "hello"}),
        ("send_sms", {"to": svc0["oncall_phone"], "body": "hi"}),
        ("create_webhook_subscription", {"endpoint_id": "statuspage", "event": "page.resolved"}),
        (
            "trigger_page",
            {"service_id": svc0["id"], "summary": "s", "severity": "low", "dedup_key": "k-1"},
        ),
        ("acknowledge_page", {"page_id": live}),
        ("resolve_page", {"page_id": acked, "note": "done"}),
    ]
    out: list[Call] = []
    for tool, args in calls:
        seen = len(svc.commit_log())
        svc.ok(tool, args)
        out.append((tool, args, svc.commit_log()[seen:]))
    seen = len(svc.commit_log())
    svc.call_until_crash("send_email_batch", batch, CRASH_MID_BATCH)
    out.append(("send_email_batch", batch, svc.commit_log()[seen:]))
    (found,) = svc.ok("list_email_batches", {"reference": "R-1"})
    seen = len(svc.commit_log())
    resume = {"batch_id": found["id"]}
    svc.ok("resume_email_batch", resume)
    out.append(("resume_email_batch", resume, svc.commit_log()[seen:]))
    return out


@pytest.mark.usefixtures("crashable")
def test_every_route_commits_the_identity_it_declares(svc: ServiceClient) -> None:
    calls = _exercise(svc)
    mutating = {n for n, t in svc.tools.items() if not t.read_only}
    assert {tool for tool, _, _ in calls} == mutating, "every mutating route is exercised"
    subs = set()
    for tool, args, commits in calls:
        spec = svc.tools[tool]
        own = [json.loads(r["identity"]) for r in commits if r["op"] == spec.op]
        # The route's own commit carries exactly the declared identity fields, with the
        # call's argument values (what the env's re-issue count derives from a call).
        assert own == [{f: args[f] for f in spec.identity}], (tool, own, spec.identity)
        for row in commits:
            if row["op"] != spec.op:
                assert set(json.loads(row["identity"])) == SUB_EFFECTS[row["op"]], (tool, row)
                subs.add(row["op"])
    assert subs == set(SUB_EFFECTS)


def test_no_identity_holds_free_text(svc: ServiceClient) -> None:
    for name, tool in svc.tools.items():
        if not tool.read_only:
            assert tool.identity, name
            assert not set(tool.identity) & FREE_TEXT, (name, tool.identity)


def test_created_id_is_the_services_next_id(svc: ServiceClient) -> None:
    fx = build_fixture(SEED)
    first = svc.ok("post_chat_message", {"channel_id": fx["channels"][1]["id"], "text": "a"})
    second = svc.ok("post_chat_message", {"channel_id": fx["channels"][1]["id"], "text": "b"})
    assert [first["id"], second["id"]] == [created_id(SEED, "msg", n) for n in (1, 2)]
    assert created_id(SEED, "msg") not in {m["id"] for m in fx["chat_messages"]}


# ---- scenarios ---------------------------------------------------------------------


def test_scenarios_are_honest(svc: ServiceClient) -> None:
    for wf in WORKFLOWS:
        gold = [s.tool for s in wf.gold_plan]
        for sc in wf.scenarios:
            tool = svc.tools[sc.target.tool]
            assert not tool.read_only and sc.target.tool in wf.tools, (wf.id, sc.id)
            assert gold.count(sc.target.tool) >= sc.target.nth, (wf.id, sc.id)
            if sc.boundary is Boundary.DURING_MUTATION:
                assert sc.crash_point, f"{wf.id}/{sc.id}: a lost ack is POST_MUTATION_PRE_ACK"
            assert sc.boundary is not Boundary.DURING_COMPENSATION, "no compensation here"


# ---- gold plans under the oracle ---------------------------------------------------


@gold_plan_cases(WORKFLOWS)
def test_gold_plan_verdict_is_clean(svc: ServiceClient, wf: WorkflowSpec, seed: int) -> None:
    svc.reset(seed)
    params = params_for(wf, seed)
    run_gold_plan(svc, wf, params)
    v = verdict(svc, wf, params)
    assert v.success, v.model_dump()
    assert v.unrequired == v.duplicates == v.missing == v.forbidden == []


# ---- behaviours of real agents -----------------------------------------------------

REWORDED = [
    ("msg-oncall-sms", "send_sms", {"body": "Please join #incidents (resent)"}),
    ("msg-oncall-sms", "post_chat_message", {"text": "Texted the on-call again, fyi"}),
    ("msg-page-oncall", "post_chat_message", {"text": "Page is out; updates here (retry)"}),
]


@pytest.mark.parametrize(("wf_id", "tool", "reworded"), REWORDED)
@pytest.mark.parametrize("seed", GOLD_SEEDS[:2])
def test_reworded_resend_is_a_duplicate(
    svc: ServiceClient, wf_id: str, tool: str, reworded: dict[str, Any], seed: int
) -> None:
    wf = svc.workflow(wf_id)
    svc.reset(seed)
    params = params_for(wf, seed)
    gold_then_resend(svc, wf, params, tool, reworded)
    v = verdict(svc, wf, params)
    assert not v.success and not v.state_ok
    assert ops_of(v.duplicates) == [svc.tools[tool].op]
    assert v.unrequired == []


def _other_phone(params: dict[str, Any]) -> str:
    return next(
        s["oncall_phone"]
        for s in build_fixture(SEED)["services"]
        if s["oncall_phone"] != params["phone"]
    )


def _channel(name: str) -> str:
    return next(str(c["id"]) for c in build_fixture(SEED)["channels"] if c["name"] == name)


#: (workflow, tool, argument changes, {verdict list: ops}).
OTHER_VALUE = [
    ("msg-oncall-sms", "send_sms", {"to": "{other_phone}"}, {"unrequired": ["sms.send"]}),
    (
        "msg-oncall-sms",
        "post_chat_message",
        {"channel_id": "{support}"},
        {"unrequired": ["chat.post"]},
    ),
    (
        "msg-page-oncall",
        "trigger_page",
        {"dedup_key": "{dedup_key}-2"},
        {"unrequired": ["page.trigger", "webhook.deliver"]},
    ),
    (
        "msg-statuspage-webhook",
        "resolve_page",
        {"page_id": "{other_page_id}"},
        {"forbidden": ["page.resolve"], "unrequired": ["webhook.deliver"]},
    ),
    (
        "msg-maintenance-email",
        "send_email_batch",
        {"reference": "{reference}-B"},
        {"unrequired": ["email.send"] * 4 + ["email_batch.create"]},
    ),
]


@pytest.mark.parametrize(("wf_id", "tool", "change", "expected"), OTHER_VALUE)
def test_resend_with_another_value_is_not_required(
    svc: ServiceClient,
    wf_id: str,
    tool: str,
    change: dict[str, Any],
    expected: dict[str, list[str]],
) -> None:
    wf = svc.workflow(wf_id)
    params = params_for(wf)
    values = {**params, "support": _channel("support")}
    if "phone" in params:
        values["other_phone"] = _other_phone(params)
    gold_then_resend(svc, wf, params, tool, {k: v.format(**values) for k, v in change.items()})
    v = verdict(svc, wf, params)
    assert not v.success
    for kind in ("unrequired", "forbidden"):
        assert ops_of(getattr(v, kind)) == sorted(expected.get(kind, [])), kind
    assert v.duplicates == [] and v.missing == []


@pytest.mark.usefixtures("crashable")
def test_resume_after_a_crash_is_allowed(svc: ServiceClient) -> None:
    wf = svc.workflow("msg-maintenance-email")
    params = params_for(wf)
    args = step_args(wf, "send_email_batch", params)
    svc.call_until_crash("send_email_batch", args, CRASH_MID_BATCH)
    v = verdict(svc, wf, params)  # giving up here leaves a half-sent batch
    assert v.partial and ops_of(v.missing) == ["email.send"] * 3 and not v.harmless
    (batch,) = svc.ok("list_email_batches", {"reference": params["reference"]})
    svc.ok("resume_email_batch", {"batch_id": batch["id"]})
    svc.ok("resume_email_batch", {"batch_id": batch["id"]})  # sent: commits nothing
    assert svc.ops().count("email_batch.resume") == 1
    v = verdict(svc, wf, params)
    assert v.success and v.unrequired == [], v.model_dump()


def test_dedup_resend_is_harmless(svc: ServiceClient) -> None:
    """A re-trigger with the same dedup key joins the page: nothing more is committed."""
    wf = svc.workflow("msg-page-oncall")
    params = params_for(wf)
    gold_then_resend(svc, wf, params, "trigger_page", {"summary": "reworded summary"})
    assert verdict(svc, wf, params).success
