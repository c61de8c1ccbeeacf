"""Requests that only the controller answers (AlterPartitionReassignments,
ListPartitionReassignments, ElectLeaders), or that one named broker must answer
(DescribeConfigs of its BROKER resource), for the operator tools.

The tools find the controller as Kafka's admin client does (Metadata / DescribeCluster,
here through confluent_kafka) and send the request there with the broker's own Kafka
client (``broker.client.connection``, kio types), so every per-partition error message
the controller gives reaches the operator. A NOT_CONTROLLER answer (the controller moved)
is retried on the new one, as Kafka's admin client does.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from kio.schema.errors import ErrorCode

from ..client.connection import BrokerConnection, ConnectionClosed
from ..client.security import ClientSecurity, ClientSecurityError
from .common import CliError

RETRIES = 5


def command_security(conf: dict[str, str]) -> ClientSecurity:
    """The --command-config's TLS/SASL settings for the direct connection to the
    controller; a property that cannot work is refused with its key named."""
    try:
        return ClientSecurity.from_properties(conf)
    except ClientSecurityError as exc:
        raise CliError("INVALID_CONFIG", f"--command-config: {exc}") from None


class ControllerAdmin:
    """confluent-kafka's AdminClient (it finds the controller and does everything else)
    carrying the ClientSecurity that :func:`controller_request` connects with."""

    def __init__(self, conf: dict[str, str]) -> None:
        from confluent_kafka.admin import AdminClient

        self.security = command_security(conf)
        self.admin = AdminClient(conf)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.admin, name)


def controller_endpoint(admin, timeout: float = 30.0) -> tuple[str, int]:
    from .common import result

    cluster = result(admin.describe_cluster(request_timeout=timeout), timeout)
    controller = cluster.controller
    if controller is None or controller.id < 0:
        raise CliError("NOT_CONTROLLER", "The cluster has no controller at the moment.")
    return controller.host, controller.port


def controller_request(
    admin,
    api_key: int,
    version: int,
    body: dict,
    timeout: float = 30.0,
    security: ClientSecurity | None = None,
) -> Any:
    """Send ``body`` to the controller; the response (kio), after NOT_CONTROLLER retries.
    ``security``: the --command-config's TLS/SASL settings (ClientSecurity); by default
    those a :class:`ControllerAdmin` carries."""
    if security is None:
        security = getattr(admin, "security", None)
    for attempt in range(RETRIES):
        host, port = controller_endpoint(admin, timeout)
        try:
            response = asyncio.run(_send(host, port, api_key, version, body, timeout, security))
        except (ConnectionClosed, OSError, TimeoutError) as exc:
            if attempt == RETRIES - 1:
                raise CliError(
                    "NETWORK_EXCEPTION", f"The controller at {host}:{port}: {exc}"
                ) from None
            time.sleep(1.0)
            continue
        if getattr(response, "error_code", ErrorCode.none) != ErrorCode.not_controller:
            return response
        time.sleep(1.0)
    raise CliError("NOT_CONTROLLER", "The controller kept moving; try again.")


def broker_request(
    admin, broker_id: int, api_key: int, version: int, body: dict, timeout: float = 30.0
) -> Any:
    """Send ``body`` to broker ``broker_id`` (found through DescribeCluster); the response."""
    from .common import result

    cluster = result(admin.describe_cluster(request_timeout=timeout), timeout)
    node = next((n for n in cluster.nodes if n.id == broker_id), None)
    if node is None:
        raise CliError("BROKER_NOT_AVAILABLE", f"Broker {broker_id} is not in the cluster.")
    security = getattr(admin, "security", None)
    try:
        return asyncio.run(_send(node.host, node.port, api_key, version, body, timeout, security))
    except (ConnectionClosed, OSError, TimeoutError) as exc:
        raise CliError("NETWORK_EXCEPTION", f"Broker {broker_id}: {exc}") from None


async def _send(
    host: str,
    port: int,
    api_key: int,
    version: int,
    body: dict,
    timeout: float,
    security: ClientSecurity | None = None,
):
    conn = BrokerConnection(host, port, client_id="quill-admin-tool", security=security)
    await conn.connect(timeout)
    try:
        return await conn.request(api_key, version, body, timeout)
    finally:
        await conn.close()
