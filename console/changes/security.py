"""SCRAM users and ACLs (admin role only, reads too): input checked before anything is
sent, changes made through the Kafka protocol (cluster_client.security) and audited.
A password never reaches the audit log: only the mechanism and iterations do."""

from __future__ import annotations

from cluster_client import security as cluster
from cluster_client.errors import OpError
from console.changes import Actor
from console.changes.validation import whole
from console.roles import ADMIN

MIN_ITERATIONS, MAX_ITERATIONS, DEFAULT_ITERATIONS = 4096, 16384, 4096  # Kafka's bounds
# A password this short falls to guessing whatever the iterations (NIST SP 800-63B asks
# at least 8 characters); Kafka itself takes any, the console refuses to set one.
MIN_PASSWORD_LENGTH = 8
CLUSTER_NAME = "kafka-cluster"  # the one name of the CLUSTER resource, as Kafka


def _text(value: str | None, field: str, what: str) -> str:
    """Stripped; control characters and lone surrogates (which no Kafka client can send)
    refused with the field named."""
    value = (value or "").strip()
    if any(ord(c) < 32 or ord(c) == 127 or 0xD800 <= ord(c) <= 0xDFFF for c in value):
        raise OpError(f"{what} must not contain control characters.", field)
    return value


def _user(user: str | None) -> str:
    user = _text(user, "user", "A user name")
    if not user:
        raise OpError("A SCRAM user needs a name.", "user")
    if len(user) > 255:
        raise OpError("User names are at most 255 characters.", "user")
    return user


def _mechanism(mechanism: str | None) -> str:
    if mechanism not in cluster.MECHANISMS:
        raise OpError(f"Mechanism must be one of {', '.join(cluster.MECHANISMS)}.", "mechanism")
    return mechanism


# ---------------------------------------------------------------- SCRAM users


def scram_users(actor: Actor) -> list[dict]:
    actor.require(ADMIN)
    return cluster.scram_users()


def set_password(
    actor: Actor, user: str, mechanism: str, password: str, iterations=DEFAULT_ITERATIONS
) -> dict:
    """Create the user's credential for ``mechanism`` or change its password."""
    actor.require(ADMIN)
    user, mechanism = _user(user), _mechanism(mechanism)
    iterations = whole(iterations, "iterations", MIN_ITERATIONS, MAX_ITERATIONS, "Iterations")
    if not password:
        raise OpError("The password must not be empty.", "password")
    if len(password) < MIN_PASSWORD_LENGTH:
        raise OpError(
            f"The password must be at least {MIN_PASSWORD_LENGTH} characters long "
            f"(this one has {len(password)}).",
            "password",
        )
    if any(0xD800 <= ord(c) <= 0xDFFF or c == "\x00" for c in password):
        raise OpError("The password must not contain NUL or lone surrogates.", "password")
    if len(password) > 1024:
        raise OpError("Passwords are at most 1024 characters.", "password")
    target = f"scram-user:{user}"
    before = cluster.scram_user(user) or None
    after = [
        *[c for c in before or [] if c["mechanism"] != mechanism],
        {"mechanism": mechanism, "iterations": iterations},
    ]
    after.sort(key=lambda c: c["mechanism"])
    try:
        cluster.upsert_scram(user, mechanism, password, iterations)
    except OpError as exc:
        actor.failed("scram.set", target, exc, before, after)
        raise
    actor.done("scram.set", target, before, after)
    return {"user": user, "credentials": after}


def delete_credential(actor: Actor, user: str, mechanism: str) -> None:
    actor.require(ADMIN)
    user, mechanism = _user(user), _mechanism(mechanism)
    target = f"scram-user:{user}"
    before = cluster.scram_user(user)
    after = [c for c in before if c["mechanism"] != mechanism] or None
    try:
        cluster.delete_scram(user, mechanism)
    except OpError as exc:
        actor.failed("scram.delete", target, exc, before or None, after)
        raise
    actor.done("scram.delete", target, before, after)


# ---------------------------------------------------------------- ACLs


def _choice(value, choices, field: str, what: str, allow_empty: bool = False) -> str:
    value = str(value or "").strip().upper()
    if allow_empty and not value:
        return ""
    if value not in choices:
        raise OpError(f"{what} must be one of {', '.join(choices)}; not {value!r}.", field)
    return value


def acl_filter(raw: dict) -> dict:
    """A list filter (every field optional)."""
    return {
        "resource_type": _choice(
            raw.get("resource_type"), cluster.RESOURCE_TYPES, "resource_type", "Resource type", True
        ),
        "resource_name": _text(raw.get("resource_name"), "resource_name", "A resource name"),
        "pattern_type": _choice(
            raw.get("pattern_type"), cluster.PATTERN_TYPES, "pattern_type", "Pattern type", True
        ),
        "principal": _text(raw.get("principal"), "principal", "A principal"),
        "host": _text(raw.get("host"), "host", "A host"),
        "operation": _choice(
            raw.get("operation"), cluster.OPERATIONS, "operation", "Operation", True
        ),
        "permission": _choice(
            raw.get("permission"), cluster.PERMISSIONS, "permission", "Permission", True
        ),
    }


def acl(raw: dict) -> dict:
    """One ACL, every field given, as kafka-acls would accept it."""
    resource_type = _choice(
        raw.get("resource_type"), cluster.RESOURCE_TYPES, "resource_type", "Resource type"
    )
    name = _text(raw.get("resource_name"), "resource_name", "A resource name")
    if resource_type == "CLUSTER":
        name = name or CLUSTER_NAME
        if name != CLUSTER_NAME:
            raise OpError(f"The cluster resource is named {CLUSTER_NAME!r}.", "resource_name")
    if not name:
        raise OpError("The resource needs a name ('*' for all).", "resource_name")
    principal = _text(raw.get("principal"), "principal", "A principal")
    kind, sep, who = principal.partition(":")
    if not sep or not kind or not who:
        raise OpError(
            "A principal is written Type:name, e.g. User:alice (User:* for everyone).",
            "principal",
        )
    return {
        "resource_type": resource_type,
        "resource_name": name,
        "pattern_type": _choice(
            raw.get("pattern_type") or "LITERAL", cluster.PATTERN_TYPES, "pattern_type", "Pattern"
        ),
        "principal": principal,
        "host": _text(raw.get("host"), "host", "A host") or "*",
        "operation": _choice(raw.get("operation"), cluster.OPERATIONS, "operation", "Operation"),
        "permission": _choice(
            raw.get("permission") or "ALLOW", cluster.PERMISSIONS, "permission", "Permission"
        ),
    }


def _acl_target(a: dict) -> str:
    return f"acl:{a['resource_type']}:{a['pattern_type']}:{a['resource_name']}"


def acls(actor: Actor, raw_filter: dict) -> list[dict]:
    actor.require(ADMIN)
    return cluster.describe_acls(acl_filter(raw_filter))


def add_acl(actor: Actor, raw: dict) -> dict:
    actor.require(ADMIN)
    a = acl(raw)
    try:
        cluster.create_acl(a)
    except OpError as exc:
        actor.failed("acl.add", _acl_target(a), exc, None, a)
        raise
    actor.done("acl.add", _acl_target(a), None, a)
    return a


def remove_acl(actor: Actor, raw: dict) -> list[dict]:
    actor.require(ADMIN)
    a = acl(raw)
    try:
        deleted = cluster.delete_acl(a)
    except OpError as exc:
        actor.failed("acl.remove", _acl_target(a), exc, a, None)
        raise
    actor.done("acl.remove", _acl_target(a), deleted, None)
    return deleted
