"""DescribeAcls, CreateAcls and DeleteAcls, as Kafka's AclApis answers them.

Without an authorizer every request gets SECURITY_DISABLED. Describing needs Cluster
Describe, creating and deleting Cluster Alter (CLUSTER_AUTHORIZATION_FAILED). A binding or
filter with an unknown resource type, pattern type, operation or permission is refused
with INVALID_REQUEST and a sentence, and nothing of it is written.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from ...protocol.errors import ErrorCode as E
from ...protocol.messages import RequestHeader
from ...security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
    validate_binding,
)
from .. import authorization, request_context

if TYPE_CHECKING:
    from ..kafka_server import KafkaServer

log = logging.getLogger(__name__)

_DISABLED = "No Authorizer is configured on the broker"


def _enum(enum, code: int):
    """Kafka's fromCode: a code it does not know is UNKNOWN (0)."""
    try:
        return enum(code)
    except ValueError:
        return enum(0)


def _refusal(server: KafkaServer, op: AclOperation) -> tuple[E, str] | None:
    if server.authorizer is None:
        return E.security_disabled, _DISABLED
    if not authorization.cluster_allowed(server, op):
        return E.cluster_authorization_failed, "Cluster authorization failed."
    return None


def _filter(f: Any) -> AclBindingFilter:
    return AclBindingFilter(
        resource_type=_enum(ResourceType, f.resource_type_filter),
        name=f.resource_name_filter,
        pattern_type=_enum(PatternType, getattr(f, "pattern_type_filter", 3)),
        principal=f.principal_filter,
        host=f.host_filter,
        operation=_enum(AclOperation, f.operation),
        permission=_enum(PermissionType, f.permission_type),
    )


def _binding_fields(b: AclBinding) -> dict:
    return {
        "resource_type": int(b.pattern.resource_type),
        "resource_name": b.pattern.name,
        "pattern_type": int(b.pattern.pattern_type),
        "principal": b.entry.principal,
        "host": b.entry.host,
        "operation": int(b.entry.operation),
        "permission_type": int(b.entry.permission),
    }


async def handle_describe_acls(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    refused = _refusal(server, AclOperation.DESCRIBE)
    if refused is not None:
        return {"throttle_time": 0, "error_code": refused[0], "error_message": refused[1]}
    selector = _filter(req)
    unknown = selector.unknown_part()
    if unknown is not None:
        return {
            "throttle_time": 0,
            "error_code": E.invalid_request,
            "error_message": f"The filter's {unknown} is unknown",
        }
    resources: dict[ResourcePattern, list] = {}
    for b in server.authorizer.describe(selector):
        fields = _binding_fields(b)
        resources.setdefault(b.pattern, []).append(
            {k: fields[k] for k in ("principal", "host", "operation", "permission_type")}
        )
    return {
        "throttle_time": 0,
        "error_code": E.none,
        "error_message": None,
        "resources": [
            {
                "resource_type": int(p.resource_type),
                "resource_name": p.name,
                "pattern_type": int(p.pattern_type),
                "acls": acls,
            }
            for p, acls in resources.items()
        ],
    }


def _creation(c: Any) -> AclBinding:
    return AclBinding(
        ResourcePattern(
            _enum(ResourceType, c.resource_type),
            c.resource_name,
            _enum(PatternType, getattr(c, "resource_pattern_type", 3)),
        ),
        AccessControlEntry(
            c.principal,
            c.host,
            _enum(AclOperation, c.operation),
            _enum(PermissionType, c.permission_type),
        ),
    )


async def handle_create_acls(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    refused = _refusal(server, AclOperation.ALTER)
    if refused is not None:
        results = [{"error_code": refused[0], "error_message": refused[1]} for _ in req.creations]
        return {"throttle_time": 0, "results": results}
    results = []
    valid = []
    for c in req.creations:
        binding = _creation(c)
        why = validate_binding(binding)
        if why is None:
            valid.append(binding)
            results.append({"error_code": E.none, "error_message": None})
        else:
            results.append({"error_code": E.invalid_request, "error_message": why})
    if valid:
        try:
            await asyncio.to_thread(server.authorizer.create, valid)
        except Exception as exc:  # noqa: BLE001 - ZooKeeper gone: every valid one failed
            log.warning("creating ACLs failed: %r", exc)
            for r in results:
                if r["error_code"] == E.none:
                    r.update(error_code=E.unknown_server_error, error_message=str(exc))
        else:
            who = request_context.principal.get()
            for b in valid:
                log.info("ACL added by %s: %s %s", who, b.pattern, b.entry)
    return {"throttle_time": 0, "results": results}


async def handle_delete_acls(server: KafkaServer, header: RequestHeader, req: Any) -> dict:
    refused = _refusal(server, AclOperation.ALTER)
    if refused is not None:
        return {
            "throttle_time": 0,
            "filter_results": [
                {"error_code": refused[0], "error_message": refused[1], "matching_acls": []}
                for _ in req.filters
            ],
        }
    selectors = [_filter(f) for f in req.filters]
    valid = [s for s in selectors if s.unknown_part() is None]
    try:
        removed = iter(await asyncio.to_thread(server.authorizer.delete, valid))
        failure = None
    except Exception as exc:  # noqa: BLE001 - ZooKeeper gone
        log.warning("deleting ACLs failed: %r", exc)
        removed, failure = None, str(exc)
    out = []
    for s in selectors:
        unknown = s.unknown_part()
        if unknown is not None:
            out.append(
                {
                    "error_code": E.invalid_request,
                    "error_message": f"The filter's {unknown} is unknown",
                    "matching_acls": [],
                }
            )
        elif failure is not None:
            out.append(
                {
                    "error_code": E.unknown_server_error,
                    "error_message": failure,
                    "matching_acls": [],
                }
            )
        else:
            gone = next(removed)
            for b in gone:
                log.info(
                    "ACL removed by %s: %s %s", request_context.principal.get(), b.pattern, b.entry
                )
            out.append(
                {
                    "error_code": E.none,
                    "error_message": None,
                    "matching_acls": [
                        {"error_code": E.none, "error_message": None, **_binding_fields(b)}
                        for b in gone
                    ],
                }
            )
    return {"throttle_time": 0, "filter_results": out}
