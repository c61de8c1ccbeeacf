"""ACLs as Kafka models them: resource patterns, access control entries, bindings, filters.

The enums carry Kafka's wire codes (``org.apache.kafka.common.acl.AclOperation`` and
friends) and the names Kafka writes in ZooKeeper ("Topic", "Read", "Allow") and prints
in kafka-acls ("TOPIC", "READ", "ALLOW"). Pure values: nothing here reads ZooKeeper.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum

CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"


def _camel(name: str) -> str:
    """TRANSACTIONAL_ID -> TransactionalId, the form ZooKeeper's JSON and paths use."""
    return "".join(part.capitalize() for part in name.split("_"))


def _from_text(enum: type[IntEnum], text: str) -> IntEnum:
    """Kafka's fromString: case-insensitive, with or without underscores."""
    wanted = re.sub(r"[_\-\s]", "", text).upper()
    for member in enum:
        if member.name.replace("_", "") == wanted:
            return member
    raise ValueError(f"unknown {enum.__name__} {text!r}")


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7

    @property
    def zk_name(self) -> str:
        return _camel(self.name)

    @classmethod
    def parse(cls, text: str) -> ResourceType:
        return _from_text(cls, text)


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14

    @property
    def zk_name(self) -> str:
        return _camel(self.name)

    @classmethod
    def parse(cls, text: str) -> AclOperation:
        return _from_text(cls, text)


class PermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3

    @property
    def zk_name(self) -> str:
        return _camel(self.name)

    @classmethod
    def parse(cls, text: str) -> PermissionType:
        return _from_text(cls, text)


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4

    @classmethod
    def parse(cls, text: str) -> PatternType:
        return _from_text(cls, text)


#: Kafka's AclAuthorizer: an ALLOW of one of these grants the key operation too
IMPLIED_BY = {
    AclOperation.DESCRIBE: frozenset(
        {
            AclOperation.DESCRIBE,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.DELETE,
            AclOperation.ALTER,
        }
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset(
        {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
    ),
}

#: operations that make sense on each resource type (Kafka's AclEntry.supportedOperations)
SUPPORTED_OPERATIONS = {
    ResourceType.TOPIC: {
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    },
    ResourceType.GROUP: {AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE},
    ResourceType.CLUSTER: {
        AclOperation.CREATE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
    },
    ResourceType.TRANSACTIONAL_ID: {AclOperation.DESCRIBE, AclOperation.WRITE},
    ResourceType.DELEGATION_TOKEN: {AclOperation.DESCRIBE},
    ResourceType.USER: {AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS},
}


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __str__(self) -> str:
        return (
            f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
            f"patternType={self.pattern_type.name})"
        )


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    """One ACL on a resource, as stored in ZooKeeper (Kafka's AclEntry)."""

    principal: str
    host: str
    operation: AclOperation
    permission: PermissionType

    def __str__(self) -> str:
        return (
            f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
            f"permissionType={self.permission.name})"
        )

    def to_json(self) -> dict:
        return {
            "principal": self.principal,
            "permissionType": self.permission.zk_name,
            "operation": self.operation.zk_name,
            "host": self.host,
        }

    @classmethod
    def from_json(cls, body: dict) -> AccessControlEntry:
        return cls(
            principal=body["principal"],
            host=body["host"],
            operation=AclOperation.parse(body["operation"]),
            permission=PermissionType.parse(body["permissionType"]),
        )


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """What DescribeAcls and DeleteAcls select: None fields match anything, ANY enum
    values too; pattern type MATCH selects every pattern that matches the name."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: PermissionType = PermissionType.ANY

    def unknown_part(self) -> str | None:
        """The first field with an UNKNOWN value, named as Kafka does; None if valid."""
        for label, value in (
            ("resource type", self.resource_type),
            ("pattern type", self.pattern_type),
            ("operation", self.operation),
            ("permission type", self.permission),
        ):
            if value == 0:
                return label
        return None

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type == PatternType.MATCH:
            if self.name is None:
                return True
            if pattern.pattern_type == PatternType.LITERAL:
                return pattern.name in (self.name, WILDCARD)
            return pattern.pattern_type == PatternType.PREFIXED and self.name.startswith(
                pattern.name
            )
        if self.pattern_type not in (PatternType.ANY, pattern.pattern_type):
            return False
        return self.name is None or self.name == pattern.name

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and self.operation in (AclOperation.ANY, entry.operation)
            and self.permission in (PermissionType.ANY, entry.permission)
        )

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)


def validate_binding(binding: AclBinding) -> str | None:
    """Why CreateAcls must refuse this binding (Kafka's INVALID_REQUEST), or None."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resource type {pattern.resource_type.name} for an ACL"
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid resource pattern type {pattern.pattern_type.name} for an ACL"
    if entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {entry.operation.name} for an ACL"
    if entry.permission not in (PermissionType.ALLOW, PermissionType.DENY):
        return f"Invalid permission type {entry.permission.name} for an ACL"
    if not pattern.name:
        return "Invalid empty resource name"
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if "/" in pattern.name:
        return f"ACL binding contains invalid resource name: {pattern.name}"
    kind, sep, name = entry.principal.partition(":")
    if not sep or not kind or not name:
        return f"Invalid principal {entry.principal!r}: expected <type>:<name>, e.g. User:alice"
    if not entry.host:
        return "Invalid empty host (use * for every host)"
    return None


def unsupported_operation(binding: AclBinding) -> str | None:
    """kafka-acls refuses an operation that means nothing on the resource type."""
    pattern, entry = binding.pattern, binding.entry
    allowed = SUPPORTED_OPERATIONS.get(pattern.resource_type, set())
    if entry.operation == AclOperation.ALL or entry.operation in allowed:
        return None
    return f"ResourceType {pattern.resource_type.zk_name} only supports operations " + ",".join(
        sorted(op.zk_name for op in allowed | {AclOperation.ALL})
    )
