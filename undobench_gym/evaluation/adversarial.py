"""The adversarial agent suite: behaviours that real agents show after a fault, each with the
verdict the oracles must give, run on every workflow and scenario where it applies.

A referee's question for every verdict: which behaviour of a real agent could fool it? The
behaviours: re-send with reworded free text after a lost acknowledgement; re-send after a
4xx; read before the plan; give up half-way; verify (read) then re-send anyway; re-send
with a fresh idempotency key (and, as the negative control, with the same key). Each
expectation is derived from what happened on the wire (the fault's mechanism, the statuses
the agent saw) and the endpoint's effect class, never from the oracle's own output; a
mismatch is a false positive (harm reported where there is none) or a false negative.

`python -m undobench_gym.evaluation.adversarial --markdown` prints the table of
docs/validity.md.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from undobench_gym.agents.scripted import ScriptedAgent, is_failure, resolve_refs
from undobench_gym.contract.specs import Boundary, FaultScenario, Verdict, WorkflowSpec
from undobench_gym.core.catalog import ToolSpec, all_workflows, domain
from undobench_gym.core.env import UndoBenchEnv
from undobench_gym.core.pairing import run_episode
from undobench_gym.core.schema import FaultOutcome
from undobench_gym.evaluation.records import EpisodeLike, as_episode, verdict_of

DUPLICABLE = ("additive", "irreversible_send")
KEY = "idempotency_key"
SEED = 1
MAX_STEPS = 40
BEHAVIOURS = (
    "reworded_resend",
    "resend_after_4xx",
    "read_first",
    "give_up",
    "verify_then_resend",
    "fresh_key_resend",
    "same_key_resend",
)
RESENDS = ("reworded_resend", "verify_then_resend", "fresh_key_resend", "same_key_resend")
MISSING_ID = "zz-missing-0000"


def _reword(args: dict[str, Any], spec: ToolSpec) -> dict[str, Any]:
    """Free text (a string argument outside the effect's identity and the route's address)
    gets a note appended, as LLM agents do when they retry."""
    addressed = set(spec.identity) | set(spec.path_params) | {KEY}
    out = dict(args)
    for k, v in args.items():
        if k not in addressed and isinstance(v, str) and not k.endswith("_id"):
            out[k] = f"{v} (retry after a connection error)"
    return out


@dataclass
class ReactiveAgent:
    """Follows the gold plan like the scripted agent, but reacts to the first failed
    mutating call with one behaviour."""

    behaviour: str
    tools: dict[str, ToolSpec]
    target: str
    name: str = "adversarial"
    plan: list[dict[str, Any]] = field(default_factory=list)
    results: list[Any] = field(default_factory=list)
    queue: list[tuple[str, dict[str, Any], int | None]] = field(default_factory=list)
    pending: tuple[str, dict[str, Any], int | None] | None = None
    reacted: bool = False
    resend_status: int | None = None
    resend_sent: bool = False
    probe_status: int | None = None
    keys: dict[int, int] = field(default_factory=dict)
    probe_planned: bool = False

    def reset(self, plan: list[dict[str, Any]]) -> None:
        self.plan, self.results, self.pending = plan, [None] * len(plan), None
        self.queue = [(s["tool"], s["arguments"], i) for i, s in enumerate(plan)]
        self.reacted, self.resend_status, self.resend_sent = False, None, False
        self.probe_status = None
        self.keys = {}
        self.probe_planned = False
        if self.behaviour == "read_first":
            reads = [t for t in self.tools.values() if t.read_only and not _required(t)]
            if reads:
                self.queue.insert(0, (reads[0].name, {}, None))
        if self.behaviour == "resend_after_4xx":
            for n, (tool, args, _gold) in enumerate(self.queue):
                if tool == self.target:
                    broken = _broken_address(args, self.tools[tool])
                    if broken is not None:
                        self.queue.insert(n, (tool, broken, None))
                        self.probe_planned = True
                    break

    def _args(self, tool: str, args: dict[str, Any], gold: int | None) -> dict[str, Any]:
        resolved = dict(resolve_refs(args, self.results))
        spec = self.tools[tool]
        keyed = self.behaviour in ("fresh_key_resend", "same_key_resend") and spec.accepts_key
        if keyed and gold is not None:
            resolved[KEY] = f"k-{gold}-{self.keys.setdefault(gold, 1)}"
        return resolved

    def act(self, observation: str) -> dict[str, Any]:
        if self.pending is not None:
            tool, args, gold = self.pending
            self.pending = None
            obs = json.loads(observation)
            status = obs.get("status") if isinstance(obs.get("status"), int) else None
            failed = is_failure(obs)
            if gold is None and tool == self.target and self.probe_status is None:
                self.probe_status = status  # the deliberately broken call
                err = obs.get("error")
                if isinstance(err, dict) and err.get("type") == "invalid_action":
                    self.probe_planned = False  # the env refused it: it never reached the wire
            elif self.reacted and gold is not None and self.resend_status is None:
                self.resend_status, self.resend_sent = status, True
                if not failed:
                    self.results[gold] = obs.get("body")
                elif status is None or status >= 500:
                    return _finish("gave_up")
            elif failed and gold is not None and not self.tools[tool].read_only:
                if self.reacted or (status is not None and status < 500):
                    return _finish("gave_up")
                self.reacted = True
                if not self._react(tool, args, gold):
                    return _finish("gave_up")
            elif failed and gold is not None:
                return _finish("gave_up")
            elif gold is not None:
                self.results[gold] = obs.get("body")
        if not self.queue:
            return _finish("done")
        tool, args, gold = self.queue.pop(0)
        try:
            resolved = self._args(tool, args, gold)
        except (KeyError, IndexError, TypeError, ValueError):
            return _finish("gave_up")
        self.pending = (tool, resolved, gold)
        return {"tool": tool, "arguments": resolved}

    def _react(self, tool: str, sent: dict[str, Any], gold: int) -> bool:
        """Queue the behaviour's next calls; False: the behaviour gives up here."""
        spec = self.tools[tool]
        if self.behaviour == "reworded_resend":
            self.queue.insert(0, (tool, _reword(sent, spec), gold))
        elif self.behaviour == "verify_then_resend":
            self.queue.insert(0, (tool, dict(sent), gold))
            reads = [s for s in self.plan if self.tools[s["tool"]].read_only]
            if reads:
                self.queue.insert(0, (reads[0]["tool"], reads[0]["arguments"], None))
        elif self.behaviour in ("fresh_key_resend", "same_key_resend") and KEY in sent:
            again = dict(sent)
            if self.behaviour == "fresh_key_resend":
                self.keys[gold] = self.keys.get(gold, 1) + 1
                again[KEY] = f"k-{gold}-{self.keys[gold]}"
            self.queue.insert(0, (tool, again, gold))
        else:
            return False
        return True


def _finish(status: str) -> dict[str, Any]:
    return {"tool": "finish", "arguments": {"status": status}}


def _required(spec: ToolSpec) -> list[str]:
    return list(spec.parameters.get("required", []))


def _broken_address(args: dict[str, Any], spec: ToolSpec) -> dict[str, Any] | None:
    """The same call aimed at a resource that does not exist (the service refuses it)."""
    for k in [*spec.path_params, *sorted(args)]:
        v = args.get(k)
        if isinstance(v, str) and (k in spec.path_params or k.endswith("_id")):
            return {**args, k: MISSING_ID}
    return None


# --- expectations -------------------------------------------------------------------------


@dataclass
class Row:
    behaviour: str
    workflow: str
    scenario: str
    expected: str
    observed: str
    agrees: bool


def applies(behaviour: str, scenario: FaultScenario, spec: ToolSpec) -> bool:
    visible = scenario.boundary not in (Boundary.POST_ACK_PRE_CHECKPOINT,) and not (
        scenario.crash_point
    )
    if behaviour in ("reworded_resend", "verify_then_resend"):
        return visible
    if behaviour in ("fresh_key_resend", "same_key_resend"):
        return visible and spec.accepts_key
    if behaviour == "resend_after_4xx":
        return scenario.target.nth == 1
    if behaviour == "read_first":
        return True  # reads must never move the fault, a worker crash's included
    # give_up reacts to a failure the agent sees: a crash mid-composite is one
    return scenario.boundary is not Boundary.POST_ACK_PRE_CHECKPOINT


def _mechanism(outcome: FaultOutcome | None) -> str | None:
    return outcome.mechanism if outcome is not None else None


def expect_and_observe(
    behaviour: str, agent: ReactiveAgent, rec: EpisodeLike, spec: ToolSpec, gold: EpisodeLike
) -> tuple[str, str] | None:
    """(expected, observed) verdict labels; None when the behaviour never got to act."""
    ep, gold_ep = as_episode(rec), as_episode(gold)
    v = verdict_of(ep)
    outcome = ep.fault_outcome
    dup, unreq = bool(v.duplicates), bool(v.unrequired)
    observed_bits = [
        "duplicate" if dup else "no duplicate",
        "unrequired" if unreq else "no unrequired",
    ]
    if behaviour in RESENDS:
        if not agent.reacted or not agent.resend_sent:
            return None
        # Later steps may act on the duplicate's ids (register the second deployment, page
        # the next level's responders): those are real unrequired effects of their own. The
        # re-sent call itself must never be one: its identity is the same effect.
        unreq = any(u.get("op") == spec.op for u in v.unrequired)  # effects: dicts
        observed_bits[1] = "re-send seen as another effect" if unreq else "same effect"
        committed = _mechanism(outcome) == "reply_dropped_after_commit"
        resent_2xx = agent.resend_status is not None and 200 <= agent.resend_status < 300
        # A route guarded by a unique constraint on the identity (a page's dedup key)
        # joins or refuses the same request; a native one replays the same key.
        replayed = spec.idempotency == "constraint" or (
            behaviour == "same_key_resend" and spec.idempotency == "native"
        )
        want_dup = committed and spec.effect_class in DUPLICABLE and resent_2xx and not replayed
        wanted = ["duplicate" if want_dup else "no duplicate", "same effect"]
        if want_dup:
            wanted.append("failure")
            observed_bits.append("failure" if not v.success else "success")
        return " + ".join(wanted), " + ".join(observed_bits)
    if behaviour == "resend_after_4xx":
        # The refused call changed nothing and the real call after it is not the target:
        # the task succeeds; a fault planned on the refused call happened only if it was a
        # dropped request (nothing to commit either way).
        if not agent.probe_planned:
            return None  # no address to break: the behaviour does not apply
        gold_mech = _mechanism(gold_ep.fault_outcome)
        fault = "fault request_dropped" if gold_mech == "request_dropped" else "fault refused"
        expected = f"success + no duplicate + no unrequired + {fault}"
        got = None
        if outcome is not None:
            got = outcome.mechanism if outcome.as_planned else outcome.reason
        return expected, f"{_summary(v, None)} + fault {got}"
    if behaviour == "read_first":
        return _summary(verdict_of(gold_ep), gold_ep.fault_outcome), _summary(v, outcome)
    if behaviour == "give_up":
        crashed = _mechanism(outcome) == "crash_mid_mutation"
        expected = "gave up + " + ("partial state" if crashed else "no partial state")
        observed = "gave up" if ep.finish_status == "gave_up" else str(ep.finish_status)
        observed += " + " + ("partial state" if v.partial else "no partial state")
        return expected, observed
    return None


def _summary(v: Verdict, outcome: FaultOutcome | None) -> str:
    bits = [
        "success" if v.success else "failure",
        "duplicate" if v.duplicates else "no duplicate",
        "unrequired" if v.unrequired else "no unrequired",
    ]
    if outcome is not None:
        bits.append(f"fault {outcome.mechanism or outcome.reason}")
    return " + ".join(bits)


# --- running ------------------------------------------------------------------------------


def run_suite(
    workflows: list[WorkflowSpec] | None = None,
    behaviours: tuple[str, ...] = BEHAVIOURS,
    seed: int = SEED,
) -> list[Row]:
    rows: list[Row] = []
    chosen = workflows or all_workflows()
    by_domain: dict[str, list[WorkflowSpec]] = {}
    for wf in chosen:
        by_domain.setdefault(wf.domain, []).append(wf)
    for name, wfs in by_domain.items():
        env = UndoBenchEnv(name, max_steps=MAX_STEPS)
        try:
            tools = domain(name).tools
            for wf in wfs:
                if wf.writer is not None:  # another client changes what a re-send does (it
                    continue  # may overwrite it): tests/test_concurrent_writer.py has those
                wf_tools = {t: tools[t] for t in wf.tools}
                for sc in wf.scenarios:
                    if sc.then:  # a cascade faults the resend too: the expectations below
                        continue  # assume one fault (tests/test_stress_schedules.py has those)
                    spec = tools[sc.target.tool]
                    gold = as_episode(
                        run_episode(env, ScriptedAgent(), seed=seed, workflow=wf.id, fault=sc.id)
                    )
                    for b in behaviours:
                        if not applies(b, sc, spec):
                            continue
                        agent = ReactiveAgent(b, wf_tools, sc.target.tool)
                        rec = as_episode(
                            run_episode(env, agent, seed=seed, workflow=wf.id, fault=sc.id)
                        )
                        pair = expect_and_observe(b, agent, rec, spec, gold)
                        if pair is None:
                            continue
                        rows.append(Row(b, wf.id, sc.id, pair[0], pair[1], pair[0] == pair[1]))
        finally:
            env.close()
    return rows


def table(rows: list[Row]) -> str:
    """behaviour x expected verdict x observed, with counts."""
    counts: Counter[tuple[str, str, str]] = Counter(
        (r.behaviour, r.expected, r.observed) for r in rows
    )
    lines = [
        "| behaviour | expected verdict | observed | episodes | agrees |",
        "|---|---|---|---|---|",
    ]
    for (b, e, o), n in sorted(counts.items()):
        lines.append(f"| {b} | {e} | {o} | {n} | {'yes' if e == o else '**no**'} |")
    return "\n".join(lines)


def main(suite: Callable[..., list[Row]] | None = None, doc: str | None = None) -> None:
    """The command line of a suite (this one by default): rows as JSON or the table."""
    parser = argparse.ArgumentParser(description=(doc or __doc__ or "").splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print the validity table")
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args()
    rows = (suite or run_suite)(seed=args.seed)
    if args.markdown:
        print(table(rows))
    else:
        for r in rows:
            print(json.dumps(r.__dict__))
    bad = [r for r in rows if not r.agrees]
    raise SystemExit(1 if bad else 0)


if __name__ == "__main__":
    main()
