"""The TCP relay addon: a long-lived relayed connection keeps no history (no network)."""

from __future__ import annotations

from typing import Any

from mitmproxy import options, tcp
from mitmproxy.proxy import commands, events
from mitmproxy.proxy.context import Context
from mitmproxy.proxy.layers.tcp import TCPLayer, TcpMessageHook
from mitmproxy.test import tflow

from undobench_gym.services.proxy.relay import RelayTrim


def test_keeps_only_the_message_in_flight() -> None:
    trim, f = RelayTrim(), tflow.ttcpflow()
    for i in range(1000):
        message = tcp.TCPMessage(i % 2 == 0, b"x" * 4096)
        f.messages.append(message)  # what mitmproxy's TCP layer does before the hook
        trim.tcp_message(f)
        assert f.messages == [message]  # later addons still find it as messages[-1]
    assert f.messages[-1].content == b"x" * 4096


def _drive(layer: TCPLayer, event: events.Event, trim: RelayTrim) -> list[commands.Command]:
    """Feed one event to the layer, answering its blocking commands as the proxy would."""
    out: list[commands.Command] = []
    pending: list[events.Event] = [event]
    while pending:
        for command in layer.handle_event(pending.pop()):
            out.append(command)
            if isinstance(command, TcpMessageHook):
                trim.tcp_message(command.flow)
                pending.append(events.HookCompleted(command))
            elif isinstance(command, commands.StartHook):
                pending.append(events.HookCompleted(command))
            elif isinstance(command, commands.OpenConnection):
                command.connection.timestamp_start = 1.0
                pending.append(events.OpenConnectionCompleted(command, None))
    return out


def test_the_tcp_layer_still_relays_every_byte() -> None:
    """Dropping messages inside the hook is safe: the layer sends its own reference to
    the message after the hook (checked against the installed mitmproxy)."""
    trim = RelayTrim()
    f: Any = tflow.ttcpflow()
    ctx = Context(f.client_conn, options.Options())
    ctx.server = f.server_conn
    ctx.server.timestamp_start = None
    layer = TCPLayer(ctx)
    _drive(layer, events.Start(), trim)
    sent: list[tuple[Any, bytes]] = []
    for i in range(200):
        from_client = i % 2 == 0
        data = f"message {i} ".encode() * 100
        conn = ctx.client if from_client else ctx.server
        for command in _drive(layer, events.DataReceived(conn, data), trim):
            if isinstance(command, commands.SendData):
                sent.append((command.connection, command.data))
        assert sent[-1] == (ctx.server if from_client else ctx.client, data)
        assert layer.flow is not None and len(layer.flow.messages) == 1
    assert len(sent) == 200
