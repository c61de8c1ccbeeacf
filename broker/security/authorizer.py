"""AclAuthorizer: Kafka's ZooKeeper-era authorizer, with its exact semantics.

``authorizer.class.name`` names it as Kafka does (``kafka.security.authorizer.AclAuthorizer``,
the older ``kafka.security.auth.SimpleAclAuthorizer``) or by the short ``acl``.

A request is allowed when its principal is in ``super.users``; otherwise the ACLs that
match the resource are collected: literal ones of the same name, the wildcard ``*``
of its type, and prefixed ones whose prefix starts the name. If none match, the answer
is ``allow.everyone.if.no.acl.found``. Otherwise any matching DENY (for the principal
or ``User:*``, from the client's host or ``*``, of the operation or ALL) refuses, and
an ALLOW of the operation, of ALL or of an operation that implies it (Read, Write,
Delete and Alter imply Describe; AlterConfigs implies DescribeConfigs) grants.

The ACLs are cached in memory, loaded at start and kept current by ZooKeeper change
notifications; decisions are memoized until the next change.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

from .acl import (
    IMPLIED_BY,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)
from .acl_store import ZkAclStore
from .principal import KafkaPrincipal

log = logging.getLogger(__name__)

#: the values of ``authorizer.class.name`` that mean this authorizer
CLASS_NAMES = (
    "kafka.security.authorizer.AclAuthorizer",
    "kafka.security.auth.SimpleAclAuthorizer",
    "acl",
)

_MEMO_LIMIT = 100_000


class AuthorizerConfigError(ValueError):
    pass


def parse_super_users(text: str | None) -> frozenset[str]:
    """``User:alice;User:bob`` (Kafka separates super.users with semicolons)."""
    users = set()
    for item in (text or "").split(";"):
        item = item.strip()
        if not item:
            continue
        try:
            users.add(str(KafkaPrincipal.parse(item)))
        except ValueError as exc:
            raise AuthorizerConfigError(
                f"Invalid value for configuration super.users: {exc}"
            ) from None
    return frozenset(users)


def check_class_name(name: str | None) -> bool:
    """True when an authorizer is configured; raises for a class we do not have."""
    if not name:
        return False
    if name not in CLASS_NAMES:
        raise AuthorizerConfigError(
            f"Invalid value {name} for configuration authorizer.class.name: Quill has "
            f"Kafka's AclAuthorizer only ({', '.join(CLASS_NAMES)})"
        )
    return True


class AclAuthorizer:
    def __init__(self, super_users: Iterable[str] = (), allow_if_no_acl: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self.store: ZkAclStore | None = None
        # (pattern type, resource type) -> name -> entries
        self._acls: dict[tuple[PatternType, ResourceType], dict[str, frozenset]] = {}
        self._memo: dict[tuple, bool] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, config) -> AclAuthorizer | None:
        """The broker's authorizer, or None when ``authorizer.class.name`` is empty."""
        if not check_class_name(config["authorizer.class.name"]):
            return None
        return cls(
            parse_super_users(config["super.users"]), config["allow.everyone.if.no.acl.found"]
        )

    # -- lifecycle (blocking: from a worker thread) ------------------------------------------
    def start(self, zk) -> None:
        """Load every ACL from ZooKeeper and follow the change notifications."""
        self.store = ZkAclStore(zk)
        self.store.watch_changes(self._reload)
        for pattern, entries in self.store.load_all().items():
            self._set(pattern, entries)
        log.info("authorizer loaded %d ACL(s)", sum(len(e) for e in self.bindings_map().values()))

    def _reload(self, pattern: ResourcePattern) -> None:
        entries, _version = self.store.read(pattern)
        self._set(pattern, entries)
        log.info("ACLs of %s now: %d", pattern, len(entries))

    def _set(self, pattern: ResourcePattern, entries: frozenset) -> None:
        """Copy-on-write (kazoo's thread writes, the event loop reads): readers see the
        old maps or the new ones, never one being changed; memoized decisions go."""
        with self._lock:
            key = (pattern.pattern_type, pattern.resource_type)
            by_name = dict(self._acls.get(key, {}))
            if entries:
                by_name[pattern.name] = entries
            else:
                by_name.pop(pattern.name, None)
            self._acls = {**self._acls, key: by_name}
            self._memo = {}

    # -- decisions ------------------------------------------------------------------------
    def authorize(
        self,
        principal: KafkaPrincipal | str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        key = (str(principal), host, operation, resource_type, name)
        memo = self._memo  # taken first: a change meanwhile replaces it, dropping this answer
        decided = memo.get(key)
        if decided is None:
            decided = self._decide(*key)
            if not decided:  # Kafka's kafka.authorizer.logger line, once per memoized decision
                log.info(
                    "Principal = %s is Denied Operation = %s from host = %s on resource = %s:%s",
                    key[0],
                    operation.zk_name,
                    host,
                    resource_type.zk_name,
                    name,
                )
            if len(memo) >= _MEMO_LIMIT:
                memo.clear()
            memo[key] = decided
        return decided

    def _decide(
        self, principal: str, host: str, operation: AclOperation, rtype: ResourceType, name: str
    ) -> bool:
        if principal in self.super_users:
            return True
        entries = self._matching(rtype, name)
        if not entries:
            return self.allow_if_no_acl
        principals = (principal, WILDCARD_PRINCIPAL)
        hosts = (host, WILDCARD)
        allowed_by = IMPLIED_BY.get(operation, (operation,))
        allowed = False
        for entry in entries:
            if entry.principal not in principals or entry.host not in hosts:
                continue
            if entry.permission == PermissionType.DENY:
                if entry.operation in (operation, AclOperation.ALL):
                    return False  # deny before allow
            elif entry.operation == AclOperation.ALL or entry.operation in allowed_by:
                allowed = True
        return allowed

    def _matching(self, rtype: ResourceType, name: str) -> list[AccessControlEntry]:
        entries: list[AccessControlEntry] = []
        literal = self._acls.get((PatternType.LITERAL, rtype))
        if literal:
            entries.extend(literal.get(name, ()))
            if name != WILDCARD:
                entries.extend(literal.get(WILDCARD, ()))
        prefixed = self._acls.get((PatternType.PREFIXED, rtype))
        if prefixed:
            for end in range(1, len(name) + 1):
                entries.extend(prefixed.get(name[:end], ()))
        return entries

    def authorize_any(
        self,
        principal: KafkaPrincipal | str,
        host: str,
        operation: AclOperation,
        rtype: ResourceType,
    ) -> bool:
        """Kafka's authorizeByResourceType (KIP-679's idempotent producers): true when some
        resource of the type is granted and no DENY of the type's wildcard, of a prefix of
        it or of that literal name takes it back."""
        principal = str(principal)
        if principal in self.super_users:
            return True
        principals = (principal, WILDCARD_PRINCIPAL)
        hosts = (host, WILDCARD)
        allowed_by = IMPLIED_BY.get(operation, (operation,))
        candidates = set()
        any_acl = False
        for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
            for name, entries in self._acls.get((pattern_type, rtype), {}).items():
                any_acl = True
                for e in entries:
                    if (
                        e.permission == PermissionType.ALLOW
                        and e.principal in principals
                        and e.host in hosts
                        and (e.operation == AclOperation.ALL or e.operation in allowed_by)
                    ):
                        candidates.add((pattern_type, name))
        if not any_acl:
            return self.allow_if_no_acl
        return any(self._not_denied(c, rtype, principals, hosts, operation) for c in candidates)

    def _not_denied(self, candidate, rtype, principals, hosts, operation) -> bool:
        _pattern_type, name = candidate
        for entry in self._matching(rtype, name):
            if (
                entry.permission == PermissionType.DENY
                and entry.principal in principals
                and entry.host in hosts
                and entry.operation in (operation, AclOperation.ALL)
            ):
                return False
        return True

    # -- the ACL APIs (blocking: from a worker thread) ------------------------------------
    def bindings_map(self) -> dict[ResourcePattern, frozenset]:
        with self._lock:
            return {
                ResourcePattern(rtype, name, ptype): entries
                for (ptype, rtype), by_name in self._acls.items()
                for name, entries in by_name.items()
            }

    def describe(self, selector: AclBindingFilter) -> list[AclBinding]:
        return [
            AclBinding(pattern, entry)
            for pattern, entries in sorted(self.bindings_map().items(), key=lambda kv: str(kv[0]))
            if selector.matches_pattern(pattern)
            for entry in sorted(entries, key=str)
            if selector.matches_entry(entry)
        ]

    def create(self, bindings: list[AclBinding]) -> None:
        """Add the bindings (already validated), one conditional write per resource."""
        by_pattern: dict[ResourcePattern, set] = {}
        for b in bindings:
            by_pattern.setdefault(b.pattern, set()).add(b.entry)
        for pattern, added in by_pattern.items():
            stored = self.store.update(pattern, lambda cur, a=frozenset(added): cur | a)
            self._set(pattern, stored)

    def delete(self, selectors: list[AclBindingFilter]) -> list[list[AclBinding]]:
        """Remove what each filter selects; returns, per filter, the bindings removed."""
        removed: list[list[AclBinding]] = [[] for _ in selectors]
        for pattern, entries in self.bindings_map().items():
            gone = set()
            for i, selector in enumerate(selectors):
                if not selector.matches_pattern(pattern):
                    continue
                for entry in entries:
                    if selector.matches_entry(entry):
                        gone.add(entry)
                        removed[i].append(AclBinding(pattern, entry))
            if gone:
                stored = self.store.update(pattern, lambda cur, g=frozenset(gone): cur - g)
                self._set(pattern, stored)
        return removed
