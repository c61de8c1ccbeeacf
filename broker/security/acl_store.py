"""ZkAclStore: ACLs in ZooKeeper where and as Kafka's AclAuthorizer keeps them.

Reads and conditional writes of the resource znodes (``broker.zk.znodes.AclZNodes``)
and the change notifications (``AclChangeZNodes``) that tell every broker to reload a
resource. Blocking kazoo calls: the broker calls them from a worker thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.recipe.watchers import ChildrenWatch

from ..zk.znodes import AclChangeZNodes, AclZNodes
from .acl import AccessControlEntry, PatternType, ResourcePattern, ResourceType

log = logging.getLogger(__name__)

STORED_PATTERNS = (PatternType.LITERAL, PatternType.PREFIXED)


def _path(pattern: ResourcePattern) -> str:
    return AclZNodes.path(pattern.pattern_type.name, pattern.resource_type.zk_name, pattern.name)


def _decode_entries(pattern: ResourcePattern, data: bytes | None) -> frozenset:
    entries = set()
    for body in AclZNodes.decode(data):
        try:
            entries.add(AccessControlEntry.from_json(body))
        except (KeyError, ValueError) as exc:
            log.error("ignoring an unreadable ACL of %s: %r (%s)", pattern, body, exc)
    return frozenset(entries)


class ZkAclStore:
    def __init__(self, zk: KazooClient) -> None:
        self.zk = zk
        self._purged_at = 0.0

    # -- reading ----------------------------------------------------------------------
    def read(self, pattern: ResourcePattern) -> tuple[frozenset, int]:
        """The entries of one resource and the znode's version (-1: no znode)."""
        try:
            data, stat = self.zk.get(_path(pattern))
        except NoNodeError:
            return frozenset(), -1
        return _decode_entries(pattern, data), stat.version

    def load_all(self) -> dict[ResourcePattern, frozenset]:
        acls = {}
        for pattern_type in STORED_PATTERNS:
            for resource_type in ResourceType:
                if resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
                    continue
                type_path = AclZNodes.type_path(pattern_type.name, resource_type.zk_name)
                try:
                    names = self.zk.get_children(type_path)
                except NoNodeError:
                    continue
                for name in names:
                    pattern = ResourcePattern(resource_type, name, pattern_type)
                    entries, _version = self.read(pattern)
                    if entries:
                        acls[pattern] = entries
        return acls

    # -- writing ----------------------------------------------------------------------
    def update(
        self, pattern: ResourcePattern, change: Callable[[frozenset], frozenset]
    ) -> frozenset:
        """Apply ``change`` to the resource's entries with a conditional write (retried on
        a concurrent writer), delete the znode when none remain, and notify the brokers.
        Returns the entries now stored."""
        path = _path(pattern)
        while True:
            current, version = self.read(pattern)
            wanted = change(current)
            if wanted == current:
                return current
            data = AclZNodes.encode([e.to_json() for e in sorted(wanted, key=lambda e: str(e))])
            try:
                if not wanted:
                    self.zk.delete(path, version=version)
                elif version < 0:
                    self.zk.create(path, data, makepath=True)
                else:
                    self.zk.set(path, data, version=version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue  # another writer was faster: read again
            self.notify(pattern)
            return wanted

    def notify(self, pattern: ResourcePattern) -> None:
        parent = AclChangeZNodes.path_for(pattern.pattern_type.name)
        data = AclChangeZNodes.encode(
            pattern.resource_type.name, pattern.name, pattern.pattern_type.name
        )
        self.zk.create(f"{parent}/{AclChangeZNodes.prefix}", data, sequence=True, makepath=True)

    # -- change notifications ------------------------------------------------------------
    def watch_changes(self, on_change: Callable[[ResourcePattern], None]) -> None:
        """Call ``on_change`` (on kazoo's thread) for every notification written after
        now, and purge notifications older than Kafka's 15 minutes as its brokers do."""
        for parent in (AclChangeZNodes.literal_path, AclChangeZNodes.extended_path):
            self.zk.ensure_path(parent)
            seen = set(self.zk.get_children(parent))
            ChildrenWatch(self.zk, parent, self._on_children(parent, seen, on_change))

    def _on_children(self, parent: str, seen: set[str], on_change):
        def handler(children: list[str]) -> bool:
            for child in sorted(set(children) - seen):
                seen.add(child)
                try:
                    data, _stat = self.zk.get(f"{parent}/{child}")
                    kind, name, pattern_type = AclChangeZNodes.decode(data)
                    pattern = ResourcePattern(
                        ResourceType.parse(kind), name, PatternType.parse(pattern_type)
                    )
                except NoNodeError:
                    continue
                except (ValueError, KeyError) as exc:
                    log.error("ignoring an unreadable ACL change %s/%s: %s", parent, child, exc)
                    continue
                on_change(pattern)
            seen.intersection_update(children)
            if time.monotonic() - self._purged_at > 60:  # at most once a minute
                self._purged_at = time.monotonic()
                self._purge_old(parent, children)
            return True

        return handler

    def _purge_old(self, parent: str, children: list[str]) -> None:
        oldest_kept = time.time() * 1000 - AclChangeZNodes.expiration_ms
        for child in children:
            path = f"{parent}/{child}"
            try:
                stat = self.zk.exists(path)
                if stat is not None and stat.ctime < oldest_kept:
                    self.zk.delete(path)
            except NoNodeError:
                pass
