"""Oracle conformance: do the state and effect oracles judge known-good and known-bad
behaviour correctly, on every workflow of the catalogue, against the real services?

For each workflow, scripted agents derived from its gold plan each carry one known defect
(perturb.py); each case states the verdict the oracles must reach. A missed problem is a
false negative, a problem reported where there is none a false positive. Cases run in
control episodes, except those that need a fault by definition (never-retry under each
fault scenario; leave-partial-state under DURING_MUTATION scenarios). One env (one stack)
per domain, reused. Workflows are handled generically: a perturbation that does not apply
is skipped and counted.

When a case reveals a real oracle or workflow bug, it is listed in EXPECTED_FAILURES with
the reason (the workflow files belong to their domains' owners), so the suite stays green
and the bug stays visible. A failing case is run once more; one that passes then is
reported as `flaky` (nondeterminism in the stack), not as an oracle error.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from undobench_gym.contract.specs import Boundary, FaultScenario, Verdict, WorkflowSpec
from undobench_gym.core.boundaries import target_commits
from undobench_gym.core.catalog import all_workflows, domain
from undobench_gym.core.env import UndoBenchEnv
from undobench_gym.core.schema import EpisodeRecord
from undobench_gym.evaluation import perturb as pt
from undobench_gym.evaluation.records import as_episode, verdict_of

#: (workflow id, case name) -> why the case is known to fail (a bug owned elsewhere).
EXPECTED_FAILURES: dict[tuple[str, str], str] = {}
SEED = 1
MAX_STEPS = 60


@dataclass(frozen=True)
class Check:
    name: str
    holds: bool
    expects_problem: bool  # the oracle must flag a problem: a miss is a false negative


@dataclass
class CaseResult:
    workflow: str
    case: str
    status: (
        str  # pass | false_positive | false_negative | both | error | not_fired | expected_failure
    )
    failed: list[str] = field(default_factory=list)
    message: str = ""
    seconds: float = 0.0


@dataclass
class ConformanceReport:
    results: list[CaseResult] = field(default_factory=list)
    skipped: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        c = Counter(r.status for r in self.results)
        return {
            "cases": len(self.results),
            "passed": c["pass"],
            "false_positives": c["false_positive"] + c["both"],
            "false_negatives": c["false_negative"] + c["both"],
            "errors": c["error"],
            "not_fired": c["not_fired"],
            "expected_failures": c["expected_failure"],
            "flaky": c["flaky"],
            "skipped": len(self.skipped),
        }

    @property
    def ok(self) -> bool:
        n = self.counts
        return not (n["false_positives"] or n["false_negatives"] or n["errors"] or n["not_fired"])


Expect = Callable[[pt.Context, pt.PlanAgent, EpisodeRecord], list[Check] | None]


def _clean(v: Verdict) -> list[Check]:
    return [
        Check("success", v.success, False),
        Check("state_ok", v.state_ok, False),
        Check("no duplicates", not v.duplicates, False),
        Check("no missing", not v.missing, False),
        Check("no forbidden", not v.forbidden, False),
        Check("no partial", not v.partial, False),
    ]


def _failed(v: Verdict) -> Check:
    return Check("not success", not v.success, True)


def _ok2xx(s: pt.Sent | None) -> bool:
    return s is not None and s.status is not None and 200 <= s.status < 300


def _expect_repeats(ctx: pt.Context, agent: pt.PlanAgent, rec: EpisodeRecord) -> list[Check]:
    """A committed repeat of an additive/irreversible call without a key is a duplicate;
    set and create_unique repeats are harmless; every repeat of a committed call is a
    re-issue: a safe one when it carried the committed attempt's key on a route that
    honours keys, or a precondition the service refused; an unsafe one (urr) otherwise."""
    v = verdict_of(rec)
    first: dict[int | None, pt.Sent] = {}
    dup = False
    unsafe = safe = 0
    for s in agent.sent:
        if not s.step.repeat:
            first.setdefault(s.step.gold, s)
            continue
        orig = first.get(s.step.gold)
        spec = ctx.tools[s.step.tool]
        key = s.arguments.get("idempotency_key")
        replayed = key is not None and spec.idempotency == "native"
        replayed = replayed and orig is not None and orig.arguments.get("idempotency_key") == key
        refused = any(s.arguments.get(p) is not None for p in spec.preconditions) and not _ok2xx(s)
        if _ok2xx(orig):
            if replayed or refused:
                safe += 1
            else:
                unsafe += 1
        keyed = "idempotency_key" in s.arguments
        gold = s.step.gold if s.step.gold is not None else 0
        if _ok2xx(orig) and _ok2xx(s) and ctx.effect_class(gold) in pt.DUPLICABLE and not keyed:
            dup = True
    checks = [
        Check(f"reissued_after_commit >= {unsafe}", v.reissued_after_commit >= unsafe, True),
        Check(f"safe_reissues >= {safe}", v.safe_reissues >= safe, True),
    ]
    if dup:
        return [*checks, Check("duplicates", bool(v.duplicates), True), _failed(v)]
    return checks if agent.gave_up else [*checks, *_clean(v)]


def _required_ops(ctx: pt.Context) -> set[str]:
    return {e.op for e in ctx.workflow.required_effects}


def _expect_skip(i: int) -> Expect:
    def expect(ctx: pt.Context, agent: pt.PlanAgent, rec: EpisodeRecord) -> list[Check]:
        v = verdict_of(rec)
        checks = [_failed(v)]
        if ctx.op(i) in _required_ops(ctx):
            checks.append(Check("missing", bool(v.missing), True))
        return checks

    return expect


def _expect_wrong(ctx: pt.Context, agent: pt.PlanAgent, rec: EpisodeRecord) -> list[Check]:
    v = verdict_of(rec)
    writer = ctx.workflow.writer
    overwritten = writer is not None and {a.tool for a in writer.actions} & {
        s.step.tool for s in agent.sent
    }
    if overwritten and v.state_ok:
        # A concurrent writer set the same thing after the agent's wrong value: the final
        # state holds the writer's value, so only the effect oracle can show the agent's.
        shown = bool(v.missing and v.unrequired)
        return [_failed(v), Check("wrong value reported as an effect", shown, True)]
    return [_failed(v), Check("state invariant fails", not v.state_ok, True)]


def _expect_forbidden(ctx: pt.Context, agent: pt.PlanAgent, rec: EpisodeRecord) -> list[Check]:
    """The re-aimed call committed: the forbidden effect must be reported. The service
    refused it (a guard): nothing forbidden happened, but the right effect is missing."""
    v = verdict_of(rec)
    marked = next((s for s in agent.sent if s.step.marked), None)
    if _ok2xx(marked):
        return [_failed(v), Check("forbidden", bool(v.forbidden), True)]
    return [_failed(v), Check("no forbidden (the service refused it)", not v.forbidden, False)]


def _committed(sc: FaultScenario, rec: EpisodeRecord) -> bool | None:
    return target_commits(sc, rec.hidden_commit_coin)


def _expect_fault(sc: FaultScenario) -> Expect:
    """The agent stops at the faulted call. The work is complete only if that call
    committed and no mutating gold step came after it."""

    def expect(ctx: pt.Context, agent: pt.PlanAgent, rec: EpisodeRecord) -> list[Check] | None:
        if not rec.fault_fired:
            return None
        v = verdict_of(rec)
        index = (rec.fault or {}).get("index") or 0  # the fault's record: a dict in the schema
        hit = agent.sent[index - 1].step.gold if 0 < index <= len(agent.sent) else None
        g = hit if hit is not None else len(ctx.gold)
        committed = _committed(sc, rec)
        undone = [j for j in range(g + 1, len(ctx.gold)) if ctx.mutating(j)]
        if g < len(ctx.gold) and ctx.mutating(g) and committed is False:
            undone.append(g)
        if sc.boundary is Boundary.DURING_MUTATION:
            if sc.crash_point:
                return [_failed(v), Check("partial state", bool(v.partial), True)]
            return [
                _failed(v),
                Check("missing or partial", bool(v.missing or v.partial), True),
            ]
        if not undone:
            return _clean(v)
        checks = [_failed(v)]
        if {ctx.op(j) for j in undone} & _required_ops(ctx):
            checks.append(Check("missing", bool(v.missing), True))
        return checks

    return expect


@dataclass(frozen=True)
class Case:
    name: str
    build: pt.Builder
    expect: Expect
    fault: FaultScenario | None = None


def _perfect(ctx: pt.Context) -> list[pt.Step]:
    return ctx.steps()


def cases_for(ctx: pt.Context) -> list[Case]:
    perfect = _perfect
    cases = [
        Case("perfect", perfect, lambda c, a, r: _clean(verdict_of(r))),
        Case("always-retry", pt.always_retry, _expect_repeats),
        Case("duplicate", pt.duplicate_last_additive, _expect_repeats),
        *[
            Case(f"skip-effect:{i}", pt.skip_step(i), _expect_skip(i))
            for i in pt.mutating_steps(ctx)
        ],
        Case("wrong-value", pt.wrong_value_in(pt.mutating_steps), _expect_wrong),
    ]
    if ctx.workflow.forbidden_effects:
        cases.append(Case("compensate-wrongly", pt.commit_forbidden, _expect_forbidden))
    elif pt.compensation_steps(ctx):
        wrong_comp = pt.wrong_value_in(pt.compensation_steps)
        cases.append(Case("compensate-wrongly", wrong_comp, _expect_wrong))
    for sc in ctx.workflow.scenarios:
        if sc.boundary is Boundary.POST_ACK_PRE_CHECKPOINT:
            continue  # applied by the checkpoint harness (B1), not by the proxy
        kind = "leave-partial" if sc.boundary is Boundary.DURING_MUTATION else "never-retry"
        cases.append(Case(f"{kind}:{sc.id}", perfect, _expect_fault(sc), sc))
    return cases


def _episode(env: Any, w: WorkflowSpec, agent: pt.PlanAgent, fault: str | None) -> EpisodeRecord:
    obs, _ = env.reset(seed=SEED, options={"workflow": w.id, "fault": fault})
    agent.reset([])
    while True:
        obs, _r, terminated, truncated, info = env.step(agent.act(obs))
        if terminated or truncated:
            return as_episode(info["episode"])  # the env's info dict holds the record


def _classify(w: WorkflowSpec, case: Case, checks: list[Check] | None) -> CaseResult:
    if checks is None:
        return CaseResult(w.id, case.name, "not_fired", message="the fault did not fire")
    failed = [c for c in checks if not c.holds]
    fn = any(c.expects_problem for c in failed)
    fp = any(not c.expects_problem for c in failed)
    status = "both" if fn and fp else "false_negative" if fn else "false_positive" if fp else "pass"
    known = EXPECTED_FAILURES.get((w.id, case.name))
    if status != "pass" and known:
        status = "expected_failure"
    message = known or ""
    if status == "pass" and known:
        message = f"listed in EXPECTED_FAILURES but passes now: {known}"
    return CaseResult(w.id, case.name, status, [c.name for c in failed], message)


def _run_workflow(
    env: Any, w: WorkflowSpec, report: ConformanceReport, only: set[str] | None
) -> None:
    base: UndoBenchEnv = env
    dom = domain(w.domain)
    base.reset(seed=SEED, options={"workflow": w.id, "fault": None})
    ctx = pt.Context(w, dom.tools, base.gold_plan(), w.draw_params(SEED, dom.fixture(SEED)))
    for case in cases_for(ctx):
        if only and case.name.split(":")[0] not in only:
            continue
        t0 = time.monotonic()
        if case.build(ctx) is None:
            report.skipped.append((w.id, case.name, "does not apply"))
            continue
        result = _attempt(base, ctx, case)
        if result.status not in ("pass", "expected_failure"):
            # Same seed, same plan: a different verdict the second time is nondeterminism
            # in the stack (timing under load), reported as flaky rather than hidden.
            again = _attempt(base, ctx, case)
            if again.status == "pass":
                detail = f"{result.status} ({', '.join(result.failed)}) {result.message}"
                result = CaseResult(w.id, case.name, "flaky", result.failed, detail.strip())
        result.seconds = round(time.monotonic() - t0, 3)
        report.results.append(result)


def _attempt(env: Any, ctx: pt.Context, case: Case) -> CaseResult:
    w = ctx.workflow
    try:
        plan = case.build(ctx)
        assert plan is not None
        agent = pt.PlanAgent(plan)
        rec = _episode(env, w, agent, case.fault.id if case.fault else None)
        return _classify(w, case, case.expect(ctx, agent, rec))
    except Exception as exc:  # an infrastructure or harness failure, kept apart
        return CaseResult(w.id, case.name, "error", message=f"{type(exc).__name__}: {exc}")


def run_conformance(
    workflows: list[str] | None = None, only: set[str] | None = None
) -> ConformanceReport:
    """Run the suite over the catalogue (or the given workflow ids / case kinds)."""
    chosen = [w for w in all_workflows() if workflows is None or w.id in workflows]
    by_domain: dict[str, list[WorkflowSpec]] = {}
    for w in chosen:
        by_domain.setdefault(w.domain, []).append(w)
    report = ConformanceReport()
    for name, wfs in by_domain.items():
        env: UndoBenchEnv | None = None
        try:
            env = UndoBenchEnv(name, max_steps=MAX_STEPS)
            for w in wfs:
                try:
                    _run_workflow(env, w, report, only)
                except Exception as exc:
                    msg = f"{type(exc).__name__}: {exc}"
                    report.results.append(CaseResult(w.id, "setup", "error", message=msg))
        finally:
            if env is not None:
                env.close()
    return report
