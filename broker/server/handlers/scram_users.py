"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), KIP-554.

As Kafka 3.x's ZkAdminManager: a user's SCRAM credentials live in ``/config/users/<user>``
(the name sanitized as Kafka's Sanitizer does) next to its quota keys, one entry per
mechanism in Kafka's stored form (``salt=..,stored_key=..,server_key=..,iterations=..``).
The client sends the salt and the salted password, never the password; the broker derives
the stored and server keys. Every change writes a ``/config/changes/config_change_``
notification, so every broker's SCRAM authenticator picks it up. Describe never returns
a secret: a mechanism and its iterations per user.

Alter is answered by the active controller only (NOT_CONTROLLER elsewhere), as in Kafka.
With an authorizer, Describe needs Cluster Describe and Alter Cluster Alter
(CLUSTER_AUTHORIZATION_FAILED, answered by :func:`refused`).
Errors are Kafka's, per user, and a user with any bad alteration is not changed at all
(an empty salt or salted password, which Kafka's ScramFormatter fails on with
UNKNOWN_SERVER_ERROR, is UNACCEPTABLE_CREDENTIAL with a sentence here):
empty user name or iterations out of [4096, 16384] -> UNACCEPTABLE_CREDENTIAL, unknown
mechanism -> UNSUPPORTED_SASL_MECHANISM, the same (user, mechanism) twice ->
DUPLICATE_RESOURCE, deleting a credential that does not exist -> RESOURCE_NOT_FOUND.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...protocol.errors import ErrorCode
from ...protocol.messages import RequestHeader
from ...quota.manager import parse_entity_path, sanitize
from ...security.scram_credentials import (
    MAX_ITERATIONS,
    MECHANISM_TYPES,
    MIN_ITERATIONS,
    ScramCredential,
)
from .controller_ops import controller_here

if TYPE_CHECKING:
    from ...zk.client import KafkaZkClient
    from ..kafka_server import KafkaServer

MECHANISM_NAMES = {t: name for name, t in MECHANISM_TYPES.items()}
USERS = "users"
# Kafka's messages (ZkAdminManager)
EMPTY_USER = "Username must not be empty"
UNKNOWN_MECHANISM = "Unknown SCRAM mechanism"
TOO_FEW = "Too few iterations"
TOO_MANY = "Too many iterations"
EMPTY_SALT = "Salt must not be empty"
EMPTY_SALTED = "Salted password must not be empty"
DUPLICATE = "A user credential cannot be altered twice in the same request"
NOT_FOUND = "Attempt to delete a user credential that does not exist"

UserConfigs = Callable[[str], dict[str, str]]


def user_config(zk: KafkaZkClient, user: str) -> dict[str, str]:
    """``/config/users/<user>``'s config map; a znode that is not Kafka's JSON reads empty
    (the broker ignores it too, and an alteration overwrites it)."""
    try:
        return zk.get_entity_config(USERS, sanitize(user))
    except (ValueError, TypeError, AttributeError):
        return {}


def _result(user: str, code: ErrorCode, message: str | None) -> dict:
    return {"user": user, "error_code": code, "error_message": message}


# -- DescribeUserScramCredentials --------------------------------------------------------
def _credential_infos(config: dict[str, str]) -> list[dict] | None:
    """Mechanism and iterations of each credential, None if the user has none; ValueError
    if a stored credential is malformed."""
    infos = []
    for name, mech_type in sorted(MECHANISM_TYPES.items(), key=lambda kv: kv[1]):
        if name in config:
            cred = ScramCredential.from_config_value(name, config[name])
            infos.append({"mechanism": mech_type, "iterations": cred.iterations})
    return infos or None


def _describe_user(user: str, config: dict[str, str], explicit: bool) -> dict | None:
    try:
        infos = _credential_infos(config)
    except ValueError as exc:
        return {
            **_result(user, ErrorCode.unknown_server_error, f"Error retrieving credentials: {exc}"),
            "credential_infos": [],
        }
    if infos is None:
        if not explicit:
            return None
        message = f"Attempt to describe a user credential that does not exist: {user}"
        return {**_result(user, ErrorCode.resource_not_found, message), "credential_infos": []}
    return {**_result(user, ErrorCode.none, None), "credential_infos": infos}


def describe(users: list[str] | None, configs: UserConfigs, all_users: list[str]) -> list[dict]:
    """Kafka's per-user results: every user with a credential (sorted) when ``users`` is
    null or empty, else one result per distinct requested user, in request order."""
    if not users:
        found = (_describe_user(u, configs(u), explicit=False) for u in sorted(all_users))
        return [r for r in found if r is not None]
    results: dict[str, dict] = {}
    counts = Counter(users)
    for user in counts:
        if user == "":
            results[user] = {
                **_result(user, ErrorCode.resource_not_found, EMPTY_USER),
                "credential_infos": [],
            }
        elif counts[user] > 1:
            message = (
                "Cannot describe SCRAM credentials for the same user twice in a single "
                f"request: {user}"
            )
            results[user] = {
                **_result(user, ErrorCode.duplicate_resource, message),
                "credential_infos": [],
            }
        else:
            results[user] = _describe_user(user, configs(user), explicit=True)
    return list(results.values())


def _all_users(zk: KafkaZkClient) -> list[str]:
    names = (parse_entity_path(f"{USERS}/{child}") for child in zk.config_children(USERS))
    return [entity[0] for entity in names if entity is not None and entity[0] is not None]


def _describe_zk(zk: KafkaZkClient, users: list[str] | None) -> list[dict]:
    return describe(users, lambda u: user_config(zk, u), [] if users else _all_users(zk))


async def handle_describe_user_scram_credentials(
    server: KafkaServer, header: RequestHeader, req: Any
) -> dict:
    # Cluster Describe is checked before this runs (broker/server/authorization.py GATES)
    users = None if req.users is None else [u.name for u in req.users]
    try:
        results = await asyncio.to_thread(_describe_zk, server.zk, users)
    except Exception as exc:  # ZooKeeper unreachable: Kafka answers at the message level
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.unknown_server_error,
            "error_message": f"Error retrieving credentials: {exc}",
            "results": [],
        }
    return {"throttle_time": 0, "error_code": 0, "error_message": None, "results": results}


# -- AlterUserScramCredentials -----------------------------------------------------------
def _upsertion_problem(u: Any) -> str | None:
    if u.name == "":
        return EMPTY_USER
    if u.mechanism not in MECHANISM_NAMES:
        return UNKNOWN_MECHANISM
    if u.iterations < MIN_ITERATIONS:
        return TOO_FEW
    if u.iterations > MAX_ITERATIONS:
        return TOO_MANY
    if not u.salt:
        return EMPTY_SALT
    if not u.salted_password:
        return EMPTY_SALTED
    return None


def _deletion_problem(d: Any) -> str | None:
    if d.name == "":
        return EMPTY_USER
    return UNKNOWN_MECHANISM if d.mechanism not in MECHANISM_NAMES else None


def plan_alterations(
    deletions: list[Any], upsertions: list[Any], configs: UserConfigs
) -> tuple[list[dict], dict[str, dict[str, str]]]:
    """Kafka's validation, in its order: (per-user results, new config map per user to
    write). A user with any problem keeps its credentials unchanged."""
    illegal: dict[str, str] = {}  # Kafka's maps: a user's last problem, upsertions' last
    for items, problem in ((deletions, _deletion_problem), (upsertions, _upsertion_problem)):
        for item in items:
            message = problem(item)
            if message is not None:
                illegal[item.name] = message
    results = [
        _result(
            user,
            ErrorCode.unsupported_sasl_mechanism
            if message == UNKNOWN_MECHANISM
            else ErrorCode.unacceptable_credential,
            message,
        )
        for user, message in illegal.items()
    ]
    pairs = Counter(
        (x.name, x.mechanism) for x in [*upsertions, *deletions] if x.name not in illegal
    )
    duplicated = list(dict.fromkeys(user for (user, _), n in pairs.items() if n > 1))
    results += [_result(user, ErrorCode.duplicate_resource, DUPLICATE) for user in duplicated]
    skip = set(duplicated)
    valid = [user for user in dict.fromkeys(user for user, _ in pairs) if user not in skip]
    current = {user: dict(configs(user)) for user in valid}
    missing = list(
        dict.fromkeys(
            d.name
            for d in deletions
            if d.name in current and MECHANISM_NAMES[d.mechanism] not in current[d.name]
        )
    )
    results += [_result(user, ErrorCode.resource_not_found, NOT_FOUND) for user in missing]
    gone = set(missing)
    changed = {user: config for user, config in current.items() if user not in gone}
    for d in deletions:
        if d.name in changed:
            changed[d.name].pop(MECHANISM_NAMES[d.mechanism], None)
    for u in upsertions:
        if u.name in changed:
            mechanism = MECHANISM_NAMES[u.mechanism]
            credential = ScramCredential.from_salted_password(
                mechanism, u.salt, u.salted_password, u.iterations
            )
            changed[u.name][mechanism] = credential.to_config_value()
    return results, changed


def _alter_zk(zk: KafkaZkClient, deletions: list[Any], upsertions: list[Any]) -> list[dict]:
    results, changed = plan_alterations(deletions, upsertions, lambda u: user_config(zk, u))
    for user, config in changed.items():
        try:
            zk.set_entity_config(USERS, sanitize(user), config)
            results.append(_result(user, ErrorCode.none, None))
        except Exception as exc:  # ZooKeeper failed for this user: Kafka reports it per user
            results.append(_result(user, ErrorCode.unknown_server_error, str(exc)))
    return results


def refused(api_key: int, req: Any, code: ErrorCode, message: str) -> dict:
    """The whole request refused, as Kafka's getErrorResponse: Describe answers the code at
    the top and for each requested user, Alter for each user it names (sorted)."""
    if api_key == 50:
        users = [u.name for u in req.users or ()]
        results = [{**_result(u, code, message), "credential_infos": []} for u in users]
        return {"error_code": code, "error_message": message, "results": results}
    users = sorted({x.name for x in [*req.deletions, *req.upsertions]})
    return {"results": [_result(u, code, message) for u in users]}


async def handle_alter_user_scram_credentials(
    server: KafkaServer, header: RequestHeader, req: Any
) -> dict:
    if not await controller_here(server):
        message = "This is not the correct controller for this cluster."
        return {"throttle_time": 0, **refused(51, req, ErrorCode.not_controller, message)}
    # Cluster Alter is checked before this runs (broker/server/authorization.py GATES)
    results = await asyncio.to_thread(_alter_zk, server.zk, req.deletions, req.upsertions)
    return {"throttle_time": 0, "results": results}
