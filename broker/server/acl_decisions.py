"""The authorizer's decisions for the request being served, and Kafka's refusal codes.

The principal and client host come from the request's context (request_context);
``allowed`` asks ``server.authorizer`` (set only when ``authorizer.class.name`` is).
Both ``authorization`` (whole-request checks) and ``authorization_responses`` (per-item
checks, response filters) build on this module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..protocol.errors import ErrorCode as E
from ..security.acl import CLUSTER_NAME
from ..security.acl import AclOperation as Op
from ..security.acl import ResourceType as R
from . import request_context

if TYPE_CHECKING:
    from .kafka_server import KafkaServer

__all__ = [
    "CLUSTER_DENIED",
    "GROUP_DENIED",
    "MESSAGES",
    "TOPIC_DENIED",
    "TXN_DENIED",
    "allowed",
    "cluster_allowed",
    "denied_topics",
    "who",
]

TOPIC_DENIED = E.topic_authorization_failed
GROUP_DENIED = E.group_authorization_failed
CLUSTER_DENIED = E.cluster_authorization_failed
TXN_DENIED = E.transactional_id_authorization_failed

MESSAGES = {
    TOPIC_DENIED: "Topic authorization failed.",
    GROUP_DENIED: "Group authorization failed.",
    CLUSTER_DENIED: "Cluster authorization failed.",
    TXN_DENIED: "Transactional Id authorization failed.",
}


def who() -> tuple[Any, str]:
    """The principal and client host of the request being served."""
    return request_context.principal.get(), request_context.client_host.get().lstrip("/")


def allowed(server: KafkaServer, op: Op, rtype: R, name: str) -> bool:
    principal, host = who()
    return server.authorizer.authorize(principal, host, op, rtype, name)


def cluster_allowed(server: KafkaServer, op: Op) -> bool:
    return allowed(server, op, R.CLUSTER, CLUSTER_NAME)


def denied_topics(server: KafkaServer, op: Op, names) -> set[str]:
    principal, host = who()
    authorize = server.authorizer.authorize
    return {n for n in set(names) if not authorize(principal, host, op, R.TOPIC, n)}
