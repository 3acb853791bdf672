"""The docker runtime: a stack's service and fault proxy in containers.

Per stack: an `internal` network (no route out of it) holding the service container,
which publishes nothing; the proxy container sits on that network and on an edge
bridge, and publishes on 127.0.0.1 only its agent port, its control port, and a raw TCP
relay to the service's admin port (so the admin API is reachable from the host but never
through the agent's HTTP route). A crash point exits the service process; the restart
policy brings it back on the same volume, so its partial state is still there. Every
container, network and volume carries labels; `gc()` removes leftovers by label.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import time
import uuid
import weakref
from typing import Any

import httpx
from docker.types import EndpointConfig

from ..errors import StackStartError, StackUnhealthyError
from .base import Runtime, StackEndpoints
from .images import LABEL, PROJECT, current_image, docker_client

STACK_LABEL = "io.undobench.stack"
SERVICE_PORT, ADMIN_PORT, AGENT_PORT, CONTROL_PORT = 8000, 9000, 8080, 8081
READY_TIMEOUT_S = 60.0


def _labels(stack: str, role: str) -> dict[str, str]:
    return {LABEL: PROJECT, STACK_LABEL: stack, "io.undobench.role": role}


def _host_port(container: Any, port: int) -> int:
    container.reload()
    binding = container.ports.get(f"{port}/tcp")
    if not binding:
        raise StackStartError(f"container {container.name} publishes no port {port}")
    return int(binding[0]["HostPort"])


def _logs(container: Any, lines: int = 30) -> str:
    try:
        return str(container.logs(tail=lines).decode(errors="replace"))
    except Exception:
        return "(no logs)"


class DockerRuntime(Runtime):
    def __init__(self, domain: str, image: str | None = None) -> None:
        self.domain = domain
        self.client = docker_client()
        self.image = image or current_image(self.client)
        self.stack_id = f"{domain}-{uuid.uuid4().hex[:8]}"
        self._objects: list[Any] = []  # in creation order; removed in reverse
        self._service: Any = None
        self._proxy: Any = None
        self._endpoints: StackEndpoints | None = None
        self._closed = False
        self._http = httpx.Client(timeout=5.0)
        self._finalizer = weakref.finalize(self, DockerRuntime._remove, self._objects)
        atexit.register(self._finalizer)

    @staticmethod
    def _remove(objects: list[Any]) -> None:
        for obj in reversed(objects):
            with contextlib.suppress(Exception):
                if hasattr(obj, "containers") and hasattr(obj, "disconnect"):
                    obj.remove()  # network
                elif hasattr(obj, "stop"):
                    obj.remove(force=True, v=True)  # container
                else:
                    obj.remove(force=True)  # volume
        objects.clear()

    def start(self) -> StackEndpoints:
        if self._closed:
            raise StackStartError("this stack was closed; make a new runtime")
        if self._endpoints is not None:
            return self._endpoints
        try:
            self._endpoints = self._start()
        except BaseException:
            self.close()
            raise
        return self._endpoints

    def _start(self) -> StackEndpoints:
        sid, d = self.stack_id, self.domain
        internal = self.client.networks.create(
            f"undobench-{sid}-internal",
            driver="bridge",
            internal=True,
            labels=_labels(sid, "internal"),
        )
        self._objects.append(internal)
        edge = self.client.networks.create(
            f"undobench-{sid}-edge", driver="bridge", labels=_labels(sid, "edge")
        )
        self._objects.append(edge)
        volume = self.client.volumes.create(f"undobench-{sid}-data", labels=_labels(sid, "data"))
        self._objects.append(volume)
        self._service = self.client.containers.create(
            self.image,
            command=[
                "undobench-service",
                "--domain",
                d,
                "--data-dir",
                "/data",
                "--host",
                "0.0.0.0",
                "--port",
                str(SERVICE_PORT),
                "--admin-port",
                str(ADMIN_PORT),
            ],
            name=f"undobench-{sid}-{d}",
            labels=_labels(sid, "service"),
            network=internal.name,
            networking_config={
                internal.name: EndpointConfig(version=self.client.api._version, aliases=[d])
            },
            volumes={volume.name: {"bind": "/data", "mode": "rw"}},
            restart_policy={"Name": "on-failure"},
            detach=True,
        )
        self._objects.append(self._service)
        self._service.start()
        routes = json.dumps({d: f"{d}:{SERVICE_PORT}"})
        self._proxy = self.client.containers.create(
            self.image,
            command=[
                "undobench-proxy",
                "--mode",
                f"reverse:http://{d}:{SERVICE_PORT}@0.0.0.0:{AGENT_PORT}",
                "--mode",
                f"reverse:tcp://{d}:{ADMIN_PORT}@0.0.0.0:{ADMIN_PORT}",
                "--set",
                f"undobench_routes={routes}",
                "--set",
                f"undobench_control_port={CONTROL_PORT}",
                "--set",
                "undobench_control_host=0.0.0.0",
            ],
            name=f"undobench-{sid}-proxy",
            labels=_labels(sid, "proxy"),
            network=edge.name,
            ports={f"{p}/tcp": ("127.0.0.1", None) for p in (AGENT_PORT, CONTROL_PORT, ADMIN_PORT)},
            restart_policy={"Name": "on-failure"},
            detach=True,
        )
        self._objects.append(self._proxy)
        internal.connect(self._proxy)
        self._proxy.start()
        endpoints = StackEndpoints(
            agent_url=f"http://127.0.0.1:{_host_port(self._proxy, AGENT_PORT)}",
            control_url=f"http://127.0.0.1:{_host_port(self._proxy, CONTROL_PORT)}",
            admin_urls={d: f"http://127.0.0.1:{_host_port(self._proxy, ADMIN_PORT)}"},
        )
        self._endpoints = endpoints
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._answers():
                return endpoints
            for c in (self._service, self._proxy):
                c.reload()
                if c.status == "exited" and c.attrs["State"].get("ExitCode", 0) not in (0, 75):
                    break
            time.sleep(0.1)
        raise StackStartError(
            f"docker stack {sid} not ready after {READY_TIMEOUT_S:.0f}s.\n"
            f"service logs:\n{_logs(self._service)}\nproxy logs:\n{_logs(self._proxy)}"
        )

    def _answers(self) -> bool:
        ep = self._endpoints
        if ep is None:
            return False
        try:
            for url in ep.admin_urls.values():
                self._http.get(f"{url}/admin/health", timeout=2).raise_for_status()
            self._http.get(f"{ep.control_url}/control/health", timeout=2).raise_for_status()
        except httpx.HTTPError:
            return False
        return True

    def wait_healthy(self, timeout: float = 60.0, probe: bool = False) -> None:
        """The restart policy restarts crashed containers; with `probe`, wait until both
        answer again (and start a container the engine gave up on)."""
        if not probe:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._answers():
                return
            for c in (self._service, self._proxy):
                c.reload()
                if c.status == "exited":
                    c.start()
            time.sleep(0.05)
        raise StackUnhealthyError(
            f"docker stack {self.stack_id} not healthy after {timeout:.0f}s.\n"
            f"service logs:\n{_logs(self._service)}"
        )

    @property
    def endpoints(self) -> StackEndpoints:
        if self._endpoints is None:
            raise StackStartError("stack not started: call start() first")
        return self._endpoints

    @property
    def restarts(self) -> int:
        if self._service is None:
            return 0
        self._service.reload()
        return int(self._service.attrs.get("RestartCount", 0))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._remove(self._objects)
        self._http.close()
        self._finalizer.detach()


def gc(client: Any | None = None, stack: str | None = None) -> dict[str, int]:
    """Remove every container, network and volume of this project (by label), or only
    those of one stack."""
    client = client or docker_client()
    labels = [f"{LABEL}={PROJECT}"] + ([f"{STACK_LABEL}={stack}"] if stack else [])
    selector = {"label": labels}
    counts = {"containers": 0, "networks": 0, "volumes": 0}
    for c in client.containers.list(all=True, filters=selector):
        with contextlib.suppress(Exception):
            c.remove(force=True, v=True)
            counts["containers"] += 1
    for n in client.networks.list(filters=selector):
        with contextlib.suppress(Exception):
            n.remove()
            counts["networks"] += 1
    for v in client.volumes.list(filters=selector):
        with contextlib.suppress(Exception):
            v.remove(force=True)
            counts["volumes"] += 1
    return counts
