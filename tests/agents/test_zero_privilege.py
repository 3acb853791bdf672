"""Zero privilege, checked: recovery methods use only what every agent gets (the public tool
schemas of `reset`, the task, the observations). A static scan of the agents package for the
harness's
private data, a run on an env that fails any access beyond reset/step, the public tool view
against the catalogue it is published from, reads before writes against fixture history,
the agent's view of a wrapped episode, and per-pair applicability."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

from undobench_gym.agents.methods import (
    METHODS,
    agent_transcript,
    applicable,
    server_idempotency_for,
    workflow_schemas,
    wrap,
)
from undobench_gym.agents.public_tools import from_schema, public_tools
from undobench_gym.agents.recovery import RecoveryWrapper
from undobench_gym.agents.scripted import ScriptedAgent
from undobench_gym.contract.errors import UndoBenchError
from undobench_gym.core import catalog
from undobench_gym.core.pairing import run_episode

AGENTS = Path(__file__).resolve().parents[2] / "undobench_gym" / "agents"
#: Attribute names that reach into the env or the harness's catalogue.
PRIVATE_ATTRS = {
    "_domain",
    "_episode",
    "identity",
    "effect_class",
    "find_workflow",
    "all_workflows",
    "tools_from_openapi",
    "unwrapped",
    "gold_plan",
}
PRIVATE_NAMES = {"ToolSpec", "catalog", "find_workflow", "tools_from_openapi"}
PRIVATE_TEXT = ("x-undobench", "_domain", "_episode")
#: Harness-side code that may read the catalogue: the gold-plan agent, and the CLI's view
#: of a workflow as the schemas it offers, built the public way (ToolSpec.openai_schema()).
ALLOWED_FILES = {"scripted.py", "catalog_view.py"}


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def privileged_uses(source: str) -> list[str]:
    """Every place in `source` that reaches private data, as `line: what`."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        what = None
        if isinstance(node, ast.Attribute) and node.attr in PRIVATE_ATTRS:
            what = f".{node.attr}"
        elif isinstance(node, ast.Name) and node.id in PRIVATE_NAMES:
            what = node.id
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            module = getattr(node, "module", None) or ""
            names = [a.name for a in node.names]
            if "catalog" in module.split(".") or any(
                n.split(".")[-1] in PRIVATE_NAMES for n in names
            ):
                what = f"import {module} {names}"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            hit = [t for t in PRIVATE_TEXT if t in node.value]
            what = f"string {hit[0]!r}" if hit else None
        if what is not None:
            found.append(f"{getattr(node, 'lineno', '?')}: {what}")
    return found


def test_the_scan_finds_privileged_access() -> None:
    """The checker itself: each kind of private access in a snippet is reported."""
    snippet = (
        "from undobench_gym.core.catalog import ToolSpec\n"
        "def f(env, spec):\n"
        "    tools = env.unwrapped._domain.tools\n"
        "    return spec.identity, spec.effect_class, getattr(env, '_episode')\n"
        "def workflow_schemas():\n"
        "    from undobench_gym import catalog\n"
        "    return catalog.find_workflow('x')\n"
    )
    found = privileged_uses(snippet)
    for what in (
        "import",
        ".unwrapped",
        "._domain",
        ".identity",
        ".effect_class",
        "'_episode'",
        ".find_workflow",
    ):
        assert any(what in f for f in found), (what, found)


def test_agents_reach_no_private_catalogue_data() -> None:
    files = sorted(AGENTS.rglob("*.py"))
    assert len(files) >= 15, files  # the scan sees the package
    offenders = {}
    for path in files:
        if path.name in ALLOWED_FILES and path.parent == AGENTS:
            continue
        found = privileged_uses(path.read_text())
        if found:
            offenders[str(path.relative_to(AGENTS))] = found
    assert offenders == {}


# ---- the public tool view against the catalogue it is published from ------------------


def test_public_view_matches_what_the_catalogue_publishes() -> None:
    """Hints map to effect classes (readOnly; idempotent+destructive = set; idempotent =
    create_unique; destructive = irreversible_send; neither = additive), and the route and
    the argument placement are recovered from the schema alone."""
    checked = 0
    for name in catalog.DOMAINS:
        for spec in catalog.domain(name).tools.values():
            for tool_spec in (spec, spec.with_key()):
                tool = from_schema(tool_spec.openai_schema())
                assert tool is not None
                assert (tool.name, tool.method, tool.path) == (
                    tool_spec.name,
                    tool_spec.method,
                    tool_spec.path,
                )
                assert tool.read_only == tool_spec.read_only
                assert tool.effect == (
                    "read_only" if tool_spec.read_only else tool_spec.effect_class
                ), tool_spec.name
                assert tool.compensating == tool_spec.compensation
                assert tool.accepts_key == tool_spec.accepts_key
                assert tool.path_params == tool_spec.path_params
                assert set(tool.query_params) == set(tool_spec.query_params)
                assert set(tool.body_params) == set(tool_spec.body_params)
                checked += 1
    assert checked > 100


def test_missing_annotations_take_the_cautious_mcp_defaults() -> None:
    fn = {"name": "do_it", "parameters": {"type": "object", "properties": {"x": {}}}}
    tool = from_schema({"type": "function", "function": fn})
    assert tool is not None
    assert (tool.read_only, tool.destructive, tool.idempotent) == (False, True, False)
    assert tool.effect == "irreversible_send" and not tool.routed
    assert from_schema({"function": {"name": "finish"}}) is None
    assert public_tools([None, {"type": "function"}, {"function": fn}]).keys() == {"do_it"}


# ---- a wrapped run on an env that refuses everything but reset/step --------------------


class Sealed(gym.Env[str, str]):
    """The env as a wrapper may see it: reset, step, close and the spaces. Any other
    attribute (the catalogue, the episode, the gold plan) fails the test; AssertionError,
    not AttributeError, so that no hasattr/getattr default can swallow it."""

    PUBLIC = frozenset(
        {
            "reset",
            "step",
            "close",
            "render",
            "action_space",
            "observation_space",
            "metadata",
            "spec",
            "render_mode",
            "unwrapped",
            "get_wrapper_attr",
            "has_wrapper_attr",
            "set_wrapper_attr",
            "_Sealed__env",
        }
    )

    def __init__(self, env: gym.Env[str, str]) -> None:
        self.__env = env
        self.action_space = getattr(env, "action_space", None)  # type: ignore[assignment]
        self.observation_space = getattr(env, "observation_space", None)  # type: ignore[assignment]

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("__") or name in Sealed.PUBLIC:
            return object.__getattribute__(self, name)
        raise AssertionError(f"a wrapper read {name!r} of the env")

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[str, dict[str, Any]]:
        return self.__env.reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[str, Any, bool, bool, dict[str, Any]]:
        return self.__env.step(action)


def test_the_seal_holds() -> None:
    class Bare(gym.Env[str, str]):
        pass

    sealed = Sealed(Bare())
    with pytest.raises(AssertionError, match="_domain"):
        _ = wrap(sealed, "B6").unwrapped._domain  # type: ignore[attr-defined]


def _sealed_episode(env_for: Any, item: str, method: str) -> tuple[dict[str, Any], Any]:
    wf_id, _, sc_id = item.partition(":")
    workflow = catalog.find_workflow(wf_id)
    real = env_for(workflow.domain, server_idempotency_for(method))
    env = wrap(Sealed(real), method)
    obs, _ = env.reset(seed=1, options={"workflow": wf_id, "fault": sc_id})
    agent = ScriptedAgent()
    agent.reset(real.gold_plan())  # the harness gives the plan; the wrapper never sees it
    for _ in range(40):
        obs, _r, terminated, truncated, info = env.step(agent.act(obs))
        if terminated or truncated:
            return info, env
    raise AssertionError("the episode did not end")


# What the sealed run must give on the fault episode: (success, duplicates).
SEALED = {
    "pay-charge-customer:lost-ack": {
        "B0": (False, 1),
        "B2": (True, 0),
        "B3": (False, 1),
        "B5": (True, 0),
        "B5-P": (True, 0),
        "B6": (True, 0),
    },
    # renew_subscription takes no key and the subscription has earlier invoices: only a
    # read before the renewal tells the new invoice from history.
    "pay-renew-subscription:lost-ack": {"B5-P": (True, 0), "B6": (True, 0)},
}
SEALED_CASES = [(item, m) for item, row in SEALED.items() for m in row]


@pytest.mark.parametrize(
    ("item", "method"), SEALED_CASES, ids=[f"{i}-{m}" for i, m in SEALED_CASES]
)
def test_methods_recover_on_a_sealed_env(env_for: Any, item: str, method: str) -> None:
    info, env = _sealed_episode(env_for, item, method)
    verdict = info["verdict"]
    assert verdict["fault_fired"]
    assert (verdict["success"], len(verdict["duplicates"])) == SEALED[item][method], verdict
    assert info["agent_transcript"] == env.agent_transcript()


# ---- reads before writes: history is not the effect -----------------------------------


class Ledger(gym.Env[str, str]):
    """A stub payments service with history: `create_charge` and `list_charges` from the
    real public schemas; the first create is lost on the wire, before the service
    (`commit=False`) or after it committed (`commit=True`)."""

    def __init__(self, *, commit: bool) -> None:
        tools = catalog.domain("payments").tools
        self.schemas = [tools[n].openai_schema() for n in ("create_charge", "list_charges")]
        self.commit = commit
        self.charges: list[dict[str, Any]] = []
        self.calls: list[str] = []

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[str, dict[str, Any]]:
        # An earlier charge with the very same customer, amount, currency and text.
        self.charges = [{"id": "ch_old", **CHARGE, "status": "succeeded"}]
        self.calls = []
        return "{}", {"tools": self.schemas, "task_instance": "t"}

    def step(self, action: Any) -> tuple[str, float, bool, bool, dict[str, Any]]:
        tool, args = action["tool"], action["arguments"]
        self.calls.append(tool)
        if tool == "list_charges":
            rows = [c for c in self.charges if c["customer_id"] == args.get("customer_id")]
            return json.dumps({"tool": tool, "status": 200, "body": rows}), 0.0, False, False, {}
        first = self.calls.count("create_charge") == 1
        if first and not self.commit:
            return self._lost(tool)
        row = {"id": f"ch_{len(self.charges)}", **CHARGE, "status": "succeeded"}
        self.charges.append(row)
        if first:
            return self._lost(tool)
        return json.dumps({"tool": tool, "status": 201, "body": row}), 0.0, False, False, {}

    @staticmethod
    def _lost(tool: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        err = {"type": "transport", "kind": "connection_reset"}
        return json.dumps({"tool": tool, "error": err}), 0.0, False, False, {}


CHARGE = {"customer_id": "cus_1", "amount": 500, "currency": "usd", "description": "INV-1"}


@pytest.mark.parametrize("method", ["B6", "B5-P"])
@pytest.mark.parametrize("commit", [False, True], ids=["dropped", "committed"])
def test_history_is_not_taken_for_the_effect(method: str, commit: bool) -> None:
    stub = Ledger(commit=commit)
    env = wrap(stub, method)
    env.reset()
    obs = json.loads(env.step({"tool": "create_charge", "arguments": dict(CHARGE)})[0])
    new = [c for c in stub.charges if c["id"] != "ch_old"]
    assert len(new) == 1  # committed exactly once either way: no duplicate, nothing missing
    if commit:
        # Read before, lost answer, read again: a new matching row, so not re-sent.
        assert stub.calls == ["list_charges", "create_charge", "list_charges"]
        assert obs["recovery"]["committed"] is True and obs["body"]["id"] == new[0]["id"]
    else:
        # The old matching charge was there before the call: absent, so re-sent.
        assert stub.calls == ["list_charges", "create_charge", "list_charges", "create_charge"]
        assert obs["status"] == 201


# ---- what the agent saw -----------------------------------------------------------------


def test_agent_view_flags_what_the_wrapper_answered() -> None:
    stub = Ledger(commit=True)
    env = wrap(stub, "B6")
    env.reset()
    env.step({"tool": "list_charges", "arguments": {"customer_id": "cus_1"}})
    env.step({"tool": "create_charge", "arguments": dict(CHARGE)})
    view = agent_transcript(env)
    assert view is not None and [v["step"] for v in view] == [1, 2]
    assert [(v["answered_by_wrapper"], v["env_steps"]) for v in view] == [(False, 1), (True, 3)]
    assert view[1]["action"] == {"tool": "create_charge", "arguments": CHARGE}
    assert json.loads(view[1]["observation"])["recovery"]["verified_by"] == "list_charges"
    env.reset()
    assert agent_transcript(env) == []  # per episode
    assert agent_transcript(stub) is None  # bare: the env's transcript is what it saw
    # Nested stacks: the outermost wrapper's view is the agent's (B2's keys are not in it).
    keyed = wrap(Ledger(commit=True), "B2")
    keyed.reset()
    keyed.step({"tool": "create_charge", "arguments": dict(CHARGE)})
    assert isinstance(keyed, RecoveryWrapper)
    view = agent_transcript(keyed)
    assert view is not None and view[0]["action"]["arguments"] == CHARGE
    assert view[0]["env_steps"] == 1  # B2 sends once; its inner B0 did the retry


def test_agent_view_of_b1_replays_and_b5_journal(env_for: Any) -> None:
    for method, replayed in (("B1", 2), ("B5", 1)):
        env = wrap(env_for("payments"), method)
        run_episode(
            env, ScriptedAgent(), seed=1, workflow="pay-charge-customer", fault="worker-crash"
        )
        view = agent_transcript(env)
        assert view is not None
        answered = [v for v in view if v["answered_by_wrapper"]]
        assert len(answered) == replayed, view
        assert all(v["env_steps"] == 0 for v in answered)
        # The agent's last step is the finish; what it saw there came from the env.
        assert view[-1]["action"]["tool"] == "finish" and not view[-1]["answered_by_wrapper"]


# ---- applicability per pair -------------------------------------------------------------


def test_applicable_per_pair_from_public_schemas() -> None:
    charge = workflow_schemas("pay-charge-customer")
    renew = workflow_schemas("pay-renew-subscription")
    payout = workflow_schemas("pay-split-payout")
    retract = workflow_schemas("tix-retract-mistaken-page")
    # create_refund is offered (the charge's inverse, for repair): B3 applies too
    assert all(applicable(m, charge, "create_charge") for m in METHODS)
    assert not applicable("B3", renew, "renew_subscription")  # nothing undoes a renewal
    assert not applicable("B2", renew, "renew_subscription")  # takes no key
    assert applicable(
        "B2-K", workflow_schemas("pay-renew-subscription", "all"), "renew_subscription"
    )
    assert applicable("B6", renew, "renew_subscription")  # list_invoices shows a renewal
    assert applicable("B6", payout, "create_payout")
    assert not applicable("B6", payout, "resume_payout")  # nothing shows a resume
    assert not applicable("B5-P", payout, "resume_payout")
    assert applicable("B5", payout, "resume_payout")
    assert applicable("B3", retract, "page_responder")  # retract_page undoes a page
    assert not applicable("B3", retract, "retract_page")  # nothing undoes a retraction
    # A read-only or unknown target is no fault a method recovers from; bare always applies.
    assert [m for m in METHODS if applicable(m, charge, "get_customer")] == ["bare"]
    assert [m for m in METHODS if applicable(m, charge, None)] == ["bare"]
    with pytest.raises(UndoBenchError):
        applicable("B4", charge, "create_charge")
