"""quill-topics: create, list, describe, alter and delete topics (Kafka's kafka-topics.sh).

Same options and output as Kafka's TopicCommand, e.g.::

    quill-topics --bootstrap-server localhost:9092 --create --topic t --partitions 3
    quill-topics --bootstrap-server localhost:9092 --describe --topic t

prints, with tabs between the fields (<TAB> below)::

    Topic: t<TAB>TopicId: ...<TAB>PartitionCount: 3<TAB>ReplicationFactor: 1<TAB>Configs: ...
    <TAB>Topic: t<TAB>Partition: 0<TAB>Leader: 1<TAB>Replicas: 1<TAB>Isr: 1
"""

from __future__ import annotations

import argparse
import re
import sys

from ..protocol.internal_topics import INTERNAL_TOPICS, refusal
from .common import (
    CliError,
    ToolParser,
    add_bootstrap,
    admin_client,
    cluster_topics,
    kafka_error_name,
    parse_properties,
    result,
    run_tool,
)


def _parser() -> argparse.ArgumentParser:
    p = ToolParser(
        examples=__doc__,
        prog="quill-topics",
        description="Create, delete, describe, or change a topic (like kafka-topics.sh).",
    )
    add_bootstrap(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--create", action="store_true", help="create a new topic")
    action.add_argument("--list", action="store_true", help="list all available topics")
    action.add_argument("--describe", action="store_true", help="describe topics")
    action.add_argument("--alter", action="store_true", help="add partitions to a topic")
    action.add_argument("--delete", action="store_true", help="delete a topic")
    p.add_argument("--topic", help="the topic (with --list/--describe/--alter/--delete a regex)")
    p.add_argument("--partitions", type=int, help="partition count (create, or alter to grow)")
    p.add_argument("--replication-factor", type=int, help="replication factor of each partition")
    p.add_argument(
        "--replica-assignment",
        metavar="B0:B1,B2:B3",
        help="manual assignment: partitions separated by ',', their replicas by ':'",
    )
    p.add_argument(
        "--config",
        action="append",
        metavar="NAME=VALUE",
        help="a topic config override for --create (repeatable)",
    )
    p.add_argument(
        "--if-not-exists", action="store_true", help="with --create: no error if it exists"
    )
    p.add_argument(
        "--if-exists",
        action="store_true",
        help="with --alter/--delete/--describe: no error if the topic does not exist",
    )
    p.add_argument("--exclude-internal", action="store_true", help="leave out internal topics")
    p.add_argument(
        "--under-replicated-partitions",
        action="store_true",
        help="describe only partitions whose ISR is smaller than their replica set",
    )
    p.add_argument(
        "--unavailable-partitions",
        action="store_true",
        help="describe only partitions without a leader",
    )
    p.add_argument(
        "--topics-with-overrides",
        action="store_true",
        help="describe only topics that have config overrides (header lines only)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    # Every failure becomes one line and exit 1; Ctrl-C is left to Python.
    return run_tool(
        lambda a: _run(_parser().parse_args(a)),
        argv,
        prefix="Error while executing topic command : ",
        catch=(Exception,),
        interrupt_code=None,
    )


def _run(args: argparse.Namespace) -> int:
    if args.topic is None and (args.create or args.alter or args.delete):
        raise CliError("INVALID_REQUEST", 'Missing required argument "[topic]".')
    admin = admin_client(args)
    if args.create:
        return _create(admin, args)
    if args.list:
        for name in _matching(admin, args, require=False):
            print(name)
        return 0
    if args.describe:
        return _describe(admin, args)
    if args.alter:
        return _alter(admin, args)
    return _delete(admin, args)


# --------------------------------------------------------------------------- create


def _replica_assignment(text: str) -> list[list[int]]:
    try:
        out = [[int(b) for b in part.split(":")] for part in text.split(",")]
    except ValueError:
        raise CliError(
            "INVALID_REPLICA_ASSIGNMENT", f"Invalid --replica-assignment {text!r}."
        ) from None
    for index, replicas in enumerate(out):
        if len(set(replicas)) != len(replicas):
            raise CliError(
                "INVALID_REPLICA_ASSIGNMENT",
                f"Partition replica lists may not contain duplicate entries: partition {index} "
                f"has {replicas}.",
            )
    return out


def _create(admin, args) -> int:
    from confluent_kafka.admin import NewTopic

    if "." in args.topic or "_" in args.topic:
        print(
            "WARNING: Due to limitations in metric names, topics with a period ('.') or "
            "underscore ('_') could collide. To avoid issues it is best to use either, but "
            "not both."
        )
    configs = parse_properties(args.config, what="--config entry")
    if args.replica_assignment:
        if args.partitions is not None or args.replication_factor is not None:
            raise CliError(
                "INVALID_REQUEST",
                "Option --replica-assignment can't be used with "
                "--partitions or --replication-factor.",
            )
        spec = NewTopic(
            args.topic,
            replica_assignment=_replica_assignment(args.replica_assignment),
            config=configs,
        )
    else:
        partitions = -1 if args.partitions is None else args.partitions
        rf = -1 if args.replication_factor is None else args.replication_factor
        if args.partitions is not None and partitions < 1:
            raise CliError("INVALID_PARTITIONS", "The partitions must be greater than 0.")
        if args.replication_factor is not None and rf < 1:
            raise CliError(
                "INVALID_REPLICATION_FACTOR", "The replication factor must be greater than 0."
            )
        spec = NewTopic(
            args.topic, num_partitions=partitions, replication_factor=rf, config=configs
        )
    try:
        result(admin.create_topics([spec])[args.topic])
    except Exception as exc:
        if args.if_not_exists and kafka_error_name(exc) == "TOPIC_ALREADY_EXISTS":
            return 0
        raise
    print(f"Created topic {args.topic}.")
    return 0


# --------------------------------------------------------------------------- selection


def _matching(admin, args, *, require: bool) -> list[str]:
    """Topic names matching --topic (a regex, like Kafka's), sorted."""
    names = sorted(cluster_topics(admin))
    if args.exclude_internal:
        names = [n for n in names if n not in INTERNAL_TOPICS]
    if args.topic is not None:
        try:
            pattern = re.compile(args.topic)
        except re.error:
            pattern = re.compile(re.escape(args.topic))
        names = [n for n in names if n == args.topic or pattern.fullmatch(n)]
    if require and not names and not args.if_exists:
        raise CliError(
            "UNKNOWN_TOPIC_OR_PARTITION", f"Topic '{args.topic}' does not exist as expected"
        )
    return names


# --------------------------------------------------------------------------- describe


def _describe(admin, args) -> int:
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import ConfigResource, ResourceType

    names = _matching(admin, args, require=args.topic is not None)
    if not names:
        return 0
    described = admin.describe_topics(TopicCollection(names))
    resources = {n: ConfigResource(ResourceType.TOPIC, n) for n in names}
    config_futures = admin.describe_configs(list(resources.values()))
    for name in names:
        desc = result(described[name])
        entries = result(config_futures[resources[name]])
        overrides = [
            f"{e.name}={e.value}"
            for e in sorted(entries.values(), key=lambda e: e.name)
            if not e.is_default
        ]
        if args.topics_with_overrides and not overrides:
            continue
        _print_topic(desc, overrides, args)
    return 0


def _print_topic(desc, overrides: list[str], args) -> None:
    partitions = sorted(desc.partitions, key=lambda p: p.id)
    rf = len(partitions[0].replicas) if partitions else 0
    partition_filter = args.under_replicated_partitions or args.unavailable_partitions
    if not partition_filter:
        topic_id = f"\tTopicId: {desc.topic_id}" if desc.topic_id is not None else ""
        print(
            f"Topic: {desc.name}{topic_id}\tPartitionCount: {len(partitions)}\t"
            f"ReplicationFactor: {rf}\tConfigs: {','.join(overrides)}"
        )
    if args.topics_with_overrides:
        return
    for p in partitions:
        replicas = [n.id for n in p.replicas]
        isr = [n.id for n in p.isr]
        leader = p.leader.id if p.leader is not None and p.leader.id >= 0 else None
        if args.under_replicated_partitions and len(isr) >= len(replicas):
            continue
        if args.unavailable_partitions and leader is not None:
            continue
        print(
            f"\tTopic: {desc.name}\tPartition: {p.id}\t"
            f"Leader: {'none' if leader is None else leader}\t"
            f"Replicas: {','.join(map(str, replicas))}\tIsr: {','.join(map(str, isr))}"
        )


# --------------------------------------------------------------------------- alter, delete


def _alter(admin, args) -> int:
    from confluent_kafka.admin import NewPartitions

    if args.config:
        raise CliError(
            "INVALID_REQUEST",
            "Option --config is not valid with --alter; use "
            "quill-configs --alter --entity-type topics --add-config instead.",
        )
    if args.partitions is None:
        raise CliError("INVALID_REQUEST", "--alter needs --partitions (the new partition count).")
    assignment = _replica_assignment(args.replica_assignment) if args.replica_assignment else None
    for name in _matching(admin, args, require=True):
        if why := refusal(name, "add partitions to"):
            raise CliError("INVALID_REQUEST", why)
        spec = (
            NewPartitions(name, args.partitions)
            if assignment is None
            else NewPartitions(name, args.partitions, assignment)
        )
        result(admin.create_partitions([spec])[name])
    return 0


def _delete(admin, args) -> int:
    names = _matching(admin, args, require=True)
    for name in names:
        if why := refusal(name, "delete"):
            raise CliError("INVALID_REQUEST", why)
    if not names:
        return 0
    futures = admin.delete_topics(names, operation_timeout=30)
    for name in names:
        result(futures[name])
    return 0


if __name__ == "__main__":
    sys.exit(main())
