"""Topic operations: create, delete, add partitions, change configs."""

from __future__ import annotations

from broker.protocol.internal_topics import PROTECTED_TOPICS, refusal
from cluster_client import admin, zk
from cluster_client.errors import NotFound, OpError
from console.changes import Actor, validation
from console.roles import ADMIN, OPERATOR


def _existing(name: str) -> dict[int, list[int]]:
    try:
        return zk.assignment(name)
    except NotFound:
        raise NotFound(
            f"Topic {name!r} does not exist (it may have just been deleted).", "topic"
        ) from None


def _changeable(name: str, change: str) -> None:
    """Kafka's internal topics and the sink's marker topic keep their partitions."""
    if why := refusal(name, change):
        raise OpError(why, "name")


def create(actor: Actor, name, partitions, replication_factor, configs=None) -> dict:
    actor.require(OPERATOR)
    name = validation.topic_name(name)
    if name in PROTECTED_TOPICS:
        raise OpError(
            f"{name} is created by Quill itself (the brokers or the pipeline sink) with the "
            f"partitions and configs it needs; choose another name.",
            "name",
        )
    partitions = validation.whole(
        partitions, "partitions", 1, validation.max_partitions(), "Partitions"
    )
    live = len(zk.broker_ids())
    rf = validation.whole(replication_factor, "replication_factor", 1, 32, "Replication factor")
    if rf > live:
        raise OpError(
            f"Replication factor {rf} needs {rf} live brokers; {live} are up.", "replication_factor"
        )
    configs = validation.topic_configs(configs or {})
    _check_dangerous(actor, configs)
    _check_min_isr(configs, rf)
    if name in zk.topic_names():
        raise OpError(f"Topic {name!r} already exists.", "name")
    after = {"partitions": partitions, "replication_factor": rf, "configs": configs}
    target = f"topic:{name}"
    try:
        admin.create_topic(name, partitions, rf, configs)
    except OpError as exc:
        actor.failed("topic.create", target, exc, after=after)
        raise
    actor.done("topic.create", target, None, after)
    return {"name": name, **after}


def delete(actor: Actor, name: str) -> None:
    actor.require(ADMIN)
    _changeable(name, "delete")
    assignment = _existing(name)
    before = {"partitions": len(assignment), "configs": zk.entity_config(f"topics/{name}")}
    try:
        admin.delete_topic(name)
    except OpError as exc:
        actor.failed("topic.delete", f"topic:{name}", exc, before=before)
        raise
    actor.done("topic.delete", f"topic:{name}", before, None)


def add_partitions(actor: Actor, name: str, total) -> dict:
    actor.require(OPERATOR)
    _changeable(name, "add partitions to")
    current = len(_existing(name))
    total = validation.whole(total, "partitions", 1, validation.max_partitions(), "Partitions")
    if total <= current:
        raise OpError(
            f"{name!r} has {current} partitions; the new count must be more than that "
            f"(Kafka cannot remove partitions).",
            "partitions",
        )
    try:
        admin.create_partitions(name, total)
    except OpError as exc:
        actor.failed(
            "topic.partitions", f"topic:{name}", exc, {"partitions": current}, {"partitions": total}
        )
        raise
    actor.done("topic.partitions", f"topic:{name}", {"partitions": current}, {"partitions": total})
    return {"name": name, "partitions": total}


def alter_configs(actor: Actor, name: str, set_: dict, delete: list[str] | None = None) -> dict:
    """Set some keys and return others to their defaults; returns the overrides after."""
    actor.require(OPERATOR)
    assignment = _existing(name)
    set_ = validation.topic_configs(set_ or {})
    delete = [k.strip() for k in (delete or []) if k.strip()]
    for key in delete:
        if key not in validation.TOPIC_CONFIGS:
            raise OpError(f"{key!r} is not a topic config Kafka knows.", f"configs.{key}")
    if not set_ and not delete:
        raise OpError("Nothing to change: give at least one config to set or reset.", "configs")
    _check_dangerous(actor, set_)
    rf = max((len(r) for r in assignment.values()), default=1)
    _check_min_isr(set_, rf)
    before = zk.entity_config(f"topics/{name}")
    after = {k: v for k, v in {**before, **set_}.items() if k not in delete}
    target = f"topic:{name}"
    try:
        admin.alter_topic_configs(name, set_, delete, validate_only=True)
        admin.alter_topic_configs(name, set_, delete)
    except OpError as exc:
        actor.failed("topic.configs", target, exc, before, after)
        raise
    actor.done("topic.configs", target, before, after)
    return after


def _check_dangerous(actor: Actor, configs: dict) -> None:
    for key, value in configs.items():
        if (key, value) in validation.DANGEROUS:
            try:
                actor.require(ADMIN)
            except OpError:
                raise OpError(
                    f"Setting {key}={value} can lose data; only admins may.",
                    f"configs.{key}",
                    status=403,
                ) from None


def _check_min_isr(configs: dict, rf: int) -> None:
    value = configs.get("min.insync.replicas")
    if value is not None and int(value) > rf:
        raise OpError(
            f"min.insync.replicas {value} is more than the replication factor {rf}: "
            f"producers with acks=all could never write.",
            "configs.min.insync.replicas",
        )
