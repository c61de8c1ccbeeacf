"""The SCRAM credentials the broker authenticates against, kept equal to ZooKeeper's
``/config/users/<user>`` (Kafka's CredentialCache, fed by its UserConfigHandler).

Written from the config-change watcher (``server/quotas.py`` reads every user's config
at start and again on each ``/config/changes`` notification); read by SCRAM exchanges
on the event loop. A plain dict swap per user: no ZooKeeper read during an exchange.
"""

from __future__ import annotations

import logging

from .scram_credentials import MECHANISMS, ScramCredential, credentials_in

log = logging.getLogger(__name__)


class CredentialCache:
    def __init__(self) -> None:
        self._users: dict[str, dict[str, ScramCredential]] = {}

    def update(self, user: str, user_config: dict[str, str]) -> None:
        """A user's config map as read from ZooKeeper (empty: the user is gone)."""
        creds: dict[str, ScramCredential] = {}
        for mechanism in MECHANISMS:
            if mechanism not in user_config:
                continue
            try:
                creds.update(credentials_in({mechanism: user_config[mechanism]}))
            except ValueError as exc:
                log.error("ignoring the %s credential of user %s: %s", mechanism, user, exc)
        old = self._users.get(user, {})
        if creds:
            self._users[user] = creds
        else:
            self._users.pop(user, None)
        if set(old) != set(creds) or any(old[m] != creds[m] for m in old.keys() & creds.keys()):
            log.info("SCRAM credentials of user %s: %s", user, ", ".join(sorted(creds)) or "none")

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def users(self) -> list[str]:
        return sorted(self._users)
