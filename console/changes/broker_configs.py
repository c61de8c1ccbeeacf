"""Dynamic broker configs (Kafka's KIP-226), per broker (/config/brokers/<id>) and for
the cluster (/config/brokers/<default>): the diff a change would make, checked by the
brokers (validate_only) before it is shown, then applied and audited like topic config
edits. Static configs (server.properties) are shown, never changed here: the brokers
mark them read-only in DescribeConfigs."""

from __future__ import annotations

from cluster_client import admin, wire, zk
from cluster_client.errors import ClusterUnavailable, OpError
from console import units
from console.changes import Actor
from console.roles import ADMIN

DEFAULT = "default"  # the console's name for the cluster-wide level


def level(broker: str) -> tuple[str, str, str]:
    """(name for the admin API, ZooKeeper config entity, audit target) of a level."""
    if broker == DEFAULT:
        return admin.DEFAULT_BROKER, "brokers/<default>", "broker:<default>"
    if not broker.isdigit():
        raise OpError(f"{broker!r} is neither a broker id nor 'default'.", "broker")
    return broker, f"brokers/{broker}", f"broker:{broker}"


def current(broker: str) -> dict[str, str]:
    """The dynamic configs set at this level (what an edit starts from)."""
    return zk.entity_config(level(broker)[1])


def diff(broker: str, wanted: dict[str, str]) -> dict:
    """What replacing this level's dynamic configs by `wanted` changes: set, delete and
    rows (key, before, after, their values in words) for the operator to read. Keys the
    brokers keep read-only are refused here with the reason, values by the brokers."""
    name, _entity, _target = level(broker)
    before = current(broker)
    set_ = {k: v for k, v in wanted.items() if before.get(k) != v}
    delete = sorted(k for k in before if k not in wanted)
    described = {c["name"]: c for c in describe(broker)}
    errors = {}
    for key in set_:
        entry = described.get(key)
        if entry is not None and entry["read_only"]:
            errors[f"configs.{key}"] = (
                f"{key} is read-only: set it in server.properties and restart the broker."
            )
    if errors:
        raise OpError(next(iter(errors.values())), **errors)
    rows = [
        {
            "key": k,
            "before": before.get(k),
            "after": wanted.get(k),
            "before_words": units.config_value(k, before.get(k)),
            "after_words": units.config_value(k, wanted.get(k)),
            "sensitive": bool(described.get(k, {}).get("sensitive")),
        }
        for k in sorted({*set_, *delete})
    ]
    return {"set": set_, "delete": delete, "rows": rows, "before": before}


def describe(broker: str) -> list[dict]:
    """Every broker config key with its value, source and whether it is read-only. For
    the default level a live broker is asked (DescribeConfigs of the default level
    lists only the keys set there), and the keys set at the default level carry the
    value set there."""
    name, entity, _target = level(broker)
    if name:
        rows = admin.broker_configs(name)
        for r in rows:
            r["here"] = r["source"] == "dynamic broker"
        return rows
    ids = zk.broker_ids()
    if not ids:
        raise OpError("No broker is up to read the configs from.")
    rows = admin.broker_configs(str(ids[0]))
    here = zk.entity_config(entity)
    for r in rows:
        r["here"] = r["name"] in here
        if r["here"] and not r["sensitive"]:
            r["value"], r["source"] = here[r["name"]], "dynamic default"
    return rows


BROKER_RESOURCE = 4  # Kafka's ConfigResource.Type.BROKER


def alter(broker: str, set_: dict, delete: list, validate_only: bool = False) -> None:
    """IncrementalAlterConfigs sent to the broker itself (Kafka's rule for its own
    configs) or, for the cluster default, to any live broker."""
    name = level(broker)[0]
    live = {b["id"]: b for b in zk.brokers()}
    target = live.get(int(name)) if name else next(iter(live.values()), None)
    what = f"Changing broker {name}'s configs" if name else "Changing the cluster default configs"
    if target is None:
        raise ClusterUnavailable(f"{what}: broker {name or 'of any id'} is not up.")
    resource = (BROKER_RESOURCE, name)
    try:
        code, error, message = wire.incremental_alter_configs(
            target["host"], target["port"], resource, set_, delete, validate_only
        )
    except (OSError, ValueError) as exc:
        raise ClusterUnavailable(f"{what}: broker {target['id']} did not answer ({exc}).") from exc
    if code:
        raise OpError(f"{what}: {message or error}", "configs", code=error)


def preview(actor: Actor, broker: str, wanted: dict[str, str]) -> dict:
    """The diff, checked by the brokers without applying it (validate_only)."""
    actor.require(ADMIN)
    change = diff(broker, wanted)
    if not change["rows"]:
        raise OpError("Nothing to change: these are the configs set now.", "configs")
    alter(broker, change["set"], change["delete"], validate_only=True)
    return change


def apply(actor: Actor, broker: str, wanted: dict[str, str]) -> dict:
    """Check again and apply; audited with the level's configs before and after."""
    change = preview(actor, broker, wanted)
    target = level(broker)[2]
    after = {
        k: v for k, v in {**change["before"], **change["set"]}.items() if k not in change["delete"]
    }
    try:
        alter(broker, change["set"], change["delete"])
    except OpError as exc:
        actor.failed("broker.configs", target, exc, change["before"], after)
        raise
    actor.done("broker.configs", target, change["before"], after)
    return after
