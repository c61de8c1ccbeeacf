"""Shared by the SCRAM user tests: read a user's stored credentials from ZooKeeper and
prove a password against them with a real RFC 5802 exchange (scramp)."""

from __future__ import annotations

import json

import scramp

from broker.quota.manager import sanitize
from broker.security.scram_credentials import ScramCredential, credentials_in


def stored_credentials(zk, user: str) -> dict[str, ScramCredential]:
    """mechanism -> credential in ``/config/users/<user>`` ({} if the znode is absent)."""
    if zk.exists(f"/config/users/{sanitize(user)}") is None:
        return {}
    data, _ = zk.get(f"/config/users/{sanitize(user)}")
    return credentials_in(json.loads(data)["config"])


def scram_login(credential: ScramCredential, user: str, password: str) -> None:
    """A full SCRAM exchange with scramp against the stored credential; raises
    scramp.ScramException when the password does not match."""
    mech = scramp.ScramMechanism(credential.mechanism)
    auth_info = (
        credential.salt,
        credential.stored_key,
        credential.server_key,
        credential.iterations,
    )
    server = mech.make_server(lambda _name: auth_info)
    client = scramp.ScramClient([credential.mechanism], user, password)
    server.set_client_first(client.get_client_first())
    client.set_server_first(server.get_server_first())
    server.set_client_final(client.get_client_final())
    client.set_server_final(server.get_server_final())


def password_works(credential: ScramCredential, user: str, password: str) -> bool:
    try:
        scram_login(credential, user, password)
    except scramp.ScramException:
        return False
    return True
