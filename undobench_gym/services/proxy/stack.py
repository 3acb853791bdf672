"""The addon script a stack's mitmdump loads: `mitmdump -s .../stack.py`.

Order matters: strip client headers, number the call, inject the fault, route, record.
Last, the TCP relay (the admin port in docker) forgets what it relayed.
"""

from __future__ import annotations

from undobench_gym.services.proxy.control import ControlServer
from undobench_gym.services.proxy.fault import FaultInjector
from undobench_gym.services.proxy.guard import HeaderGuard
from undobench_gym.services.proxy.relay import RelayTrim
from undobench_gym.services.proxy.routing import Router
from undobench_gym.services.proxy.state import STATE
from undobench_gym.services.proxy.wire import CallCounter, WireCapture

addons = [
    HeaderGuard(),
    CallCounter(STATE),
    FaultInjector(STATE),
    Router(STATE),
    WireCapture(STATE),
    ControlServer(STATE),
    RelayTrim(),
]
