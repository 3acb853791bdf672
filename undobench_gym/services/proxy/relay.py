"""Keep a relayed TCP connection from holding everything it relayed.

The admin port is relayed in `reverse:tcp` mode, and mitmproxy appends every message of
a TCP flow to `flow.messages` for the connection's lifetime; the env keeps one admin
connection alive for the whole stack, so each /admin/state answer stayed in the proxy's
memory. The TCP layer sends its own reference to the message after this hook, so dropping
the flow's earlier messages here is safe; the current one stays as `messages[-1]` for
addons that read it later in the chain (mitmproxy's dumper does).
"""

from __future__ import annotations

from mitmproxy import tcp


class RelayTrim:
    def tcp_message(self, flow: tcp.TCPFlow) -> None:
        del flow.messages[:-1]
