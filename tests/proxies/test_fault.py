"""Every fault boundary, by calling the addon hooks on mitmproxy's fake flows (no network)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from mitmproxy import http
from mitmproxy.flow import Error
from mitmproxy.test import taddons, tflow
from undobench_gym.proxies.fault import FaultInjector
from undobench_gym.proxies.guard import HeaderGuard
from undobench_gym.proxies.routing import Router
from undobench_gym.proxies.state import CRASH_HEADER, EpisodeState, FaultPlan
from undobench_gym.proxies.wire import CallCounter, WireCapture

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


def test_nth_call_and_global_index_targets() -> None:
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

    by_index = make_state(scenario="s", action="drop_request", call_index=2)
    a, b = flow("GET", "/payments/v1/charges/ch_1"), flow()
    run_request(by_index, a)
    run_request(by_index, b)
    assert a.error is None and b.error is not None


def test_fires_only_once_per_episode() -> None:
    state = make_state(scenario="s", action="drop_request", call_index=1)
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
        {"scenario": "s", "action": "explode", "call_index": 1},
        {"scenario": "s", "action": "drop_request"},
        {"scenario": "s", "action": "crash", "call_index": 1},
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
