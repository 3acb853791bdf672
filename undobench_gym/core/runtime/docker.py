"""The docker runtime: a stack's service and fault proxy in containers.

Per stack: an `internal` network (no route out of it) holding the service container,
which publishes nothing; the proxy container sits on that network and on an edge
bridge, and publishes on 127.0.0.1 only its agent port, its control port, and a raw TCP
relay to the service's admin port (so the admin API is reachable from the host but never
through the agent's HTTP route). The admin and control APIs answer only the stack's token,
made here and passed to both containers in their environment. Every container, network
and volume carries labels; `gc()` removes leftovers by label.

Restarts are ours, not the engine's: both containers have restart policy "no", and
`wait_healthy(probe=True)` (which the env calls after any failed call, at each reset and
at the end of each episode) starts an exited container at once, every time. The engine's
on-failure policy would double its delay for each container that ran under 10 s, so
consecutive crash-point episodes would get slower until wait_healthy timed out. A crash
point exits the service process; it comes back on the same volume, so its partial state
is still there. The service runs as a fork server (`envs._service.server`), so a crash
point ends the serving process but not the container: the zygote forks a new one in tens
of milliseconds, and each admin health answer lists the exits since the zygote started,
which `wait_healthy(probe=True)` counts like container exits.

The proxy's host ports are chosen at creation (the engine would hand out new ephemeral
ports on every start), so the endpoints stay valid across restarts. As
nothing else starts a container, each exit is seen before the stack answers again:
`unplanned_exits` counts the ones the fault plan did not ask for (the service exiting
with any code but `CRASH_EXIT_CODE`, the proxy exiting at all).

The engine (docker 20.10) still gives an internal network's bridge a gateway address on
the host, and traffic from the bridge to the host is local delivery (the INPUT chain),
which the engine's isolation rules never see. So for the stack's lifetime the runtime
inserts `iptables -I INPUT -i br-<network id[:12]> -j DROP` (services never need the
host; the proxy reaches the service across the bridge, which is not INPUT); `close()`,
the finalizer (also at interpreter exit) and `gc()` remove it. Where iptables is missing
or fails (not root), a warning is logged once and the stack runs without that rule.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import threading
import time
import uuid
import weakref
from typing import Any

import docker.errors
import httpx
from docker.types import EndpointConfig

from undobench_gym.contract.errors import StackStartError, StackUnhealthyError
from undobench_gym.contract.stack_auth import TOKEN_ENV, auth_headers, new_token
from undobench_gym.core import catalog
from undobench_gym.core.runtime.base import CRASH_EXIT_CODE, Runtime, StackEndpoints
from undobench_gym.core.runtime.children import PORT_ATTEMPTS, free_port, restart_mode
from undobench_gym.core.runtime.hostrule import HostInputDrop, bridge_name
from undobench_gym.core.runtime.images import LABEL, PROJECT, current_image, docker_client

STACK_LABEL = "io.undobench.stack"
ROLE_LABEL = "io.undobench.role"
SERVICE_PORT, ADMIN_PORT, AGENT_PORT, CONTROL_PORT = 8000, 9000, 8080, 8081
READY_TIMEOUT_S = 60.0


def _labels(stack: str, role: str) -> dict[str, str]:
    return {LABEL: PROJECT, STACK_LABEL: stack, ROLE_LABEL: role}


def _logs(container: Any, lines: int = 30) -> str:
    try:
        return str(container.logs(tail=lines).decode(errors="replace"))
    except Exception:
        return "(no logs)"


class DockerRuntime(Runtime):
    def __init__(self, domain: str, image: str | None = None, restart: str | None = None) -> None:
        self.domain = domain
        self.restart_mode = restart_mode(restart)
        self.client = docker_client()
        self.image = image or current_image(self.client)
        self.stack_id = f"{domain}-{uuid.uuid4().hex[:8]}"
        self._objects: list[Any] = []  # in creation order; removed in reverse
        self._service: Any = None
        self._proxy: Any = None
        self._endpoints: StackEndpoints | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._restarts = 0
        self._unplanned = 0
        self._last_exit: dict[str, str] = {}  # role -> State.FinishedAt of the exit counted
        self._fork_exits: tuple[str, int] = ("", 0)  # (fork server boot id, exits counted)
        self.exits: list[tuple[str, int]] = []  # (role, exit code), in the order seen
        self.token = new_token()  # the admin and control APIs answer only this
        self._http = httpx.Client(timeout=5.0, headers=auth_headers(self.token))
        self._finalizer = weakref.finalize(self, DockerRuntime._remove, self._objects)
        atexit.register(self._finalizer)

    @staticmethod
    def _remove(objects: list[Any]) -> None:
        for obj in reversed(objects):
            with contextlib.suppress(Exception):
                if isinstance(obj, HostInputDrop):
                    obj.remove()
                elif hasattr(obj, "containers") and hasattr(obj, "disconnect"):
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
        drop = HostInputDrop(bridge_name(internal))
        if drop.install():
            self._objects.append(drop)
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
                *(["--fork-server"] if self.restart_mode == "fork" else []),
            ],
            name=f"undobench-{sid}-{d}",
            labels=_labels(sid, "service"),
            network=internal.name,
            networking_config={
                internal.name: EndpointConfig(version=self.client.api._version, aliases=[d])
            },
            volumes={volume.name: {"bind": "/data", "mode": "rw"}},
            environment={TOKEN_ENV: self.token},
            restart_policy={"Name": "no"},
            detach=True,
        )
        self._objects.append(self._service)
        self._service.start()
        ports = self._start_proxy(internal, edge)
        endpoints = StackEndpoints(
            agent_url=f"http://127.0.0.1:{ports[AGENT_PORT]}",
            control_url=f"http://127.0.0.1:{ports[CONTROL_PORT]}",
            admin_urls={d: f"http://127.0.0.1:{ports[ADMIN_PORT]}"},
            token=self.token,
        )
        self._endpoints = endpoints
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._answers():
                return endpoints
            for c in (self._service, self._proxy):
                c.reload()
                if c.status == "exited":  # no restart policy: a start that failed
                    raise StackStartError(
                        f"docker stack {sid}: {c.name} exited "
                        f"({c.attrs['State'].get('ExitCode')}) while starting.\n"
                        f"logs:\n{_logs(c)}"
                    )
            time.sleep(0.1)
        raise StackStartError(
            f"docker stack {sid} not ready after {READY_TIMEOUT_S:.0f}s.\n"
            f"service logs:\n{_logs(self._service)}\nproxy logs:\n{_logs(self._proxy)}"
        )

    def _start_proxy(self, internal: Any, edge: Any) -> dict[int, int]:
        """Create and start the proxy on host ports chosen here, so that they survive
        its restarts; returns container port -> host port."""
        sid, d = self.stack_id, self.domain
        routes = json.dumps({d: f"{d}:{SERVICE_PORT}"})
        tools = json.dumps(catalog.domain(d).proxy_routes())
        command = [
            "undobench-proxy",
            "--mode",
            f"reverse:http://{d}:{SERVICE_PORT}@0.0.0.0:{AGENT_PORT}",
            "--mode",
            f"reverse:tcp://{d}:{ADMIN_PORT}@0.0.0.0:{ADMIN_PORT}",
            "--set",
            f"undobench_routes={routes}",
            "--set",
            f"undobench_tools={tools}",
            "--set",
            f"undobench_control_port={CONTROL_PORT}",
            "--set",
            "undobench_control_host=0.0.0.0",
        ]
        for attempt in range(PORT_ATTEMPTS):
            ports = {p: free_port() for p in (AGENT_PORT, CONTROL_PORT, ADMIN_PORT)}
            self._proxy = self.client.containers.create(
                self.image,
                command=command,
                name=f"undobench-{sid}-proxy",
                labels=_labels(sid, "proxy"),
                network=edge.name,
                ports={f"{p}/tcp": ("127.0.0.1", host) for p, host in ports.items()},
                environment={TOKEN_ENV: self.token},
                restart_policy={"Name": "no"},
                detach=True,
            )
            self._objects.append(self._proxy)
            internal.connect(self._proxy)
            try:
                self._proxy.start()
            except docker.errors.APIError:
                if attempt == PORT_ATTEMPTS - 1:
                    raise
                self._objects.remove(self._proxy)
                self._proxy.remove(force=True)  # a port was taken meanwhile: new ones
                continue
            return ports
        raise AssertionError("unreachable")

    def _answers(self) -> bool:
        ep = self._endpoints
        if ep is None:
            return False
        try:
            for url in ep.admin_urls.values():
                health = self._http.get(f"{url}/admin/health", timeout=2)
                health.raise_for_status()
                self._count_fork_exits(health.json())
            self._http.get(f"{ep.control_url}/control/health", timeout=2).raise_for_status()
        except (httpx.HTTPError, ValueError):
            return False
        return True

    def _count_fork_exits(self, health: dict[str, Any]) -> None:
        """The fork server's exits that this runtime has not counted yet."""
        boot, codes = str(health.get("boot", "")), list(health.get("exits") or [])
        with self._lock:
            seen_boot, seen = self._fork_exits
            new = codes[seen:] if boot == seen_boot else codes
            for code in new:
                self.exits.append(("service", int(code)))
                self._restarts += 1
                if code != CRASH_EXIT_CODE:
                    self._unplanned += 1
            self._fork_exits = (boot, len(codes))

    def _revive(self) -> None:
        """Start every exited container now, counting each exit once (by its end time)."""
        with self._lock:
            if self._closed:
                return
            for role, c in (("service", self._service), ("proxy", self._proxy)):
                c.reload()
                if c.status not in ("exited", "dead", "created"):
                    continue
                state = c.attrs["State"]
                finished = str(state.get("FinishedAt") or "")
                exited = c.status != "created"  # "created": a first start that failed
                if exited and self._last_exit.get(role) != finished:
                    self._last_exit[role] = finished
                    code = int(state.get("ExitCode", -1))
                    self.exits.append((role, code))
                    if role == "proxy" or code != CRASH_EXIT_CODE:
                        self._unplanned += 1
                c.start()
                self._restarts += exited

    def wait_healthy(self, timeout: float = 60.0, probe: bool = False) -> None:
        """Without `probe`, nothing (no docker call: the env calls this before every
        step). With it, start any exited container and wait until both answer."""
        if not probe:
            return
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self._answers():
                return
            try:
                self._revive()
            except Exception as exc:  # the engine refused (a port taken, a removed container)
                last = exc
            time.sleep(0.05)
        raise StackUnhealthyError(
            f"docker stack {self.stack_id} not healthy after {timeout:.0f}s"
            f"{f' (last error: {last})' if last else ''}.\n"
            f"service logs:\n{_logs(self._service)}\nproxy logs:\n{_logs(self._proxy)}"
        )

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._remove(self._objects)
        self._http.close()
        self._finalizer.detach()


def gc(client: Any | None = None, stack: str | None = None) -> dict[str, int]:
    """Remove every container, network and volume of this project (by label), or only
    those of one stack, and the host INPUT rule of each internal network removed."""
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
            internal = (n.attrs.get("Labels") or {}).get(ROLE_LABEL) == "internal"
            n.remove()
            counts["networks"] += 1
            if internal:
                HostInputDrop(bridge_name(n)).remove()
    for v in client.volumes.list(filters=selector):
        with contextlib.suppress(Exception):
            v.remove(force=True)
            counts["volumes"] += 1
    return counts
