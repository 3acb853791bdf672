"""Every fault boundary, by calling the addon hooks on mitmproxy's fake flows (no network)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from mitmproxy import http
from mitmproxy.flow import Error
from mitmproxy.test import taddons, tflow

from undobench_gym.services.proxy.fault import FaultInjector
from undobench_gym.services.proxy.guard import HeaderGuard
from undobench_gym.services.proxy.routing import Router
from undobench_gym.services.proxy.state import CRASH_HEADER, EpisodeState, FaultPlan
from undobench_gym.services.proxy.wire import CallCounter, WireCapture

TOOLS = [
    {"name": "create_charge", "method": "POST", "path": "/payments/v1/charges"},
    {
        "name": "get_charge",
        "method": "GET",
        "path": "/payments/v1/charges/{charge_id}",
        "read_only": True,
    },
]


def make_state(**plan: Any) -> EpisodeState:
    state = EpisodeState()
    state.set_routes(TOOLS)
    state.begin("ep1", FaultPlan.from_json(plan) if plan else None)
    return state


def flow(method: str = "POST", path: str = "/payments/v1/charges") -> http.HTTPFlow:
    f = tflow.tflow(req=tflow.treq(method=method.encode(), path=path.encode()))
    f.response = None
    return f


def run_request(state: EpisodeState, f: http.HTTPFlow) -> None:
    HeaderGuard().request(f)
    CallCounter(state).request(f)
    asyncio.run(FaultInjector(state).request(f))
    WireCapture(state)  # recording happens in response/error


def respond(state: EpisodeState, f: http.HTTPFlow, status: int = 201) -> None:
    f.response = tflow.tresp(status_code=status)
    asyncio.run(FaultInjector(state).response(f))
    WireCapture(state).response(f)


def test_pre_mutation_kills_before_forwarding() -> None:
    state = make_state(scenario="s", action="drop_request", tool="create_charge")
    f = flow()
    run_request(state, f)
    assert f.error is not None and f.error.msg == Error.KILLED_MESSAGE
    assert state.fired and state.fault is not None and state.fault["stage"] == "request"
    assert f.metadata["ub_forwarded"] is False


def test_pre_mutation_503_looks_like_a_gateway() -> None:
    state = make_state(
        scenario="s", action="drop_request", tool="create_charge", visible_error="http_503"
    )
    f = flow()
    run_request(state, f)
    assert f.response is not None and f.response.status_code == 503
    assert b"upstream connect error" in f.response.content
    assert "mitmproxy" not in str(f.response.headers).lower()
    assert "inject" not in f.response.text.lower()


def test_lost_ack_forwards_then_drops_the_response() -> None:
    state = make_state(scenario="s", action="drop_response", tool="create_charge")
    f = flow()
    run_request(state, f)
    assert f.error is None and not state.fired  # forwarded untouched
    respond(state, f, 201)
    assert state.fired and state.fault is not None
    assert state.fault["committed"] is True and state.fault["upstream_status"] == 201
    assert f.error is not None and f.error.msg == Error.KILLED_MESSAGE
    assert state.events[-1]["upstream_status"] == 201


def test_timeout_holds_then_kills() -> None:
    state = make_state(
        scenario="s",
        action="drop_response",
        tool="create_charge",
        visible_error="timeout",
        timeout_s=0.05,
    )
    f = flow()
    run_request(state, f)
    respond(state, f)
    assert f.error is not None and state.fired


def test_crash_arms_header_and_fires_on_broken_connection() -> None:
    state = make_state(
        scenario="s",
        action="crash",
        tool="create_charge",
        crash_point="payout.after_first_transfer",
    )
    f = flow()
    run_request(state, f)
    assert f.request.headers[CRASH_HEADER] == "payout.after_first_transfer"
    assert not state.fired
    f.error = Error("server closed connection")
    asyncio.run(FaultInjector(state).error(f))
    assert state.fired and state.fault is not None and state.fault["stage"] == "crash"


def test_crash_point_not_reached_does_not_fire() -> None:
    state = make_state(scenario="s", action="crash", tool="create_charge", crash_point="x.y")
    f = flow()
    run_request(state, f)
    respond(state, f, 400)
    assert not state.fired and f.response is not None and f.response.status_code == 400


def test_nth_call_of_a_named_tool_is_targeted() -> None:
    state = make_state(scenario="s", action="drop_request", tool="create_charge", nth=2)
    first, read, second = flow(), flow("GET", "/payments/v1/charges/ch_1"), flow()
    for f in (first, read, second):
        run_request(state, f)
    assert first.error is None and read.error is None and second.error is not None
    assert [first.metadata["ub_index"], read.metadata["ub_index"], second.metadata["ub_index"]] == [
        1,
        2,
        3,
    ]
    assert read.metadata["ub_tool"] == "get_charge" and second.metadata["ub_nth"] == 2


def test_a_fault_never_lands_on_a_read_only_call() -> None:
    state = make_state(scenario="s", action="drop_request", tool="get_charge")
    read = flow("GET", "/payments/v1/charges/ch_1")
    run_request(state, read)
    assert read.error is None and read.response is None and not state.fired


def test_a_lost_ack_on_a_refused_call_is_not_fired() -> None:
    state = make_state(scenario="s", action="drop_response", tool="create_charge")
    f = flow()
    run_request(state, f)
    respond(state, f, 402)
    assert not state.fired and state.fault is None
    assert f.error is None and f.response is not None and f.response.status_code == 402
    assert state.target is not None and state.target["reason"] == "refused"
    assert state.snapshot()["target"]["upstream_status"] == 402
    again = flow()  # the plan named the first call: a later one is not hit instead
    run_request(state, again)
    respond(state, again, 201)
    assert not state.fired and again.error is None


def test_wire_settles_only_when_held_flows_are_recorded() -> None:
    state = make_state(scenario="s", action="drop_response", tool="create_charge")
    f = flow()
    run_request(state, f)
    assert state.in_flight == 1 and not state.wait_settled(0.01)
    respond(state, f, 201)
    assert state.in_flight == 0 and state.wait_settled(0.01)
    assert len(state.snapshot()["events"]) == 1


@pytest.mark.parametrize("action", ["drop_request", "drop_response"])
def test_ambiguous_padding_hides_the_coin_in_latency(action: str) -> None:
    state = make_state(scenario="s", action=action, tool="create_charge", pad_s=0.2)
    f = flow()
    t0 = time.monotonic()
    run_request(state, f)
    if action == "drop_response":
        respond(state, f, 201)
    assert f.error is not None and time.monotonic() - t0 >= 0.2


def test_fires_only_once_per_episode() -> None:
    state = make_state(scenario="s", action="drop_request", tool="create_charge")
    a = flow()
    run_request(state, a)
    state.begin("ep2", None)
    b = flow()
    run_request(state, b)
    assert b.error is None and not state.fired and b.metadata["ub_index"] == 1


def test_client_cannot_arm_a_fault() -> None:
    state = make_state()
    f = flow()
    f.request.headers[CRASH_HEADER] = "payout.after_first_transfer"
    f.request.headers["X-UndoBench-Anything"] = "1"
    run_request(state, f)
    assert CRASH_HEADER not in f.request.headers
    assert "x-undobench-anything" not in f.request.headers


def test_unplanned_backend_failure_is_a_reset_not_a_mitmproxy_page() -> None:
    state = make_state()
    f = flow()
    run_request(state, f)
    f.error = Error("server closed connection")
    asyncio.run(FaultInjector(state).error(f))
    assert f.error.msg == Error.KILLED_MESSAGE and not state.fired


def test_router_rewrites_by_prefix_and_404s_unknown() -> None:
    with taddons.context() as tctx:
        router = Router(EpisodeState())
        tctx.master.addons.add(router)
        tctx.configure(router, undobench_routes='{"payments": "127.0.0.1:9001"}')
        f = flow("GET", "/payments/v1/balance")
        router.request(f)
        assert (f.request.host, f.request.port, f.request.path) == (
            "127.0.0.1",
            9001,
            "/v1/balance",
        )
        g = flow("GET", "/admin/reset")
        router.request(g)
        assert g.response is not None and g.response.status_code == 404


@pytest.mark.parametrize(
    "bad",
    [
        {"scenario": "s", "action": "explode", "tool": "create_charge"},
        {"scenario": "s", "action": "drop_request"},
        {"scenario": "s", "action": "drop_request", "call_index": 2},
        {"scenario": "s", "action": "drop_request", "tool": "create_charge", "nth": 0},
        {"scenario": "s", "action": "crash", "tool": "create_charge"},
    ],
)
def test_bad_plans_are_rejected(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        FaultPlan.from_json(bad)


def test_a_late_flow_of_the_previous_episode_is_not_recorded() -> None:
    state = make_state(scenario="s", action="drop_response", tool="create_charge")
    late = flow()
    run_request(state, late)
    state.begin("ep2", None)  # the env moved on while the first call was still held
    respond(state, late, 201)
    assert state.events == [] and not state.fired
    fresh = flow()
    run_request(state, fresh)
    respond(state, fresh, 201)
    assert [e["index"] for e in state.events] == [1]


def _cascade(*then: dict[str, Any], **first: Any) -> EpisodeState:
    state = EpisodeState()
    state.set_routes(TOOLS)
    state.begin("ep1", FaultPlan.from_json(first), [FaultPlan.from_json(t) for t in then])
    return state


def test_a_later_fault_takes_the_next_mutating_call_after_the_earlier_one() -> None:
    """The retry of a lost call is dropped too; reads between them are never hit."""
    state = _cascade(
        {"scenario": "s", "action": "drop_request", "after": 0},
        scenario="s",
        action="drop_response",
        tool="create_charge",
    )
    first, read, retry, third = flow(), flow("GET", "/payments/v1/charges/ch_1"), flow(), flow()
    run_request(state, first)
    respond(state, first, 201)
    for f in (read, retry, third):
        run_request(state, f)
    assert first.error is not None and read.error is None
    assert retry.error is not None and retry.metadata["ub_forwarded"] is False
    assert third.error is None  # each plan takes one call
    snap = state.snapshot()
    assert [f["stage"] for f in snap["faults"]] == ["response", "request"]
    assert [f["index"] for f in snap["faults"]] == [1, 3]
    assert [f["fault"] for f in snap["faults"]] == [0, 1]
    assert snap["fault"] == snap["faults"][0] and snap["fault_fired"]


def test_a_later_fault_never_fires_before_the_earlier_one() -> None:
    state = _cascade(
        {"scenario": "s", "action": "drop_request", "after": 0},
        scenario="s",
        action="drop_response",
        tool="create_charge",
        nth=2,
    )
    f = flow()
    run_request(state, f)
    respond(state, f, 201)
    assert f.error is None and state.snapshot()["faults"] == [None, None]


def test_mark_ack_leaves_the_wire_alone_and_arms_the_next_fault() -> None:
    """A worker crash's acknowledgement is noted, not touched; the next call is faulted."""
    state = _cascade(
        {"scenario": "s", "action": "drop_response", "after": 0},
        scenario="s",
        action="mark_ack",
        tool="create_charge",
    )
    acked, again = flow(), flow()
    run_request(state, acked)
    respond(state, acked, 201)
    assert acked.error is None and acked.response is not None
    run_request(state, again)
    respond(state, again, 201)
    assert again.error is not None
    assert [f["stage"] for f in state.snapshot()["faults"]] == ["post_ack", "response"]


def test_a_refused_later_target_is_recorded_as_missed() -> None:
    state = _cascade(
        {"scenario": "s", "action": "drop_response", "after": 0},
        scenario="s",
        action="drop_request",
        tool="create_charge",
    )
    a, b = flow(), flow()
    run_request(state, a)
    run_request(state, b)
    respond(state, b, 409)
    snap = state.snapshot()
    assert snap["faults"][1] is None and snap["targets"][1]["reason"] == "refused"
    assert snap["target"] is None  # the first fault fired: it missed nothing


@pytest.mark.parametrize(
    "then",
    [
        [{"scenario": "s", "action": "drop_request", "after": 1}],  # follows itself
        [{"scenario": "s", "action": "drop_request"}],  # no target at all
        [{"scenario": "s", "action": "drop_request", "after": 0, "tool": "create_charge"}],
    ],
)
def test_a_malformed_schedule_is_refused(then: list[dict[str, Any]]) -> None:
    from undobench_gym.contract import EpisodeStart

    with pytest.raises(ValueError):
        EpisodeStart(
            episode_id="e",
            plan=FaultPlan(scenario="s", action="drop_request", tool="create_charge"),
            then=[FaultPlan.from_json(t) for t in then],
        )
