"""Client quotas on the broker: configs from ZooKeeper, and the calls the handlers make.

At start the broker reads every quota entity under ``/config/users`` and
``/config/clients``; afterwards it follows ``/config/changes``: each new
``config_change_NNNNNNNNNN`` (``{"version":2,"entity_path":"clients/<id>"}``, as
kafka-configs, the console and AlterClientQuotas write them) makes it read that
entity's znode again. Topic and broker entries there are left to ClusterSync, which
watches those znodes directly. A user's znode also holds its SCRAM credentials: they
go to the CredentialCache the same way (Kafka's UserConfigHandler does both).

Quotas match the request's principal (``request_context.principal``: the user a SASL
exchange or a client certificate authenticated, else ANONYMOUS) and client id.

Bytes are Kafka's: a produce request's size, a fetch response's record bytes. A
request over its quota is answered at once with ``throttle_time_ms``, then the
connection reads nothing for that long (KIP-219); librdkafka also backs off by itself.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import TYPE_CHECKING

from kazoo.exceptions import NoNodeError
from kazoo.recipe.watchers import ChildrenWatch

from ..quota.manager import (
    FETCH,
    PRODUCE,
    REQUEST,
    ClientQuotaManager,
    parse_entity_path,
)
from ..zk.znodes import ConfigEntityChangeNotificationZNode, ConfigType
from . import request_context

if TYPE_CHECKING:
    from ..security.credential_cache import CredentialCache
    from ..zk.client import KafkaZkClient

log = logging.getLogger(__name__)


class QuotaConfigSync:
    """Keeps a ClientQuotaManager's entities equal to ZooKeeper's."""

    def __init__(
        self,
        zk: KafkaZkClient,
        quotas: ClientQuotaManager,
        loop: asyncio.AbstractEventLoop,
        credentials: CredentialCache | None = None,
    ) -> None:
        self.zk = zk
        self.client = zk.zk
        self.quotas = quotas
        self.loop = loop
        self.credentials = credentials
        self._last_change: int | None = None  # None until the watch first fires

    def start(self) -> None:
        """Blocking (kazoo): call from a thread."""
        ChildrenWatch(self.client, ConfigEntityChangeNotificationZNode.path, self._changes)
        for path in self.zk.quota_entity_paths():
            self._reload(path)

    # -- kazoo thread ---------------------------------------------------------------
    def _changes(self, children: list[str]) -> None:
        prefix = ConfigEntityChangeNotificationZNode.prefix
        changes = []
        for name in (c for c in children if c.startswith(prefix)):
            try:
                changes.append((int(name[len(prefix) :]), name))
            except ValueError:
                continue
        if self._last_change is None:  # what is there already, start()'s full read covers
            self._last_change = max((seq for seq, _name in changes), default=-1)
            return
        for seq, name in sorted(changes):
            if seq <= self._last_change:
                continue
            self._last_change = seq
            try:
                data, _ = self.client.get(f"{ConfigEntityChangeNotificationZNode.path}/{name}")
                entity = json.loads(data).get("entity_path", "")
            except NoNodeError:
                continue
            except (ValueError, TypeError, AttributeError):
                log.error("ignoring config change %s: not Kafka's JSON", name)
                continue
            if isinstance(entity, str) and entity.startswith(
                (f"{ConfigType.USER}/", f"{ConfigType.CLIENT}/")
            ):
                self._reload(entity)

    def _reload(self, path: str) -> None:
        entity = parse_entity_path(path)
        if entity is None:
            return
        kind, _, name = path.partition("/")
        try:
            config = self.zk.get_entity_config(kind, name)
        except (ValueError, TypeError, AttributeError):
            log.error("ignoring config of %s: not Kafka's JSON", path)
            return
        self.loop.call_soon_threadsafe(self.quotas.update, entity, config)
        user, client = entity
        if self.credentials is not None and user is not None and client is None:
            self.loop.call_soon_threadsafe(self.credentials.update, user, config)


class TimedCoroutine:
    """Awaits ``coro`` and adds up the time its own steps run, not the time it waits:
    the request thread time Kafka's request quota (``request_percentage``) counts."""

    __slots__ = ("coro", "nanos")

    def __init__(self, coro) -> None:
        self.coro = coro
        self.nanos = 0

    def __await__(self):
        coro = self.coro
        value, error = None, None
        while True:
            start = time.perf_counter_ns()
            try:
                yielded = coro.send(value) if error is None else coro.throw(error)
            except StopIteration as stop:
                self.nanos += time.perf_counter_ns() - start
                return stop.value
            except BaseException:
                self.nanos += time.perf_counter_ns() - start
                raise
            self.nanos += time.perf_counter_ns() - start
            try:
                value, error = (yield yielded), None
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # cancellation and the like go on to the handler
                value, error = None, exc


def _user() -> str:
    """The quota user of the current request: its principal's name."""
    return request_context.principal.get().name


def request_throttle(quotas: ClientQuotaManager, client_id: str | None, nanos: int) -> int:
    """Record a request's handler time as Kafka does (percent of one thread x seconds)."""
    return _throttle(quotas.record(REQUEST, _user(), client_id or "", nanos * 100 / 1e9))


def _throttle(throttle_ms: int) -> int:
    if throttle_ms > 0:
        request_context.throttle_ms.set(max(throttle_ms, request_context.throttle_ms.get()))
    return throttle_ms


def produce_throttle(quotas: ClientQuotaManager, client_id: str | None, request_size: int) -> int:
    """Record a produce request's size; the throttle time in ms."""
    return _throttle(quotas.record(PRODUCE, _user(), client_id or "", request_size))


def fetch_throttle(quotas: ClientQuotaManager, client_id: str | None, response_bytes: int) -> int:
    """Record a consumer fetch's bytes; a throttled fetch is answered empty, so its bytes
    are taken back (Kafka's handleFetchRequest)."""
    user = _user()
    throttle_ms = quotas.record(FETCH, user, client_id or "", response_bytes)
    if throttle_ms > 0:
        quotas.unrecord(FETCH, user, client_id or "", response_bytes)
    return _throttle(throttle_ms)
