"""SCRAM users and ACLs through the Kafka protocol (confluent_kafka.AdminClient):
Describe/AlterUserScramCredentials (KIP-554) and Create/Describe/DeleteAcls. The console
never sees a stored credential: the AdminClient salts the password here and sends the
salted form; Describe answers mechanisms and iterations only.

Names are Kafka's: resource types TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID (librdkafka calls
the cluster BROKER), pattern types LITERAL and PREFIXED, operations READ, WRITE, ...,
permissions ALLOW and DENY.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from cluster_client import wire, zk
from cluster_client.admin import client, wait_result
from cluster_client.errors import ClusterUnavailable, NotFound

DESCRIBE_ACLS, SECURITY_DISABLED = 29, 54
ANY = 1  # Kafka's ANY in resource, pattern, operation and permission filters

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
RESOURCE_TYPES = {
    "TOPIC": ResourceType.TOPIC,
    "GROUP": ResourceType.GROUP,
    "CLUSTER": ResourceType.BROKER,
    "TRANSACTIONAL_ID": ResourceType.TRANSACTIONAL_ID,
}
PATTERN_TYPES = ("LITERAL", "PREFIXED")
OPERATIONS = (
    "ALL",
    "READ",
    "WRITE",
    "CREATE",
    "DELETE",
    "ALTER",
    "DESCRIBE",
    "CLUSTER_ACTION",
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
    "IDEMPOTENT_WRITE",
)
PERMISSIONS = ("ALLOW", "DENY")
_TYPE_NAMES = {v: k for k, v in RESOURCE_TYPES.items()}


def _mechanism(name: str) -> ScramMechanism:
    return ScramMechanism[name.replace("-", "_")]


def _mechanism_name(mechanism: ScramMechanism) -> str:
    return mechanism.name.replace("_", "-")


# ---------------------------------------------------------------- SCRAM users


def scram_users() -> list[dict]:
    """Every user with a SCRAM credential: [{"user", "credentials": [{mechanism,
    iterations}]}], sorted by user."""
    described = wait_result(client().describe_user_scram_credentials(), "Listing SCRAM users")
    return [
        {
            "user": user,
            "credentials": [
                {"mechanism": _mechanism_name(i.mechanism), "iterations": i.iterations}
                for i in description.scram_credential_infos
            ],
        }
        for user, description in sorted(described.items())
    ]


def scram_user(user: str) -> list[dict]:
    """One user's credentials (mechanism, iterations); [] when it has none."""
    future = client().describe_user_scram_credentials([user])[user]
    try:
        description = future.result(timeout=10)
    except KafkaException as exc:
        err = exc.args[0] if exc.args else None
        if isinstance(err, KafkaError) and err.code() == KafkaError.RESOURCE_NOT_FOUND:
            return []
        return wait_result(future, f"Describing SCRAM user {user}")
    return [
        {"mechanism": _mechanism_name(i.mechanism), "iterations": i.iterations}
        for i in description.scram_credential_infos
    ]


def upsert_scram(user: str, mechanism: str, password: str, iterations: int) -> None:
    info = ScramCredentialInfo(_mechanism(mechanism), iterations)
    upsertion = UserScramCredentialUpsertion(user, info, password.encode())
    futures = client().alter_user_scram_credentials([upsertion])
    wait_result(futures[user], f"Setting the {mechanism} password of {user}")


def delete_scram(user: str, mechanism: str) -> None:
    deletion = UserScramCredentialDeletion(user, _mechanism(mechanism))
    futures = client().alter_user_scram_credentials([deletion])
    try:
        futures[user].result(timeout=10)
    except KafkaException as exc:
        err = exc.args[0] if exc.args else None
        if isinstance(err, KafkaError) and err.code() == KafkaError.RESOURCE_NOT_FOUND:
            raise NotFound(f"{user} has no {mechanism} credential.", "mechanism") from exc
        wait_result(futures[user], f"Deleting the {mechanism} credential of {user}")


# ---------------------------------------------------------------- ACLs


def acl_row(b: AclBinding) -> dict:
    return {
        "resource_type": _TYPE_NAMES.get(b.restype, b.restype.name),
        "resource_name": b.name,
        "pattern_type": b.resource_pattern_type.name,
        "principal": b.principal,
        "host": b.host,
        "operation": b.operation.name,
        "permission": b.permission_type.name,
    }


def _filter(f: dict) -> AclBindingFilter:
    """A filter dict (absent/empty key: any) -> AclBindingFilter."""
    return AclBindingFilter(
        RESOURCE_TYPES[f["resource_type"]] if f.get("resource_type") else ResourceType.ANY,
        f.get("resource_name") or None,
        ResourcePatternType[f["pattern_type"]]
        if f.get("pattern_type")
        else ResourcePatternType.ANY,
        f.get("principal") or None,
        f.get("host") or None,
        AclOperation[f["operation"]] if f.get("operation") else AclOperation.ANY,
        AclPermissionType[f["permission"]] if f.get("permission") else AclPermissionType.ANY,
    )


def _binding(a: dict) -> AclBinding:
    return AclBinding(
        RESOURCE_TYPES[a["resource_type"]],
        a["resource_name"],
        ResourcePatternType[a["pattern_type"]],
        a["principal"],
        a["host"],
        AclOperation[a["operation"]],
        AclPermissionType[a["permission"]],
    )


def authorizer_configured() -> bool:
    """Whether the brokers have an authorizer: one answers DescribeAcls with
    SECURITY_DISABLED when it has none. Asked with the console's own protocol socket,
    as librdkafka's DescribeAcls answers that error with an empty list."""
    brokers = zk.brokers()
    if not brokers:
        raise ClusterUnavailable("No broker is registered in ZooKeeper.")
    body = {
        "resource_type_filter": ANY,
        "resource_name_filter": None,
        "pattern_type_filter": ANY,
        "principal_filter": None,
        "host_filter": None,
        "operation": ANY,
        "permission_type": ANY,
    }
    sock = wire.broker_socket(brokers[0]["host"], brokers[0]["port"])
    try:
        answer = sock.pipeline([wire.request_call(DESCRIBE_ACLS, 1, body)])[0]
    except OSError as exc:
        raise ClusterUnavailable(f"Broker {brokers[0]['id']} did not answer: {exc}") from exc
    return answer.error_code != SECURITY_DISABLED


def describe_acls(f: dict) -> list[dict]:
    found = wait_result(client().describe_acls(_filter(f)), "Listing ACLs")
    rows = [acl_row(b) for b in found]
    return sorted(rows, key=lambda r: tuple(r.values()))


def create_acl(acl: dict) -> None:
    binding = _binding(acl)
    wait_result(client().create_acls([binding])[binding], "Adding the ACL")


def delete_acl(acl: dict) -> list[dict]:
    """Delete the ACLs matching exactly ``acl``; the ones deleted."""
    f = _binding(acl)
    exact = AclBindingFilter(
        f.restype,
        f.name,
        f.resource_pattern_type,
        f.principal,
        f.host,
        f.operation,
        f.permission_type,
    )
    deleted = wait_result(client().delete_acls([exact])[exact], "Removing the ACL")
    if not deleted:
        raise NotFound("No such ACL.")
    return [acl_row(b) for b in deleted]
