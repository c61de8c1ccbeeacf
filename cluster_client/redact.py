"""What of a user's ZooKeeper config may leave the brokers: Kafka keeps SCRAM credentials
in /config/users/<user> next to the quotas (``SCRAM-SHA-512=salt=..,stored_key=..,
server_key=..,iterations=4096``). A salt and stored key are enough to try passwords
offline and a stored key with the server key lets one impersonate the broker, so, as
Kafka's DescribeUserScramCredentials does, only the mechanism and its iterations are
shown anywhere: API answers, pages, audit entries, the cluster event feed."""

from __future__ import annotations

import re

SCRAM_PREFIX = "SCRAM-"


def scram_value(value: str) -> str:
    """``salt=..,stored_key=..,server_key=..,iterations=4096`` -> ``iterations=4096``."""
    for part in str(value).split(","):
        key, sep, val = part.partition("=")
        if sep and key.strip() == "iterations" and val.strip().isdigit():
            return f"iterations={val.strip()}"
    return "iterations=?"


def config(values: dict | None) -> dict | None:
    """An entity config with every SCRAM credential reduced to its iterations."""
    if not isinstance(values, dict):
        return values
    return {
        k: scram_value(v) if str(k).upper().startswith(SCRAM_PREFIX) else v
        for k, v in values.items()
    }


_CREDENTIAL = re.compile(r"salt=[^,\s]*,\s*stored_key=[^,\s]*,\s*server_key=[^,\s]*,\s*")


def text(sentence: str) -> str:
    """A sentence with any stored SCRAM credential cut to its iterations (events the
    monitor kept before it redacted them)."""
    return _CREDENTIAL.sub("", sentence)
