"""What every domain's workflows and fixture history must satisfy, written once.

The per-domain test files (`test_<domain>_workflows.py`, `test_<domain>_history.py`) keep
what is particular to a domain; the checks that are the same everywhere live here:

* `WorkflowContract`: a test class each workflows module subclasses, naming its workflows,
  the argument names that are free text, the effects its composites commit and the re-sends
  an agent makes after a lost acknowledgement. It asserts, for that domain: gold plans
  succeed with nothing duplicated, missing, forbidden or unrequired; scenarios aim at a
  mutating tool of their workflow; every route's declared identity is the one its
  commit-log rows carry, agrees with the workflows' expectations and holds no free text;
  the seeded history satisfies no task, and stands in for no left-out gold step; each
  re-send gets the verdict it must get.
* verdict helpers: `verdict`, `ops`, `assert_judged`, `gold` (an `Episode`), and the
  re-sends `Resend`, `resend_step`, `reworded`;
* identity helpers: `record`, `assert_calls_record_their_arguments`, `gold_plan_logs`;
* history helpers: `CLOCK`, `where`, `by_id`, `assert_service_seeds_fixture`,
  `tables_around_gold_plan`, `assert_new_rows_follow_history`,
  `deliver_webhooks_in_process` (messaging).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar
from urllib.parse import urlsplit

import pytest

from undobench_gym.agents.scripted import resolve_refs
from undobench_gym.contract.specs import Boundary, Verdict, WorkflowSpec, fill
from undobench_gym.core.catalog import domain
from undobench_gym.core.oracles import evaluate
from undobench_gym.services.domains._service.context import EPOCH

from .service_harness import (
    GOLD_SEEDS,
    SEED,
    ServiceClient,
    assert_gold_plan_completes,
    failed_invariants,
    params_for,
    run_gold_plan,
    step_args,
)

#: The episode clock as the services stamp rows: all history is older, every new row not.
CLOCK = EPOCH.strftime("%Y-%m-%dT%H:%M:%SZ")
#: The lists of a verdict that name effects.
JUDGED = ("duplicates", "missing", "forbidden", "unrequired")

Row = dict[str, Any]


# ---- verdicts --------------------------------------------------------------------------


def verdict(svc: ServiceClient, wf: WorkflowSpec, params: dict[str, Any]) -> Verdict:
    """What the benchmark would rule on the service's current state and commit log."""
    log = svc.commit_log()
    return evaluate(wf, params, svc.state(), log, physical_calls=len(log))


def ops(effects: Iterable[Mapping[str, Any]]) -> list[str]:
    """The operations of a verdict's effect list, sorted (its order means nothing)."""
    return sorted(e["op"] for e in effects)


def assert_judged(v: Verdict, **expected: Sequence[str]) -> None:
    """The verdict's duplicate, missing, forbidden and unrequired effects are exactly these
    operations; a list not named must be empty."""
    assert set(expected) <= set(JUDGED), expected
    for kind in JUDGED:
        assert ops(getattr(v, kind)) == sorted(expected.get(kind, ())), (kind, v.model_dump())


@dataclass
class Episode:
    """A workflow's gold plan, run on a service from a reset to `seed`."""

    svc: ServiceClient
    wf: WorkflowSpec
    seed: int
    params: dict[str, Any]
    bodies: list[Any]

    def verdict(self) -> Verdict:
        return verdict(self.svc, self.wf, self.params)


def gold(svc: ServiceClient, wf_id: str, seed: int | None = None) -> Episode:
    """Reset to `seed` (default: the client's) and run the workflow's gold plan."""
    seed = svc.seed if seed is None else seed
    wf = svc.workflow(wf_id)
    params = params_for(wf, seed)
    svc.reset(seed)
    return Episode(svc, wf, seed, params, run_gold_plan(svc, wf, params))


# ---- re-sends after the gold plan ------------------------------------------------------

#: What an agent sends after the gold plan.
Send = Callable[[Episode], object]
Change = Mapping[str, Any] | Callable[[dict[str, Any]], Mapping[str, Any]]


def resend_step(
    step: int | str,
    change: Change | None = None,
    extra: Callable[[Episode], Mapping[str, Any]] | None = None,
) -> Send:
    """Send gold step `step` (an index, or the first step calling that tool) once more, as
    an agent that never saw its answer would, with `change` applied to its arguments:
    `{name}` templates in it are filled from the gold call's arguments, `extra(episode)`
    and the task parameters; or a function of the gold arguments that gives the changes."""

    def send(ep: Episode) -> None:
        at = step if isinstance(step, int) else [s.tool for s in ep.wf.gold_plan].index(step)
        tool = ep.wf.gold_plan[at].tool
        args = resolve_refs(step_args(ep.wf, at, ep.params), ep.bodies)
        if callable(change):
            changed = change(args)
        else:
            values = {**ep.params, **(extra(ep) if extra else {}), **args}
            changed = fill(dict(change or {}), values)
        ep.svc.ok(tool, {**args, **changed})

    return send


@dataclass(frozen=True)
class Resend:
    """A behaviour after the gold plan (its last answer lost, say) and the verdict it must
    get: exactly these effects duplicated, unrequired or forbidden, nothing missing, and
    the state oracle's ruling (None: not judged here). With none of them and `state_ok`,
    the repeat is absorbed and the task still a success."""

    workflow: str
    label: str
    send: Send
    duplicates: Sequence[str] = ()
    unrequired: Sequence[str] = ()
    forbidden: Sequence[str] = ()
    state_ok: bool | None = False
    #: A further, domain-specific look at the verdict.
    check: Callable[[Episode, Verdict], None] | None = field(default=None, compare=False)

    @property
    def harmless(self) -> bool:
        return bool(self.state_ok) and not (self.duplicates or self.unrequired or self.forbidden)


def reworded(domain_name: str, cases: Iterable[tuple[str, int | str, Change]]) -> list[Resend]:
    """For each (workflow, gold step, change): the step re-sent after a lost
    acknowledgement, only reworded by `change` (or not even that), is a duplicate of the
    step's own effect and nothing else."""
    spec = domain(domain_name)
    out = []
    for wf_id, step, change in cases:
        (wf,) = [w for w in spec.workflows if w.id == wf_id]
        tool = step if isinstance(step, str) else wf.gold_plan[step].tool
        label = f"{tool} " + ("reworded" if change else "again")
        op = spec.tools[tool].op
        out.append(Resend(wf_id, label, resend_step(step, change), duplicates=[str(op)]))
    return out


def assert_resend_verdict(svc: ServiceClient, case: Resend, seed: int) -> None:
    """Run the gold plan (a success), then `case.send`: the verdict is what `case` says. A
    duplicate is one commit more than the task required, whatever the wording."""
    ep = gold(svc, case.workflow, seed)
    assert ep.verdict().success, case.label
    case.send(ep)
    v = ep.verdict()
    if case.state_ok is not None:
        assert v.state_ok is case.state_ok, v.model_dump()
    assert_judged(
        v, duplicates=case.duplicates, unrequired=case.unrequired, forbidden=case.forbidden
    )
    assert v.success is case.harmless, v.model_dump()
    assert all(d["count"] == d["required"] + 1 for d in v.duplicates), v.duplicates
    if case.check is not None:
        case.check(ep, v)


# ---- identities ------------------------------------------------------------------------

#: A call, its arguments, and the commit-log rows it wrote.
Call = tuple[str, dict[str, Any], list[Row]]


def record(
    svc: ServiceClient, tool: str, args: dict[str, Any], *, crash: str | None = None
) -> Call:
    """Call `tool` (stopped at crash point `crash`, if given); the call and what it wrote."""
    seen = len(svc.commit_log())
    if crash is None:
        svc.ok(tool, args)
    else:
        svc.call_until_crash(tool, args, crash)
    return tool, args, svc.commit_log()[seen:]


def assert_calls_record_their_arguments(
    svc: ServiceClient, calls: Sequence[Call], *, every_tool: bool = False
) -> list[Row]:
    """Each call's own commit carries its route's identity fields with the call's argument
    values (what the env's re-issue count derives from a call); with `every_tool`, the
    calls exercise every mutating tool. The other rows the calls wrote: the effects
    composite routes commit besides their own."""
    if every_tool:
        called = {tool for tool, _, _ in calls}
        assert called == mutating_tools(svc), "every mutating route is exercised"
    others = []
    for tool, args, commits in calls:
        spec = svc.tools[tool]
        own = [json.loads(r["identity"]) for r in commits if r["op"] == spec.op]
        assert own == [{f: args[f] for f in spec.identity}], (tool, own, spec.identity)
        others += [r for r in commits if r["op"] != spec.op]
    return others


def mutating_tools(svc: ServiceClient) -> set[str]:
    return {name for name, tool in svc.tools.items() if not tool.read_only}


def gold_plan_logs(svc: ServiceClient, workflows: Iterable[WorkflowSpec]) -> list[Row]:
    """The commit-log rows of every gold plan, each run from a reset to the client's seed;
    the client is reset again afterwards."""
    log: list[Row] = []
    for wf in workflows:
        svc.reset()
        run_gold_plan(svc, wf, params_for(wf, svc.seed))
        log += svc.commit_log()
    svc.reset()
    return log


def declared_identities(svc: ServiceClient) -> dict[str, list[str]]:
    """op -> the identity fields its mutating routes declare in their OpenAPI labels
    (routes sharing an op agree, and the tool schemas say the same)."""
    out: dict[str, list[str]] = {}
    for item in svc.app.openapi()["paths"].values():
        for op in item.values():
            meta = op["x-undobench"]
            if not meta.get("read_only"):
                fields = sorted(meta["identity"])
                assert out.setdefault(meta["op"], fields) == fields, meta["op"]
    tools = {t.op: sorted(t.identity) for t in svc.tools.values() if not t.read_only}
    assert tools == out
    return out


def assert_identities_agree(
    svc: ServiceClient,
    log: Sequence[Row],
    workflows: Iterable[WorkflowSpec],
    free_text: Iterable[str],
    sub_effects: Mapping[str, Iterable[str]],
    nullable: Iterable[str] = (),
) -> None:
    """The identity a route declares is the one its commit-log rows carry (`log` must
    exercise every operation, the effects `sub_effects` that composites commit besides
    their own too), no identity field is free text, no identity value is missing (but
    `nullable` ones), and the workflows' expectations name those same fields."""
    shapes = declared_identities(svc)
    assert not set(shapes) & set(sub_effects), "a route's own op is not a sub-effect"
    shapes |= {op: sorted(fields) for op, fields in sub_effects.items()}
    for op, fields in shapes.items():
        assert fields, f"{op}: no identity"
        assert not set(free_text) & set(fields), (op, fields)
    seen = {r["op"] for r in log}
    assert seen == set(shapes), (f"never exercised: {set(shapes) - seen}", seen - set(shapes))
    for row in log:
        identity = json.loads(row["identity"])
        assert sorted(identity) == shapes[row["op"]], row
        assert all(v is not None for k, v in identity.items() if k not in nullable), row
    for wf in workflows:
        for exp in [*wf.required_effects, *wf.forbidden_effects]:
            assert sorted(exp.identity) == shapes[exp.op], (wf.id, exp)
        for exp in wf.allowed_effects:
            assert set(exp.identity) <= set(shapes[exp.op]), (wf.id, exp)


# ---- scenarios, gold plans, history ----------------------------------------------------


def assert_scenarios_are_honest(
    svc: ServiceClient, workflows: Iterable[WorkflowSpec], *, forward_effect_first: bool = True
) -> None:
    """A fault names a mutating tool of its workflow that the gold plan calls at least
    `nth` times; a DURING_MUTATION fault has a crash point inside the route (a lost
    acknowledgement is POST_MUTATION_PRE_ACK); a DURING_COMPENSATION fault hits a
    compensating call, and the task has a forward effect too: before the first such call,
    unless `forward_effect_first` is off (the undo is the task itself, as in a rollback
    whose forward effect is the note that follows it)."""
    for wf in workflows:
        gold_tools = [s.tool for s in wf.gold_plan]
        for sc in wf.scenarios:
            case = f"{wf.id}/{sc.id}"
            tool = svc.tools[sc.target.tool]
            assert tool.name in wf.tools and not tool.read_only, case
            assert gold_tools.count(tool.name) >= sc.target.nth, case
            if sc.boundary is Boundary.DURING_MUTATION:
                assert sc.crash_point, f"{case}: a lost ack, not a crash"
            if sc.boundary is Boundary.DURING_COMPENSATION:
                assert tool.compensation, case
                before = gold_tools[: gold_tools.index(tool.name)]
                forward = [
                    t
                    for t in (before if forward_effect_first else gold_tools)
                    if not svc.tools[t].read_only and not svc.tools[t].compensation
                ]
                assert forward, f"{case}: no forward effect"


def assert_gold_plan_is_clean(svc: ServiceClient, wf: WorkflowSpec, seed: int) -> None:
    """From a reset to `seed` the task is not done; the gold plan does it once, and the
    verdict is a success with nothing duplicated, missing, forbidden or unrequired."""
    assert_gold_plan_completes(svc, wf, seed)
    v = verdict(svc, wf, params_for(wf, seed))
    assert v.success, v.model_dump()
    assert_judged(v)


def assert_history_never_satisfies(
    svc: ServiceClient, workflows: Iterable[WorkflowSpec], seed: int
) -> None:
    """From the seeded state, with its history, no workflow is already done and none of
    its required effects is in the commit log."""
    svc.reset(seed)
    for wf in workflows:
        v = verdict(svc, wf, params_for(wf, seed))
        assert not v.state_ok and not v.success, wf.id
        assert v.missing and len(v.missing) == len(wf.required_effects), wf.id


# ---- the contract every domain's workflows module subclasses ---------------------------


class WorkflowContract:
    """Subclass as `TestWorkflowContract` in a domain's workflows module (whose `svc` is
    that domain's service) and set the attributes; the tests below then run for it."""

    workflows: ClassVar[Sequence[WorkflowSpec]]
    #: Argument names that hold text a client words as it likes: never part of an identity.
    free_text: ClassVar[frozenset[str]]
    #: Effects a composite route commits besides its own op, and their identity fields.
    sub_effects: ClassVar[Mapping[str, frozenset[str]]] = {}
    #: Identity fields that may be null (e.g. a version id of an unversioned bucket).
    nullable: ClassVar[frozenset[str]] = frozenset()
    #: False where a compensation fault hits an undo that is the task itself.
    forward_effect_first: ClassVar[bool] = True
    #: What agents send after the gold plan, and the verdicts that must get.
    resends: ClassVar[Sequence[Resend]]

    def exercise(self, svc: ServiceClient) -> list[Row]:
        """Commit-log rows that exercise every mutating operation of the domain."""
        raise NotImplementedError

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        names = set(metafunc.fixturenames)
        if {"wf", "seed"} <= names:
            cases = [
                pytest.param(w, s, id=f"{w.id}-{s}") for w in self.workflows for s in GOLD_SEEDS
            ]
            metafunc.parametrize(("wf", "seed"), cases)
        elif "wf" in names:
            metafunc.parametrize("wf", self.workflows, ids=[w.id for w in self.workflows])
        elif "seed" in names:
            metafunc.parametrize("seed", GOLD_SEEDS)
        if "resend" in names:
            ids = [f"{r.workflow}:{r.label}" for r in self.resends]
            metafunc.parametrize("resend", self.resends, ids=ids)

    def test_gold_plan_succeeds_with_nothing_unrequired(
        self, svc: ServiceClient, wf: WorkflowSpec, seed: int
    ) -> None:
        assert_gold_plan_is_clean(svc, wf, seed)

    def test_scenarios_are_honest(self, svc: ServiceClient) -> None:
        assert_scenarios_are_honest(
            svc, self.workflows, forward_effect_first=self.forward_effect_first
        )

    @pytest.mark.usefixtures("crashable")
    def test_identity_declared_is_identity_recorded(self, svc: ServiceClient) -> None:
        log = self.exercise(svc)
        assert_identities_agree(
            svc, log, self.workflows, self.free_text, self.sub_effects, self.nullable
        )

    def test_history_never_satisfies_the_task(self, svc: ServiceClient, seed: int) -> None:
        assert_history_never_satisfies(svc, self.workflows, seed)

    def test_history_never_stands_in_for_a_missing_step(
        self, svc: ServiceClient, wf: WorkflowSpec
    ) -> None:
        """The history holds rows like those the task makes, but none of them counts."""
        for seed in (SEED, 7):
            assert_each_mutating_step_is_needed(svc, wf, seed)

    def test_resend_after_gold_plan(self, svc: ServiceClient, resend: Resend) -> None:
        """The effect had committed (its acknowledgement was lost); the agent sends it
        again. Rewording free text does not hide a duplicate, another value is an
        unrequired (or forbidden) effect, and the state oracle is not fooled either. At
        the service's seed and one more."""
        for seed in dict.fromkeys((svc.seed, GOLD_SEEDS[1])):
            assert_resend_verdict(svc, resend, seed)


# ---- fixture history -------------------------------------------------------------------


def where(rows: Iterable[Row], **match: Any) -> list[Row]:
    """The rows whose fields have these values."""
    return [r for r in rows if all(r.get(k) == v for k, v in match.items())]


def by_id(rows: Iterable[Row]) -> dict[Any, Row]:
    return {r["id"]: r for r in rows}


def assert_service_seeds_fixture(
    svc: ServiceClient, seed: int, fx: Mapping[str, Any], tables: Iterable[tuple[str, str]]
) -> dict[str, Any]:
    """A reset to `seed` holds exactly the fixture's rows (each (fixture key, table) pair,
    in any order), nothing half-done and no commit. The state."""
    svc.reset(seed)
    state = svc.state()
    for key, table in tables:
        assert sorted(map(str, state["tables"][table])) == sorted(map(str, fx[key])), table
    assert state["partial"] == [] and svc.commit_log() == []
    return state


def tables_around_gold_plan(
    svc: ServiceClient, wf: WorkflowSpec, seed: int
) -> tuple[dict[str, list[Row]], dict[str, list[Row]]]:
    """The tables after a reset to `seed`, and after the gold plan then."""
    svc.reset(seed)
    before = svc.tables()
    run_gold_plan(svc, wf, params_for(wf, seed))
    return before, svc.tables()


def assert_new_rows_follow_history(
    before: Mapping[str, list[Row]],
    after: Mapping[str, list[Row]],
    stamps: Mapping[str, tuple[str, str]],
) -> Counter[str]:
    """For each table, keyed and stamped by the (key, stamp) columns `stamps` gives it: a
    row that was there before keeps its stamp, which predates the clock; a new row is
    stamped at or after it, so a read-back tells an episode's rows from history. The new
    rows, counted by table."""
    added: Counter[str] = Counter()
    for table, (key, stamp) in stamps.items():
        old = {r[key]: r[stamp] for r in before[table]}
        assert all(t < CLOCK for t in old.values()), table
        for r in after[table]:
            if r[key] in old:
                assert r[stamp] == old[r[key]], (table, r)  # history keeps its time
            else:
                assert r[stamp] >= CLOCK, (table, r)
                added[table] += 1
    return added


def assert_each_mutating_step_is_needed(svc: ServiceClient, wf: WorkflowSpec, seed: int) -> None:
    """Leave out any one mutating step of the gold plan (and any later step that needs its
    answer): the history holds rows like the one it would have made, yet an invariant
    fails."""
    params = params_for(wf, seed)
    mutating = [i for i, s in enumerate(wf.gold_plan) if not svc.tools[s.tool].read_only]
    for skipped in mutating:
        svc.reset(seed)
        bodies: list[Any] = []
        for i, step in enumerate(wf.gold_plan):
            args = fill(step.arguments, params)
            if i == skipped or any(bodies[n] is None for n in _references(args)):
                bodies.append(None)  # left out, or it needs an answer that never came
                continue
            res = svc.call(step.tool, resolve_refs(args, bodies))
            bodies.append(res.json() if res.status_code < 300 else None)
        assert failed_invariants(svc, wf, params), (wf.id, wf.gold_plan[skipped].tool)


def _references(value: Any) -> set[int]:
    """The gold steps whose answers `@N.path` references in `value` read."""
    if isinstance(value, str) and value.startswith("@"):
        return {int(value[1:].partition(".")[0])}
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return set().union(*map(_references, value))
    return set()


def deliver_webhooks_in_process(svc: ServiceClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hand the messaging service's webhook deliveries to its own admin app's receiver."""
    from undobench_gym.services.domains.messaging import webhooks

    svc.ctx.ports = {"public": 1, "admin": 2}

    def deliver(url: str, payload: dict[str, Any], headers: dict[str, str]) -> int:
        return int(svc.admin.post(urlsplit(url).path, json=payload, headers=headers).status_code)

    monkeypatch.setattr(webhooks, "deliver", deliver)
