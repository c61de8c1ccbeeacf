"""Client quotas in ZooKeeper, as kafka-configs writes them: /config/users/<u>,
/config/clients/<c>, /config/users/<u>/clients/<c>, with <default> for defaults, and a
change notification under /config/changes for each write so brokers pick it up."""

from __future__ import annotations

from urllib.parse import quote, unquote

from broker.zk.znodes import ConfigEntityZNode
from cluster_client import redact, zk
from cluster_client.errors import NotFound, OpError
from console.changes import Actor, validation
from console.roles import OPERATOR

DEFAULT = "<default>"


def sanitize(name: str) -> str:
    """Kafka's Sanitizer: URL-encode, with '*' encoded too (the default stays as is)."""
    return name if name == DEFAULT else quote(name, safe="").replace("*", "%2A")


def entity_path(user: str | None, client: str | None) -> str:
    user = (user or "").strip() or None
    client = (client or "").strip() or None
    if user is None and client is None:
        raise OpError("Name a user, a client id, or both (use <default> for the defaults).", "user")
    if user is not None and client is not None:
        return f"users/{sanitize(user)}/clients/{sanitize(client)}"
    if user is not None:
        return f"users/{sanitize(user)}"
    return f"clients/{sanitize(client)}"


def _row(path: str, quotas: dict) -> dict:
    parts = path.split("/")
    user = unquote(parts[1]) if parts[0] == "users" else None
    client = unquote(parts[-1]) if parts[0] == "clients" or len(parts) == 4 else None
    return {"user": user, "client": client, "entity_path": path, "quotas": quotas}


def list_all() -> list[dict]:
    paths = []
    for u in zk.entities("users"):
        paths.append(f"users/{u}")
        paths += [
            f"users/{u}/clients/{c}"
            for c in zk.children(ConfigEntityZNode.entity(f"users/{u}/clients"))
        ]
    paths += [f"clients/{c}" for c in zk.entities("clients")]
    data = zk.get_many([ConfigEntityZNode.entity(p) for p in paths])
    rows = []
    for p in paths:
        quotas = _quotas(ConfigEntityZNode.decode(data[ConfigEntityZNode.entity(p)]))
        if quotas:
            rows.append(_row(p, quotas))
    return sorted(rows, key=lambda r: (r["user"] is None, r["user"] or "", r["client"] or ""))


def _quotas(config: dict) -> dict:
    """The quota keys of an entity config (a user's also holds its SCRAM credentials)."""
    return {k: v for k, v in config.items() if k in validation.QUOTA_KEYS}


def get(user: str | None, client: str | None) -> dict:
    path = entity_path(user, client)
    return _row(path, _quotas(zk.entity_config(path)))


def set_quotas(actor: Actor, user: str | None, client: str | None, values: dict) -> dict:
    """Replace the entity's quotas with `values` (keys left out are removed)."""
    actor.require(OPERATOR)
    path = entity_path(user, client)
    clean = validation.quota_values(values)
    before = zk.entity_config(path)
    others = {k: v for k, v in before.items() if k not in validation.QUOTA_KEYS}
    after = {**others, **clean}
    zk.set_entity_config(path, after)
    actor.done("quota.set", f"quota:{path}", redact.config(before) or None, redact.config(after))
    return _row(path, clean)


def delete(actor: Actor, user: str | None, client: str | None) -> None:
    actor.require(OPERATOR)
    path = entity_path(user, client)
    before = zk.entity_config(path)
    if not any(k in validation.QUOTA_KEYS for k in before):
        raise NotFound(f"No quota is set for {path}.")
    after = {k: v for k, v in before.items() if k not in validation.QUOTA_KEYS}
    zk.set_entity_config(path, after)
    actor.done("quota.delete", f"quota:{path}", redact.config(before), redact.config(after) or None)
