"""Recovery methods on real stacks: distinct verdicts on the same faults, read from the wire
and the commit logs; paired-prefix equivalence; malformed actions; and the derivation rules."""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import pytest

from undobench_gym.agents.methods import (
    METHODS,
    applicable_methods,
    server_idempotency_for,
    workflow_schemas,
    wrap,
)
from undobench_gym.agents.public_tools import public_tools
from undobench_gym.agents.recovery.checkpoint import CheckpointResume
from undobench_gym.agents.recovery.derive import compensation_for, compensations, verifiers_for
from undobench_gym.agents.scripted import ScriptedAgent
from undobench_gym.core import catalog
from undobench_gym.core.pairing import run_episode, run_pair

# (success, duplicates, missing, physical, committed, reissued_after_commit) of the fault
# episode, scripted gold-plan agent, seed 1; no cell has an unrequired effect. Why each row
# is what it is: docs/methods.md. B5-P and B6 read before every mutation (the baseline that
# tells a new effect from history): one read per derived verifier, in both episodes.
EXPECTED: dict[str, dict[str, tuple[bool, int, int, int, int, int]]] = {
    # The charge commits, its answer is lost; create_charge takes keys natively.
    "pay-charge-customer:lost-ack": {
        "bare": (True, 0, 0, 2, 1, 0),  # gives up, but the charge is there: state is right
        "B0": (False, 1, 0, 3, 2, 1),  # blind re-send: a second charge
        "B1": (True, 0, 0, 2, 1, 0),  # checkpointing does not retry
        "B2": (True, 0, 0, 3, 1, 1),  # re-sent with the same key: the server replays
        "B2-K": (True, 0, 0, 3, 1, 1),
        "B3": (False, 1, 0, 3, 2, 1),  # B0's retries; nothing failed for good
        "B5": (True, 0, 0, 3, 1, 1),  # intent id as the key
        "B5-P": (True, 0, 0, 4, 1, 0),  # list_charges before and after: a new charge
        "B6": (True, 0, 0, 4, 1, 0),
    },
    # Seed 1's hidden coin: the charge did NOT commit behind the same visible error.
    "pay-charge-customer:ambiguous": {
        "bare": (False, 0, 1, 2, 0, 0),
        "B0": (True, 0, 0, 3, 1, 0),
        "B1": (False, 0, 1, 2, 0, 0),
        "B2": (True, 0, 0, 3, 1, 0),
        "B2-K": (True, 0, 0, 3, 1, 0),
        "B3": (True, 0, 0, 3, 1, 0),
        "B5": (True, 0, 0, 3, 1, 0),
        "B5-P": (True, 0, 0, 5, 1, 0),  # read, call, read (nothing new), re-send
        "B6": (True, 0, 0, 5, 1, 0),
    },
    # renew_subscription takes no key: only server keys (B2-K) or reading back save it.
    "pay-renew-subscription:lost-ack": {
        "bare": (True, 0, 0, 2, 1, 0),
        "B0": (False, 1, 0, 3, 2, 1),
        "B1": (True, 0, 0, 2, 1, 0),
        "B2": (False, 1, 0, 3, 2, 1),
        "B2-K": (True, 0, 0, 3, 1, 1),
        "B3": (False, 1, 0, 3, 2, 1),
        "B5": (False, 1, 0, 3, 2, 1),  # no key, no reads: bounded retry duplicates
        "B5-P": (True, 0, 0, 4, 1, 0),  # list_invoices shows a new invoice
        "B6": (True, 0, 0, 4, 1, 0),
    },
    # The renewal is dropped before the service: nothing committed, so re-send it.
    "pay-renew-subscription:pre-reset": {
        "bare": (False, 0, 1, 2, 0, 0),
        "B0": (True, 0, 0, 3, 1, 0),
        "B1": (False, 0, 1, 2, 0, 0),
        "B2": (True, 0, 0, 3, 1, 0),
        "B2-K": (True, 0, 0, 3, 1, 0),
        "B3": (True, 0, 0, 3, 1, 0),
        "B5": (True, 0, 0, 3, 1, 0),
        "B5-P": (True, 0, 0, 5, 1, 0),  # no invoice beyond the baseline: re-sent
        "B6": (True, 0, 0, 5, 1, 0),
    },
    # The credit (second adjust_balance, no key) commits and its answer is lost.
    "db-transfer-funds:credit-lost-ack": {
        "bare": (True, 0, 0, 3, 2, 0),
        "B0": (False, 1, 0, 4, 3, 1),
        "B1": (True, 0, 0, 3, 2, 0),
        "B2": (False, 1, 0, 4, 3, 1),
        "B2-K": (True, 0, 0, 4, 2, 1),
        "B3": (False, 1, 0, 4, 3, 1),
        "B5": (False, 1, 0, 4, 3, 1),
        "B5-P": (True, 0, 0, 8, 2, 0),  # list_audit shows a new audit row for the credit
        "B6": (True, 0, 0, 8, 2, 0),
    },
    # The bonus adjustment after the tier change commits; its answer is lost.
    "db-upgrade-tier:bonus-lost-ack": {
        "bare": (True, 0, 0, 3, 2, 0),
        "B0": (False, 1, 0, 4, 3, 1),
        "B1": (True, 0, 0, 3, 2, 0),
        "B2": (False, 1, 0, 4, 3, 1),
        "B2-K": (True, 0, 0, 4, 2, 1),
        "B3": (False, 1, 0, 4, 3, 1),
        "B5": (False, 1, 0, 4, 3, 1),
        "B5-P": (True, 0, 0, 8, 2, 0),  # the tier change's audit row is in the baseline
        "B6": (True, 0, 0, 8, 2, 0),
    },
    # The chat message after the SMS commits; its answer is lost (post takes no key).
    "msg-oncall-sms:chat-lost-ack": {
        "bare": (True, 0, 0, 3, 2, 0),
        "B0": (False, 1, 0, 4, 3, 1),
        "B1": (True, 0, 0, 3, 2, 0),
        "B2": (False, 1, 0, 4, 3, 1),
        "B2-K": (True, 0, 0, 4, 2, 1),
        "B3": (False, 1, 0, 4, 3, 1),
        "B5": (False, 1, 0, 4, 3, 1),
        "B5-P": (True, 0, 0, 6, 2, 0),  # list_chat_messages shows the new message
        "B6": (True, 0, 0, 6, 2, 0),
    },
    # The service exits after the first of three transfers; the payout stays `processing`.
    "pay-split-payout:crash-mid-batch": {
        "bare": (False, 0, 2, 1, 2, 0),
        "B0": (False, 2, 0, 2, 6, 0),  # a second payout; its first recipient paid twice
        "B1": (False, 0, 2, 1, 2, 0),
        "B2": (False, 2, 0, 2, 6, 0),  # create_payout takes no key
        "B2-K": (False, 0, 2, 2, 2, 0),  # 409 idempotency_interrupted: same key, refused
        "B3": (False, 2, 0, 2, 6, 0),  # the retry "succeeds": no failure, no compensation
        "B5": (False, 2, 0, 2, 6, 0),
        # The probe sees the new payout, `processing`: not re-sent, finished with the
        # public resume_payout (resumingHint), which pays the two transfers still owed.
        "B5-P": (True, 0, 0, 4, 5, 0),
        "B6": (True, 0, 0, 4, 5, 0),
    },
    # Acknowledged, then the worker dies: the harness restarts the agent from the task start.
    "pay-charge-customer:worker-crash": {
        "bare": (False, 1, 0, 4, 2, 1),  # the restarted agent charges again
        "B0": (False, 1, 0, 4, 2, 1),
        "B1": (True, 0, 0, 2, 1, 0),  # both steps answered from the harness-side journal
        "B2": (True, 0, 0, 4, 1, 1),  # same content, same key: the server replays
        "B2-K": (True, 0, 0, 4, 1, 1),
        "B3": (False, 1, 0, 4, 2, 1),
        "B5": (True, 0, 0, 3, 1, 0),  # the get is re-sent, the acked intent is not
        "B5-P": (True, 0, 0, 4, 1, 0),
        "B6": (False, 1, 0, 6, 2, 1),  # no error to verify: B6 never acts
    },
}
CASES = [(sc, m) for sc in EXPECTED for m in METHODS]


def _pair(env_for: Any, item: str, method: str, agent: Any = None, seed: int = 1) -> Any:
    wf_id, _, sc_id = item.partition(":")
    workflow = catalog.find_workflow(wf_id)
    env = wrap(env_for(workflow.domain, server_idempotency_for(method)), method)
    return run_pair(
        env,
        agent or ScriptedAgent(),
        workflow=workflow,
        scenario=workflow.scenario(sc_id),
        seed=seed,
        method=method,
        runtime="process",
    )


def _fault(env_for: Any, item: str, method: str) -> tuple[dict[str, Any], gym.Env[str, str]]:
    wf_id, _, sc_id = item.partition(":")
    workflow = catalog.find_workflow(wf_id)
    env = wrap(env_for(workflow.domain, server_idempotency_for(method)), method)
    ep = run_episode(env, ScriptedAgent(), seed=1, workflow=wf_id, fault=sc_id)
    return ep, env


def test_every_contract_method_is_available() -> None:
    assert METHODS == ("bare", "B0", "B1", "B2", "B2-K", "B3", "B5", "B5-P", "B6")


#: Where the last column's re-issues are safe: the retry carried the committed attempt's
#: Idempotency-Key on a route that honours it, so it could not take effect twice.
SAFE_RETRIES = {
    ("pay-charge-customer:lost-ack", "B2"),
    ("pay-charge-customer:lost-ack", "B2-K"),
    ("pay-charge-customer:lost-ack", "B5"),
    ("pay-charge-customer:worker-crash", "B2"),
    ("pay-charge-customer:worker-crash", "B2-K"),
    ("pay-renew-subscription:lost-ack", "B2-K"),
    ("db-transfer-funds:credit-lost-ack", "B2-K"),
    ("db-upgrade-tier:bonus-lost-ack", "B2-K"),
    ("msg-oncall-sms:chat-lost-ack", "B2-K"),
}


@pytest.mark.parametrize(("item", "method"), CASES, ids=[f"{s}-{m}" for s, m in CASES])
def test_verdicts_and_prefix_equivalence(env_for: Any, item: str, method: str) -> None:
    pair = _pair(env_for, item, method)
    assert pair["prefix_equivalent"], (pair["control"]["transcript"], pair["fault"]["transcript"])
    assert pair["control"]["success"]
    fault = pair["fault"]
    e = fault["effects"]
    got = (
        fault["success"],
        e["duplicates"],
        e["missing"],
        e["physical"],
        e["committed"],
        e["reissued_after_commit"] + e["safe_reissues"],
    )
    assert fault["fault_fired"]
    assert got == EXPECTED[item][method], [(w["tool"], w["status"]) for w in fault["wire"]]
    safe = (item, method) in SAFE_RETRIES
    assert e["safe_reissues"] == (got[-1] if safe else 0), e
    assert e["reissued_after_commit"] == (0 if safe else got[-1]), e
    assert fault["verdict"]["unrequired"] == []
    # Wire and commit log agree with the counts the verdict reports.
    assert len(fault["wire"]) == e["physical"] and len(fault["commit_log"]) == e["committed"]


def _tools(ep: dict[str, Any]) -> list[str]:
    return [w["tool"] for w in ep["wire"]]


def test_verification_reads_through_the_proxy_and_does_not_resend(env_for: Any) -> None:
    ep, _ = _fault(env_for, "pay-charge-customer:lost-ack", "B6")
    # The read before the charge is the baseline; the read after shows a new charge.
    assert _tools(ep) == ["get_customer", "list_charges", "create_charge", "list_charges"]
    assert [r["op"] for r in ep["commit_log"]] == ["charge.create"]
    assert ep["transcript"][-2]["observation"]["status"] == 200  # the read, via the proxy
    ep, _ = _fault(env_for, "db-transfer-funds:credit-lost-ack", "B6")
    assert _tools(ep) == [
        "get_account",
        *("list_audit", "get_account", "adjust_balance"),  # the debit, read before
        *("list_audit", "get_account", "adjust_balance"),  # the credit, read before
        "list_audit",  # a new audit row of the credited account: found, not re-sent
    ]
    # The probe finds the payout half-paid (`processing`): it is not re-sent but finished
    # with the public resume tool, and the agent gets the paid payout.
    ep, _ = _fault(env_for, "pay-split-payout:crash-mid-batch", "B5-P")
    assert _tools(ep) == ["list_payouts", "create_payout", "list_payouts", "resume_payout"]
    assert ep["verdict"]["partial"] == [] and ep["success"]
    (answer,) = [t for t in ep["agent_transcript"] if t["action"]["tool"] == "create_payout"]
    seen = json.loads(answer["observation"])
    assert seen["body"]["status"] == "paid" and seen["recovery"]["resumed_with"] == "resume_payout"


def test_b5_resends_with_the_intent_key(env_for: Any) -> None:
    ep, env = _fault(env_for, "pay-charge-customer:lost-ack", "B5")
    assert _tools(ep) == ["get_customer", "create_charge", "create_charge"]
    journal = env.journal  # type: ignore[attr-defined]
    assert [(i.tool, i.state, i.attempts) for i in journal] == [("create_charge", "acked", 2)]
    assert [r["idempotency_key"] for r in ep["commit_log"]] == [journal[0].key]
    assert journal[0].key.startswith("intent_")


def test_b1_and_b5_after_a_worker_crash(env_for: Any) -> None:
    ep, env = _fault(env_for, "pay-charge-customer:worker-crash", "B1")
    assert _tools(ep) == ["get_customer", "create_charge"]
    assert isinstance(env, CheckpointResume) and env.replayed == 2
    ep, _ = _fault(env_for, "pay-charge-customer:worker-crash", "B5")
    assert _tools(ep) == ["get_customer", "create_charge", "get_customer"]


class Twice:
    """Means two identical charges: B2's content keys merge them, B5's intents do not."""

    name = "twice"

    def reset(self, plan: list[dict[str, Any]]) -> None:
        self.charge, self.n = plan[1], 0

    def act(self, observation: str) -> dict[str, Any]:
        self.n += 1
        return self.charge if self.n <= 2 else {"tool": "finish", "arguments": {"status": "done"}}


def test_intents_count_occurrences_where_content_keys_merge(env_for: Any) -> None:
    counts = {}
    for method in ("B2", "B5"):
        env = wrap(env_for("payments"), method)
        ep = run_episode(env, Twice(), seed=3, workflow="pay-charge-customer", fault=None)
        counts[method] = ep["effects"]["committed"]
    assert counts == {"B2": 1, "B5": 2}


class Scripted:
    """Plays fixed actions, then finishes."""

    name = "fixed"

    def __init__(self, actions: list[Any]) -> None:
        self.actions = actions
        self.seen: list[dict[str, Any]] = []

    def reset(self, plan: list[dict[str, Any]]) -> None:
        self.i = 0

    def act(self, observation: str) -> Any:
        self.seen.append(json.loads(observation))
        self.i += 1
        return (
            self.actions[self.i - 1]
            if self.i <= len(self.actions)
            else {"tool": "finish", "arguments": {"status": "done"}}
        )


def test_saga_compensates_with_real_calls(env_for: Any) -> None:
    env = wrap(env_for("ticketing"), "B3")
    env.reset(seed=1, options={"workflow": "tix-retract-mistaken-page"})
    p = env.unwrapped._episode.params  # type: ignore[attr-defined]
    agent = Scripted(
        [
            {
                "tool": "page_responder",
                "arguments": {
                    "incident_id": p["incident_id"],
                    "responder_id": p["right_id"],
                    "message": p["message"],
                },
            },
            {
                "tool": "assign_incident",
                "arguments": {"incident_id": p["incident_id"], "responder_id": "rsp_missing"},
            },
        ]
    )
    ep = run_episode(env, agent, seed=1, workflow="tix-retract-mistaken-page", fault=None)
    assert [(w["tool"], w["status"]) for w in ep["wire"]] == [
        ("page_responder", 201),
        ("assign_incident", 404),
        ("retract_page", 201),
    ]
    page_id = ep["transcript"][0]["observation"]["body"]["id"]
    assert [(r["op"], r["compensation"]) for r in ep["commit_log"]] == [
        ("page.send", False),
        ("page.retract", True),
    ]
    assert page_id in ep["commit_log"][1]["identity"]
    # The agent got the refusal with a note of what was undone.
    seen = agent.seen[2]
    assert seen["status"] == 404 and seen["recovery"]["compensated"][0]["with"] == "retract_page"
    # pay-charge-customer offers create_refund (the charge's inverse): after a definitive
    # failure B3 refunds the charge it made, with a real call.
    env = wrap(env_for("payments"), "B3")
    env.reset(seed=1, options={"workflow": "pay-charge-customer"})
    p = env.unwrapped._episode.params  # type: ignore[attr-defined]
    charge = {
        "tool": "create_charge",
        "arguments": {
            "customer_id": p["customer_id"],
            "amount": 500,
            "currency": "usd",
            "description": "first",
        },
    }
    missing = {"tool": "create_charge", "arguments": {**charge["arguments"], "customer_id": "x"}}
    agent = Scripted([charge, missing])
    ep = run_episode(env, agent, seed=1, workflow="pay-charge-customer", fault=None)
    assert _tools(ep) == ["create_charge", "create_charge", "create_refund"]


GARBAGE: list[Any] = [
    "not json at all",
    42,
    None,
    {"tool": "drop_database", "arguments": {}},
    {"tool": "create_charge", "arguments": "{broken"},
    {"tool": "create_charge", "arguments": {"customer_id": 5, "amount": "ten"}},
    {"arguments": {}},
]


class Noisy:
    """The scripted agent with a malformed action before every real one (LLM-style garbage)."""

    name = "noisy"

    def __init__(self) -> None:
        self.inner = ScriptedAgent()

    def reset(self, plan: list[dict[str, Any]]) -> None:
        self.inner.reset(plan)
        self.turn, self.last = 0, ""

    def act(self, observation: str) -> Any:
        self.turn += 1
        if self.turn % 2:
            self.last = observation
            return GARBAGE[(self.turn // 2) % len(GARBAGE)]
        return self.inner.act(self.last)


@pytest.mark.parametrize("method", METHODS)
def test_wrappers_pass_malformed_actions_through(env_for: Any, method: str) -> None:
    for item in ("pay-charge-customer:lost-ack", "pay-charge-customer:worker-crash"):
        pair = _pair(env_for, item, method, agent=Noisy())
        fault = pair["fault"]
        obs = [t["observation"] for t in fault["transcript"]]
        bad = [o for o in obs if o.get("error", {}).get("type") == "invalid_action"]
        assert len(bad) >= 2  # the env answered the garbage; the wrappers passed it on
        clean = EXPECTED[item][method]
        e = fault["effects"]
        assert (fault["success"], e["duplicates"], e["missing"], e["physical"]) == clean[:4]
        assert pair["prefix_equivalent"]


# ---- derivation rules (no stack) ------------------------------------------------------


def _domain_tools(domain: str) -> dict[str, Any]:
    """Every tool of a domain, as its public schema shows it."""
    return public_tools(t.openai_schema() for t in catalog.domain(domain).tools.values())


def _workflow_tools(workflow: str) -> dict[str, Any]:
    return public_tools(workflow_schemas(workflow))


def test_verifiers_are_derived_from_paths_and_arguments() -> None:
    pay = _workflow_tools("pay-charge-customer")
    assert [(v.tool, v.binds) for v in verifiers_for(pay["create_charge"], pay)] == [
        ("list_charges", ("customer_id",))
    ]
    renew = _workflow_tools("pay-renew-subscription")
    # get_subscription reads the resource renewed, which exists either way: not a verifier.
    assert [v.tool for v in verifiers_for(renew["renew_subscription"], renew)] == ["list_invoices"]
    db = _workflow_tools("db-transfer-funds")
    assert [v.tool for v in verifiers_for(db["adjust_balance"], db)] == [
        "list_audit",
        "get_account",
    ]
    payout = _workflow_tools("pay-split-payout")
    assert verifiers_for(payout["resume_payout"], payout) == []
    # A set reads its addressed item first, and needs an argument left to compare.
    tier = _workflow_tools("db-upgrade-tier")
    assert [v.tool for v in verifiers_for(tier["set_account_tier"], tier)] == [
        "get_account",
        "list_audit",
    ]


def test_compensations_are_derived_from_the_public_schemas() -> None:
    pay = compensation_for(_domain_tools("payments")["create_charge"], _domain_tools("payments"))
    assert pay is not None and (pay.tool, pay.from_id, pay.by_name) == (
        "create_refund",
        ("charge_id",),
        ("amount",),
    )
    assert pay.arguments({"amount": 700}, {"id": "ch_1", "amount": 700}) == {
        "charge_id": "ch_1",
        "amount": 700,
    }
    tix = compensations(_domain_tools("ticketing"))
    assert tix["page_responder"].tool == "retract_page"
    assert tix["page_responder"].notes == ("message",)  # prose: a saga note, not the page text
    assert "open_incident" not in tix  # reopening is not undoing a creation
    assert compensations(_domain_tools("crm"))["enroll_contact"].tool == "unenroll_contact"
    cloud = compensations(_domain_tools("cloud"))
    assert cloud["register_endpoint"].tool == "deregister_endpoint"
    assert cloud["register_endpoint"].rule == "rest-delete"
    # Set effects get none: undoing one needs the value it replaced.
    assert all(_domain_tools("cloud")[f].effect != "set" for f in cloud)


def test_applicable_methods_follow_capabilities() -> None:
    every = set(METHODS)
    assert set(applicable_methods("pay-charge-customer")) == every  # create_refund offered
    assert set(applicable_methods("pay-renew-subscription")) == every - {"B2", "B3"}
    assert "B3" in applicable_methods("tix-retract-mistaken-page")
    for workflow in catalog.all_workflows():
        methods = applicable_methods(workflow)
        assert {"bare", "B0", "B1", "B2-K", "B5"} <= set(methods) <= every


# ---- B6's safe fallback, on a stub env (no stack) -------------------------------------


class Unreachable(gym.Env[str, str]):
    """Every call is lost on the wire; reads answer an empty list."""

    def __init__(self, workflow: str) -> None:
        self.spec_ = catalog.find_workflow(workflow)
        self._domain = catalog.domain(self.spec_.domain)
        self.calls: list[str] = []

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[str, dict[str, Any]]:
        tools = [self._domain.tools[n].openai_schema() for n in self.spec_.tools]
        return "{}", {"tools": tools, "task_instance": "t"}

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        tool = action["tool"]
        self.calls.append(tool)
        if self._domain.tools[tool].read_only:
            return json.dumps({"tool": tool, "status": 200, "body": []}), 0.0, False, False, {}
        err = {"type": "transport", "kind": "connection_reset"}
        return json.dumps({"tool": tool, "error": err}), 0.0, False, False, {}


def test_b6_does_not_resend_what_it_cannot_verify() -> None:
    stub = Unreachable("pay-split-payout")
    env = wrap(stub, "B6")
    env.reset()
    obs = json.loads(env.step({"tool": "resume_payout", "arguments": {"payout_id": "po_1"}})[0])
    assert stub.calls == ["resume_payout"]
    assert obs["recovery"]["committed"] is None and "not re-sent" in obs["recovery"]["note"]
    stub.calls.clear()
    args = {"reference": "r", "currency": "usd", "recipients": [{"account": "a", "amount": 1}]}
    env.step({"tool": "create_payout", "arguments": args})
    # Read before, then read back (absent), re-send, twice, then give the unknown outcome
    # to the agent.
    assert stub.calls == ["list_payouts"] + ["create_payout", "list_payouts"] * 2 + [
        "create_payout"
    ]
