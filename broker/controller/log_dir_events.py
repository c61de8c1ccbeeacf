"""Log dir failures seen by the controller (Kafka's onBrokerLogDirFailure).

A broker whose log dir went offline writes ``/log_dir_event_notification/
log_dir_event_<seq>`` (``{"version":1,"broker":id,"event":1}``). The controller reads
and deletes those znodes, asks each broker named which of its replicas are still in
an online dir (DescribeLogDirs: an offline dir answers KAFKA_STORAGE_ERROR and lists
nothing), and takes the other replicas out of leadership and the ISR, as for a
broker that stops.
"""

from __future__ import annotations

import asyncio
import logging

from kazoo.exceptions import NoNodeError

from ..client.connection import BrokerConnection
from ..client.security import ClientSecurity
from ..zk.znodes import LogDirEventNotificationZNode

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


def take_events(client, children: list[str]) -> set[int]:
    """The broker ids of the event znodes ``children``, which are deleted."""
    brokers = set()
    for child in children:
        path = f"{LogDirEventNotificationZNode.path}/{child}"
        try:
            data, _ = client.get(path)
            brokers.add(LogDirEventNotificationZNode.decode(data))
            client.delete(path)
        except NoNodeError:
            continue
        except (ValueError, KeyError):
            log.warning("ignoring malformed log dir event %s", path)
            client.delete(path)
    return brokers


async def _online_partitions(
    host: str, port: int, controller_id: int, security: ClientSecurity | None
) -> set[TopicPartition]:
    conn = BrokerConnection(host, port, client_id=f"controller-{controller_id}", security=security)
    await conn.connect()
    try:
        resp = await conn.request(35, 1, {"topics": None}, timeout_s=15)
    finally:
        await conn.close()
    return {
        (topic.name, part.partition_index)
        for result in resp.results
        if result.error_code == 0
        for topic in result.topics
        for part in topic.partitions
    }


def offline_replicas(
    loop: asyncio.AbstractEventLoop,
    endpoint: tuple[str, int],
    controller_id: int,
    hosted: list[TopicPartition],
    security: ClientSecurity | None = None,
) -> list[TopicPartition]:
    """Of ``hosted`` (the partitions assigned to the broker at ``endpoint``), those it
    does not report in an online log dir. Called from the controller's thread."""
    future = asyncio.run_coroutine_threadsafe(
        _online_partitions(*endpoint, controller_id, security), loop
    )
    online = future.result(timeout=30)
    return [key for key in hosted if key not in online]
