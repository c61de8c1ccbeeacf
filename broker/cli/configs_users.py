"""quill-configs for ``--entity-type users``: SCRAM credentials and user quotas, as
Kafka's ConfigCommand does them with --bootstrap-server.

    quill-configs --bootstrap-server b:9092 --alter --entity-type users --entity-name alice \\
        --add-config 'SCRAM-SHA-512=[iterations=8192,password=alice-secret]'
    Completed updating config for user alice.
    quill-configs --bootstrap-server b:9092 --describe --entity-type users
    SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-512=iterations=8192

SCRAM credentials go through AlterUserScramCredentials / DescribeUserScramCredentials
(confluent-kafka's AdminClient: the salt and the salted password are made here, the
password never leaves this process); quota keys (producer_byte_rate, ...) through
AlterClientQuotas / DescribeClientQuotas. One command alters one or the other, as Kafka.
"""

from __future__ import annotations

import re

from ..security.scram_credentials import DEFAULT_ITERATIONS, MECHANISMS, MIN_ITERATIONS
from .common import CliError, result
from .controller_client import command_security, controller_request

QUOTA_KEYS = (
    "producer_byte_rate",
    "consumer_byte_rate",
    "request_percentage",
    "controller_mutation_rate",
)
# ConfigCommand's pattern: the iterations first, if given, then the password
_CREDENTIAL = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)", re.DOTALL)


def _mechanism(name: str):
    from confluent_kafka.admin import ScramMechanism

    return getattr(ScramMechanism, name.replace("-", "_"))


def parse_credential(mechanism: str, text: str) -> tuple[int, str]:
    """``iterations=8192,password=x`` (iterations optional) -> (iterations, password)."""
    match = _CREDENTIAL.fullmatch(text)
    if match is None:
        raise CliError("INVALID_CONFIG", f"Invalid credential property {mechanism}={text}")
    raw, password = match.groups()
    iterations = int(raw) if raw and raw != "-1" else DEFAULT_ITERATIONS
    if iterations < MIN_ITERATIONS:
        raise CliError(
            "INVALID_CONFIG",
            f"Iterations {iterations} is less than the minimum {MIN_ITERATIONS} required for "
            f"{mechanism}",
        )
    return iterations, password


def _split(keys, what: str) -> tuple[list[str], list[str]]:
    keys = list(keys)
    unknown = [k for k in keys if k not in MECHANISMS and k not in QUOTA_KEYS]
    if unknown:
        raise CliError(
            "INVALID_CONFIG",
            f"Only quota and SCRAM credential configs can be {what} for 'users' using "
            f"--bootstrap-server. Unexpected config names: {', '.join(unknown)}",
        )
    return [k for k in keys if k in MECHANISMS], [k for k in keys if k in QUOTA_KEYS]


def alter_user(admin, conf: dict, user: str, adds: dict[str, str], deletes: list[str]) -> None:
    scram_adds, quota_adds = _split(adds, "added")
    scram_deletes, quota_deletes = _split(deletes, "deleted")
    if scram_adds or scram_deletes:
        if user == "":
            raise CliError(
                "INVALID_CONFIG",
                "The use of --entity-default is not allowed with User SCRAM Credentials "
                "using --bootstrap-server.",
            )
        if quota_adds or quota_deletes:
            raise CliError(
                "INVALID_CONFIG",
                "Cannot alter both quota and SCRAM credential configs simultaneously for "
                "'users' using --bootstrap-server.",
            )
        _alter_scram(admin, user, {k: adds[k] for k in scram_adds}, scram_deletes)
    else:
        _alter_quotas(admin, conf, user, {k: adds[k] for k in quota_adds}, quota_deletes)
    label = f"user {user}" if user else "default user"
    print(f"Completed updating config for {label}.")


def _alter_scram(admin, user: str, adds: dict[str, str], deletes: list[str]) -> None:
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    alterations = [UserScramCredentialDeletion(user, _mechanism(m)) for m in deletes]
    for mechanism, text in adds.items():
        iterations, password = parse_credential(mechanism, text)
        info = ScramCredentialInfo(_mechanism(mechanism), iterations)
        alterations.append(UserScramCredentialUpsertion(user, info, password.encode()))
    for future in admin.alter_user_scram_credentials(alterations).values():
        result(future)


def _alter_quotas(admin, conf: dict, user: str, adds: dict[str, str], deletes: list[str]):
    ops = [{"key": k, "value": 0.0, "remove": True} for k in deletes]
    for key, value in adds.items():
        try:
            ops.append({"key": key, "value": float(value), "remove": False})
        except ValueError:
            raise CliError("INVALID_CONFIG", f"Invalid value {value!r} for {key}") from None
    entity = [{"entity_type": "user", "entity_name": user or None}]
    body = {"entries": [{"entity": entity, "ops": ops}], "validate_only": False}
    entry = controller_request(admin, 49, 1, body, security=command_security(conf)).entries[0]
    if entry.error_code:
        raise CliError(entry.error_code.name.upper(), entry.error_message or "")


def describe_users(admin, conf: dict, user: str | None) -> None:
    """Quota lines, then SCRAM lines (not for the default user), as ConfigCommand."""
    match = [] if user is None else [{"entity_type": "user", "match_type": 0, "match": user}]
    if user == "":
        match = [{"entity_type": "user", "match_type": 1, "match": None}]
    body = {"components": match or [{"entity_type": "user", "match_type": 2, "match": None}]}
    resp = controller_request(
        admin, 48, 1, {**body, "strict": True}, security=command_security(conf)
    )
    if resp.error_code:
        raise CliError(resp.error_code.name.upper(), resp.error_message or "")
    for entry in resp.entries:
        name = entry.entity[0].entity_name
        who = f"user-principal '{name}'" if name is not None else "the default user-principal"
        values = ", ".join(f"{v.key}={v.value}" for v in entry.values)
        print(f"Quota configs for {who} are {values}")
    if user == "":
        return
    _describe_scram(admin, [] if user is None else [user])


def _describe_scram(admin, users: list[str]) -> None:
    from confluent_kafka import KafkaException

    from .common import describe_error

    if users:
        futures = admin.describe_user_scram_credentials(users)
    else:  # every user with a credential: one future for all
        everyone = result(admin.describe_user_scram_credentials())
        futures = {name: _done(description) for name, description in everyone.items()}
    for name, future in futures.items():
        try:
            description = result(future)
        except KafkaException as exc:
            # librdkafka (2.16) reads one byte past a user's error message here (the
            # empty credential array's length, 0x01): not part of what the broker said
            message = describe_error(exc).rstrip("\x00\x01")
            print(
                f"Error retrieving SCRAM credential configs for user-principal '{name}': {message}"
            )
            continue
        text = ", ".join(
            f"{i.mechanism.name.replace('_', '-')}=iterations={i.iterations}"
            for i in description.scram_credential_infos
        )
        print(f"SCRAM credential configs for user-principal '{name}' are {text}")


def _done(value):
    from concurrent.futures import Future

    future: Future = Future()
    future.set_result(value)
    return future
