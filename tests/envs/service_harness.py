"""One in-process harness for the domain service tests, so each test file holds only what is
particular to its domain.

It drives a service the way the env does (one tool = one OpenAPI route, tool schemas from
`undobench_gym.core.catalog`), runs gold plans the way the scripted agent does (`specs.fill` for
`{param}` templates, then `agents.scripted.resolve_refs` for `@N.path` references) and judges
invariants with the real oracle (`oracles.check_predicate`), so the tests check what the
benchmark itself would see. No network, no subprocess: both apps run under TestClient.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from httpx import Response
from jsonschema import Draft202012Validator

from undobench_gym.agents.scripted import resolve_refs
from undobench_gym.contract.specs import Boundary, EffectExpectation, WorkflowSpec, fill
from undobench_gym.core.catalog import ToolSpec, domain, tools_from_openapi
from undobench_gym.core.oracles import check_predicate
from undobench_gym.services.domains._service.actor import WRITER_PREFIX
from undobench_gym.services.domains._service.app import create_apps
from undobench_gym.services.domains._service.context import (
    CRASH_HEADER,
    DomainService,
    ServiceContext,
)

#: The seed most tests reset to; gold plans also run from two more.
SEED = 3
GOLD_SEEDS = (SEED, 11, 12345)
KEY_HEADER = "Idempotency-Key"
JSON_HEADERS = {"content-type": "application/json"}
#: Bodies no JSON parser accepts; each domain adds one truncated body of its own shape.
MALFORMED_JSON = (b"{not json", b"", b"\xff\xfe")
EFFECT_CLASSES = {"additive", "set", "create_unique", "irreversible_send"}
IDEMPOTENCY = {"native", "constraint", "none"}
_REAL_EXIT = os._exit


class Crashed(Exception):
    """Stands in for the process exit of an armed crash point."""


def crash_points_raise(monkeypatch: pytest.MonkeyPatch) -> type[Crashed]:
    """Make an armed crash point raise `Crashed` instead of exiting the test process."""

    def fake_exit(code: int) -> None:
        raise Crashed(code)

    monkeypatch.setattr(os, "_exit", fake_exit)
    return Crashed


class ServiceClient:
    """The public and admin apps of one in-process domain service, called by tool name."""

    def __init__(self, ctx: ServiceContext, public: FastAPI, admin: FastAPI, seed: int) -> None:
        self.ctx = ctx
        self.app = public
        self.public = TestClient(public)
        self.admin = TestClient(admin)
        self.tools: dict[str, ToolSpec] = tools_from_openapi(public.openapi())
        self.seed = seed

    @classmethod
    @contextmanager
    def open(
        cls, service: DomainService, data_dir: Path, seed: int = SEED
    ) -> Iterator[ServiceClient]:
        """A fresh service on its own data directory, reset to `seed`; disposed on exit."""
        ctx = ServiceContext.open(service, data_dir)
        public, admin = create_apps(service, ctx)
        client = cls(ctx, public, admin, seed)
        try:
            client.reset(seed)
            yield client
        finally:
            ctx.engine.dispose()

    @property
    def domain(self) -> str:
        return self.ctx.domain.name

    # ---- admin API -----------------------------------------------------------------

    def reset(self, seed: int | None = None) -> str:
        """Reset in place to `seed` (default: the seed it was opened with); the state hash."""
        res = self.admin.post("/admin/reset", json={"seed": self.seed if seed is None else seed})
        assert res.status_code == 200, res.text
        return str(res.json()["hash"])

    def state(self) -> dict[str, Any]:
        res = self.admin.get("/admin/state")
        assert res.status_code == 200, res.text
        return dict(res.json())

    def tables(self) -> dict[str, list[dict[str, Any]]]:
        return dict(self.state()["tables"])

    def commit_log(self) -> list[dict[str, Any]]:
        res = self.admin.get("/admin/commit-log")
        assert res.status_code == 200, res.text
        return list(res.json())

    def ops(self) -> list[str]:
        """The committed operations, in order."""
        return [r["op"] for r in self.commit_log()]

    def configure(self, **settings: Any) -> dict[str, Any]:
        """POST /admin/config (idempotency_mode=..., crash_points=...); must be accepted."""
        res = self.admin.post("/admin/config", json=settings)
        assert res.status_code == 200, res.text
        return dict(res.json())

    # ---- public API, by tool name --------------------------------------------------

    def call(
        self,
        tool: str,
        args: Mapping[str, Any] | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        as_writer: bool = False,
    ) -> Response:
        """Call a tool: path parameters go in the URL, the other arguments in the query (GET,
        DELETE) or the JSON body. Unlike the env, arguments are not validated first, so a
        test can send what the schema forbids and see the service refuse it."""
        spec = self.tools.get(tool)
        if spec is None:
            raise KeyError(f"{self.domain} has no tool {tool!r}; it has {sorted(self.tools)}")
        rest = dict(args or {})
        path = spec.path
        for name in spec.path_params:
            if name not in rest:
                raise KeyError(f"{tool} needs the path argument {name!r}; got {sorted(rest)}")
            path = path.replace("{" + name + "}", quote(str(rest.pop(name)), safe=""))
        hdrs = dict(headers or {})
        res: Response
        # The concurrent writer calls the same API under the admin app.
        client, path = (self.admin, WRITER_PREFIX + path) if as_writer else (self.public, path)
        if spec.method in ("GET", "DELETE"):
            res = client.request(spec.method, path, params=rest, headers=hdrs)
        else:
            res = client.request(spec.method, path, json=rest, headers=hdrs)
        return res

    def ok(
        self,
        tool: str,
        args: Mapping[str, Any] | None = None,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """Call a tool that must succeed; its response body."""
        res = self.call(tool, args, headers=headers)
        assert res.status_code < 300, f"{tool} answered {res.status_code}: {res.text}"
        return res.json()

    def call_until_crash(self, tool: str, args: Mapping[str, Any], point: str) -> None:
        """Call with crash point `point` armed; the service must stop there."""
        if os._exit is _REAL_EXIT:
            raise RuntimeError(
                "an armed crash point would exit the test process: use the `crashable` "
                "fixture (crash_points_raise(monkeypatch)) first"
            )
        with pytest.raises(Crashed):
            self.call(tool, args, headers={CRASH_HEADER: point})

    # ---- workflows of this domain --------------------------------------------------

    def workflow(self, wf_id: str) -> WorkflowSpec:
        return workflow(self.domain, wf_id)


# ---- workflows, gold plans, oracles --------------------------------------------------


def workflow(domain_name: str, wf_id: str) -> WorkflowSpec:
    workflows = {w.id: w for w in domain(domain_name).workflows}
    if wf_id not in workflows:
        raise KeyError(f"{domain_name} has no workflow {wf_id!r}; it has {sorted(workflows)}")
    return workflows[wf_id]


def gold_plan_cases(workflows: Iterable[WorkflowSpec]) -> pytest.MarkDecorator:
    """Parametrize `wf` and `seed` over every workflow and GOLD_SEEDS (ids `<wf>-<seed>`)."""
    cases = [pytest.param(w, s, id=f"{w.id}-{s}") for w in workflows for s in GOLD_SEEDS]
    return pytest.mark.parametrize(("wf", "seed"), cases)


def params_for(wf: WorkflowSpec, seed: int = SEED) -> dict[str, Any]:
    """The task parameters the env would draw for `wf` at `seed`."""
    return wf.draw_params(seed, domain(wf.domain).fixture(seed))


def step_args(wf: WorkflowSpec, step: int | str, params: dict[str, Any]) -> dict[str, Any]:
    """The filled arguments of gold step `step`: an index, or the first step using that tool."""
    if isinstance(step, str):
        step = next(i for i, s in enumerate(wf.gold_plan) if s.tool == step)
    return dict(fill(wf.gold_plan[step].arguments, params))


def run_gold_plan(
    client: ServiceClient,
    wf: WorkflowSpec,
    params: dict[str, Any],
    steps: Sequence[int] | None = None,
) -> list[Any]:
    """Run the gold plan, or these step indexes in this order (a repeat re-runs a step, as a
    retry would); every call must succeed. `@N.path` reads step N's latest response. The
    response bodies, in call order."""
    latest: dict[int, Any] = {}
    bodies: list[Any] = []
    counts: Counter[str] = Counter()
    acted = wf.writer is None
    for i in range(len(wf.gold_plan)) if steps is None else steps:
        step = wf.gold_plan[i]
        args = resolve_refs(fill(step.arguments, params), [latest.get(n) for n in range(i)])
        res = client.call(step.tool, args)
        assert res.status_code < 300, f"{wf.id} step {i} {step.tool}: {res.status_code} {res.text}"
        latest[i] = res.json()
        bodies.append(latest[i])
        counts[step.tool] += 1
        if (
            wf.writer is not None
            and not acted
            and (step.tool, counts[step.tool])
            == (
                wf.writer.tool,
                wf.writer.nth,
            )
        ):
            acted = run_writer(client, wf, params)
    if not acted:
        run_writer(client, wf, params)  # as the env does: the other client does not wait
    return bodies


def run_writer(client: ServiceClient, wf: WorkflowSpec, params: dict[str, Any]) -> bool:
    """The task's concurrent writer makes its calls (each must succeed)."""
    assert wf.writer is not None
    for action in wf.writer.actions:
        res = client.call(action.tool, fill(action.arguments, params), as_writer=True)
        assert res.status_code < 300, f"{wf.id} writer {action.tool}: {res.text}"
    return True


def retry_after_gold_plan(
    client: ServiceClient, wf: WorkflowSpec, step: int | str
) -> tuple[dict[str, Any], Response]:
    """Run the gold plan at the client's seed, then issue gold step `step` (an index or a tool)
    once more, as an agent that never saw its first answer would. The task parameters and
    the repeat's response."""
    params = params_for(wf, client.seed)
    run_gold_plan(client, wf, params)
    tool = wf.gold_plan[step].tool if isinstance(step, int) else step
    return params, client.call(tool, step_args(wf, step, params))


def failed_invariants(
    source: ServiceClient | Mapping[str, Any], wf: WorkflowSpec, params: dict[str, Any]
) -> list[str]:
    """Descriptions of the invariants of `wf` that the state (a client's, or a dumped
    /admin/state) does not meet, judged by the benchmark's own oracle."""
    state = source.state() if isinstance(source, ServiceClient) else source
    tables = state["tables"]
    for pred in wf.invariants:
        assert pred.table in tables, f"{wf.id}: {pred.description!r} reads no table {pred.table}"
    results = [check_predicate(p, tables, params) for p in wf.invariants]
    return [r.description for r in results if not r.passed]


def effect_count(
    log: Iterable[Mapping[str, Any]], effect: EffectExpectation, params: dict[str, Any]
) -> int:
    """How many commit-log rows are this effect: same operation, same identity."""
    identity = fill(effect.identity, params)
    return sum(1 for r in log if r["op"] == effect.op and json.loads(r["identity"]) == identity)


def assert_effects(
    log: Sequence[Mapping[str, Any]], wf: WorkflowSpec, params: dict[str, Any]
) -> None:
    """Every required effect committed as many times as the task requires, and nothing
    duplicated, forbidden or unrequired (the effect oracle's own judgement)."""
    from undobench_gym.core.oracles import judge_effects, semantic_effects

    duplicates, missing, forbidden, unrequired = judge_effects(
        wf, params, semantic_effects([dict(r) for r in log if not r.get("actor")], wf, params)
    )
    assert (duplicates, missing, forbidden, unrequired) == ([], [], [], []), wf.id


def assert_done(client: ServiceClient, wf: WorkflowSpec, params: dict[str, Any]) -> None:
    """The task is done and done once: invariants hold, nothing half-done, effects exact."""
    state = client.state()
    assert failed_invariants(state, wf, params) == []
    assert state["partial"] == []
    assert_effects(client.commit_log(), wf, params)


def assert_gold_plan_completes(client: ServiceClient, wf: WorkflowSpec, seed: int) -> None:
    """From a reset to `seed` the task is not yet done, and the gold plan does it once."""
    client.reset(seed)
    params = params_for(wf, seed)
    assert failed_invariants(client, wf, params), f"{wf.id}: already done before the gold plan"
    run_gold_plan(client, wf, params)
    assert_done(client, wf, params)


# ---- catalogue checks shared by every domain -----------------------------------------


def assert_reset_is_deterministic(client: ServiceClient) -> None:
    """Same seed, same state and fixture; another seed, another."""
    build = domain(client.domain).fixture
    first = client.reset(SEED)
    assert client.reset(SEED) == first
    assert client.state()["hash"] == first
    assert client.reset(SEED + 1) != first
    assert build(SEED) == build(SEED)
    assert build(SEED) != build(SEED + 1)


def assert_reset_undoes_gold_plan(client: ServiceClient, wf: WorkflowSpec) -> None:
    """After the gold plan has changed the state, a reset restores the seeded hash in place
    and empties the commit log."""
    fresh = client.reset()
    run_gold_plan(client, wf, params_for(wf, client.seed))
    assert client.state()["hash"] != fresh
    assert client.reset() == fresh
    assert client.commit_log() == []


def assert_gold_plan_is_reproducible(client: ServiceClient, wf: WorkflowSpec) -> list[Any]:
    """The same seed and the same calls give the same ids, timestamps and final state. The
    response bodies of the first run."""
    params = params_for(wf, client.seed)
    runs = []
    for _ in range(2):
        client.reset()
        bodies = run_gold_plan(client, wf, params)
        runs.append((bodies, client.state()["hash"]))
    assert runs[0] == runs[1]
    return runs[0][0]


def assert_routes_declare_effects(client: ServiceClient) -> set[tuple[str, str]]:
    """Every route is a documented tool; reads say so, mutations declare effect class, op,
    identity and protection, and take an Idempotency-Key header exactly when it is native.
    The (effect_class, idempotency) pairs of the mutating routes."""
    classes: set[tuple[str, str]] = set()
    for path, ops in client.app.openapi()["paths"].items():
        for method, op in ops.items():
            meta = op["x-undobench"]
            assert op["operationId"] and op.get("description"), path
            if method == "get":
                assert meta == {"read_only": True}, path
                continue
            assert meta["effect_class"] in EFFECT_CLASSES, path
            assert meta["idempotency"] in IDEMPOTENCY, path
            assert meta["op"] and meta["identity"], path
            headers = [p["name"] for p in op.get("parameters", []) if p["in"] == "header"]
            assert headers == ([KEY_HEADER] if meta["idempotency"] == "native" else []), path
            classes.add((meta["effect_class"], meta["idempotency"]))
    return classes


def assert_workflow_is_consistent(client: ServiceClient, wf: WorkflowSpec, prefix: str) -> None:
    """A workflow fits its service: known tools, a gold plan within them whose arguments fit
    the tool schemas, faults aimed at mutating gold calls, a lost ack on every test task."""
    assert wf.domain == client.domain and wf.id.startswith(prefix), wf.id
    gold_tools = [s.tool for s in wf.gold_plan]
    for tool in [*wf.tools, *gold_tools]:
        assert tool in client.tools, f"{wf.id}: unknown tool {tool}"
    assert set(gold_tools) <= set(wf.tools), wf.id
    for sc in wf.scenarios:
        if sc.target.tool is not None:
            assert sc.target.tool in gold_tools, f"{wf.id}/{sc.id} never fires"
            assert not client.tools[sc.target.tool].read_only, f"{wf.id}/{sc.id}"
    if wf.split == "test":
        assert any(s.boundary is Boundary.POST_MUTATION_PRE_ACK for s in wf.scenarios), wf.id
    assert_gold_arguments_fit(client, wf)


def assert_gold_arguments_fit(client: ServiceClient, wf: WorkflowSpec) -> None:
    """The env validates every call against the tool schema generated from OpenAPI: the
    filled gold arguments must pass it."""
    params = params_for(wf)
    for step in wf.gold_plan:
        validator = Draft202012Validator(client.tools[step.tool].parameters)
        errors = [e.message for e in validator.iter_errors(fill(step.arguments, params))]
        assert errors == [], (wf.id, step.tool, errors)


# ---- input validation and idempotency keys -------------------------------------------


@contextmanager
def unchanged(client: ServiceClient) -> Iterator[None]:
    """The block commits nothing and leaves the state hash as it was."""
    before, log = client.state()["hash"], client.commit_log()
    yield
    assert client.commit_log() == log, "a refused request left a commit"
    assert client.state()["hash"] == before, "a refused request changed the state"


def refused(
    client: ServiceClient,
    method: str,
    path: str,
    *,
    json: Any = None,
    content: bytes | None = None,
) -> Response:
    """A raw request (a JSON body, or `content` sent as JSON) is answered 4xx."""
    res: Response
    if content is None:
        res = client.public.request(method, path, json=json)
    else:
        res = client.public.request(method, path, content=content, headers=JSON_HEADERS)
    assert 400 <= res.status_code < 500, (method, path, res.status_code, res.text)
    return res


def assert_rejected(
    client: ServiceClient,
    method: str,
    path: str,
    *,
    json: Any = None,
    content: bytes | None = None,
) -> Response:
    """The request is refused (4xx) and changes nothing."""
    with unchanged(client):
        return refused(client, method, path, json=json, content=content)


def assert_malformed_json_rejected(
    client: ServiceClient, routes: Iterable[tuple[str, str]], raw: bytes
) -> None:
    """Each (method, path) refuses the unparsable body `raw`, and none has an effect."""
    with unchanged(client):
        for method, path in routes:
            refused(client, method, path, content=raw)


def assert_key_replays(
    client: ServiceClient,
    tool: str,
    args: Mapping[str, Any],
    key: str,
    *,
    changed: Mapping[str, Any] | None = None,
    status: int = 201,
) -> Response:
    """A repeat under the same key replays the first answer, flagged Idempotent-Replayed; the
    key with another payload (`args` updated by `changed`) is refused (422). The first answer."""
    headers = {KEY_HEADER: key}
    first = client.call(tool, args, headers=headers)
    again = client.call(tool, args, headers=headers)
    assert first.status_code == again.status_code == status, (first.text, again.text)
    assert again.json() == first.json()
    assert again.headers.get("Idempotent-Replayed") == "true"
    if changed is not None:
        other = client.call(tool, {**args, **changed}, headers=headers)
        assert other.status_code == 422, other.text
    return first


def assert_key_ignored_unless_all(
    client: ServiceClient, tool: str, args: Mapping[str, Any], *, status: int = 201
) -> None:
    """Where keys are not native a keyed repeat commits twice; once the server honours keys
    on every route (idempotency_mode=all) a keyed repeat is a replay."""
    committed = len(client.commit_log())
    for _ in range(2):
        res = client.call(tool, args, headers={KEY_HEADER: "ignored-here"})
        assert res.status_code == status, res.text
    assert len(client.commit_log()) == committed + 2
    client.configure(idempotency_mode="all")
    assert client.call(tool, args, headers={KEY_HEADER: "honoured"}).status_code == status
    replay = client.call(tool, args, headers={KEY_HEADER: "honoured"})
    assert replay.status_code == status and replay.headers.get("Idempotent-Replayed") == "true"
    assert len(client.commit_log()) == committed + 3
