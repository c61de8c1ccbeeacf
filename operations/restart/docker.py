"""DockerDriver: restart a broker that runs as a docker-compose service.

The worker reaches the Docker engine through its HTTP API on a Unix socket (compose
mounts /var/run/docker.sock into the worker and sets QUILL_RESTART_DRIVER=docker). Broker
N is the container of compose service ``broker-N`` (QUILL_DOCKER_BROKER_SERVICE, a format
with ``{broker_id}``) in the worker's own compose project (the labels docker-compose puts
on every container), or in QUILL_COMPOSE_PROJECT when set. A restart is Docker's: SIGTERM
(the broker's controlled shutdown), SIGKILL after ``timeout`` seconds, start; the
rolling-restart job's safety gates (ISR, under-replicated partitions) run around it.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import time
import urllib.parse

from operations.restart.local import RestartError

DEFAULT_SOCKET = "/var/run/docker.sock"
API = "/v1.41"  # Docker 20.10 (Debian bookworm's docker.io) and every later engine
PROJECT_LABEL = "com.docker.compose.project"
SERVICE_LABEL = "com.docker.compose.service"


class DockerError(RestartError):
    """The engine refused or failed a request; the message says what and why."""


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


class DockerEngine:
    """The few calls of the Engine API the driver needs."""

    def __init__(self, socket_path: str = DEFAULT_SOCKET, timeout: float = 30.0) -> None:
        self.socket_path = socket_path
        self.timeout = timeout

    def request(self, method: str, path: str, timeout: float | None = None):
        conn = _UnixConnection(self.socket_path, timeout or self.timeout)
        try:
            conn.request(method, API + path)
            response = conn.getresponse()
            body = response.read()
        finally:
            conn.close()
        if response.status >= 400:
            try:
                message = json.loads(body)["message"]
            except (ValueError, KeyError):
                message = body.decode(errors="replace").strip()
            raise DockerError(f"{method} {path}: {response.status} {message}")
        return json.loads(body) if body and body.strip()[:1] in (b"{", b"[") else body

    def ping(self) -> None:
        self.request("GET", "/_ping", timeout=5.0)

    def containers(self, labels: list[str]) -> list[dict]:
        filters = urllib.parse.quote(json.dumps({"label": labels}))
        return self.request("GET", f"/containers/json?all=1&filters={filters}")

    def inspect(self, container: str) -> dict:
        return self.request("GET", f"/containers/{container}/json")

    def restart(self, container: str, stop_timeout: int) -> None:
        self.request("POST", f"/containers/{container}/restart?t={stop_timeout}", stop_timeout + 30)

    def stop(self, container: str, stop_timeout: int) -> None:
        self.request("POST", f"/containers/{container}/stop?t={stop_timeout}", stop_timeout + 30)


class DockerDriver:
    """Restarts broker containers through the Docker engine."""

    name = "docker"

    def __init__(
        self,
        socket_path: str | None = None,
        project: str | None = None,
        service: str | None = None,
    ) -> None:
        env = os.environ
        self.engine = DockerEngine(socket_path or env.get("QUILL_DOCKER_SOCKET", DEFAULT_SOCKET))
        self._project = project or env.get("QUILL_COMPOSE_PROJECT") or None
        self.service = service or env.get("QUILL_DOCKER_BROKER_SERVICE", "broker-{broker_id}")

    def available(self) -> str | None:
        """None when brokers can be restarted, else a sentence saying why not."""
        path = self.engine.socket_path
        if not os.path.exists(path):
            return f"no Docker socket at {path}: mount it into the worker (docker-compose.yml)"
        try:
            self.engine.ping()
        except PermissionError:
            return (
                f"no permission on the Docker socket {path}: run the worker in the socket's "
                f"group (QUILL_DOCKER_GID={_group_of(path)})"
            )
        except (OSError, DockerError) as exc:
            return f"the Docker engine at {path} does not answer: {exc}"
        try:
            self.project()
        except DockerError as exc:
            return str(exc)
        return None

    def project(self) -> str | None:
        """The compose project the brokers belong to: the worker's own, when it runs in
        a compose container; None (any project) otherwise."""
        if self._project is None:
            own = os.environ.get("HOSTNAME", "")  # a container's hostname is its id
            labels = {}
            if own:
                try:
                    labels = self.engine.inspect(own)["Config"]["Labels"] or {}
                except DockerError:
                    pass  # not running in a container
            self._project = labels.get(PROJECT_LABEL, "")
        return self._project or None

    def container(self, broker_id: int) -> dict:
        service = self.service.format(broker_id=broker_id)
        labels = [f"{SERVICE_LABEL}={service}"]
        if (project := self.project()) is not None:
            labels.append(f"{PROJECT_LABEL}={project}")
        found = self.engine.containers(labels)
        if len(found) != 1:
            where = f"compose project {project}" if project else "any compose project"
            raise DockerError(
                f"broker {broker_id}: expected one container of service {service} in {where}, "
                f"found {len(found)}"
            )
        return found[0]

    def restart(self, broker_id: int, timeout: float) -> dict:
        """Restart broker ``broker_id``'s container: SIGTERM, SIGKILL after ``timeout``
        seconds, start; returns once the container runs again, with the driver answer
        the rolling restart logs ({"old_pid", "new_pid", "message"}; raises DockerError)."""
        container = self.container(broker_id)["Id"]
        old = self.engine.inspect(container)["State"]
        self.engine.restart(container, max(1, int(timeout)))
        deadline = time.monotonic() + timeout + 60
        while True:
            state = self.engine.inspect(container)["State"]
            if state.get("Running") and state.get("StartedAt") != old.get("StartedAt"):
                return {
                    "old_pid": old.get("Pid"),
                    "new_pid": state.get("Pid"),
                    "message": f"container {container[:12]} restarted",
                }
            if time.monotonic() > deadline:
                raise DockerError(
                    f"broker {broker_id}: container {container[:12]} is {state.get('Status')} "
                    f"after the restart"
                )
            time.sleep(0.5)

    def stop(self, broker_id: int, timeout: float) -> dict:
        """Stop broker ``broker_id``'s container (SIGTERM: controlled shutdown; SIGKILL
        after ``timeout`` seconds); it stays down (decommission)."""
        container = self.container(broker_id)["Id"]
        old = self.engine.inspect(container)["State"]
        self.engine.stop(container, max(1, int(timeout)))
        return {"old_pid": old.get("Pid"), "new_pid": None, "message": "container stopped"}


def _group_of(path: str) -> str:
    try:
        return str(os.stat(path).st_gid)
    except OSError:
        return "?"
