"""quill-reassign-partitions: move partitions between brokers (Kafka's
kafka-reassign-partitions.sh), with the same options, JSON files and output texts.

    quill-reassign-partitions --bootstrap-server localhost:9092 --generate \\
        --topics-to-move-json-file topics.json --broker-list 1,2,3
    quill-reassign-partitions --bootstrap-server localhost:9092 --execute \\
        --reassignment-json-file plan.json --throttle 10000000
    quill-reassign-partitions --bootstrap-server localhost:9092 --verify \\
        --reassignment-json-file plan.json      # also removes the throttles once done
    quill-reassign-partitions --bootstrap-server localhost:9092 --cancel \\
        --reassignment-json-file plan.json
    quill-reassign-partitions --bootstrap-server localhost:9092 --list

topics.json: {"topics":[{"topic":"foo"}],"version":1}
plan.json:   {"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[2,3]}]}

--throttle B/s sets leader/follower.replication.throttled.rate on the brokers involved and
the topics' leader/follower.replication.throttled.replicas for the moving replicas only;
--verify (or --cancel) removes them, unless --preserve-throttles.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .common import CliError, ToolParser, add_bootstrap, client_config, describe_error, result
from .controller_client import ControllerAdmin, controller_request
from .reassign_plan import (
    BROKER_LEVEL_THROTTLES,
    CANNOT_EXECUTE_BECAUSE_OF_EXISTING,
    FOLLOWER_RATE,
    LEADER_RATE,
    TOPIC_LEVEL_THROTTLES,
    YOU_MUST_RUN_VERIFY_PERIODICALLY,
    TopicPartition,
    current_assignment_text,
    format_reassignment,
    listing_text,
    move_map,
    parse_broker_list,
    parse_reassignment,
    parse_topics_to_move,
    plural,
    reassigning_brokers,
    status_text,
    topic_throttles,
    tp_str,
)

TOOL = "quill-reassign-partitions"
TIMEOUT_S = 30.0


def _parser() -> ToolParser:
    p = ToolParser(
        prog=TOOL,
        description="This tool helps to move topic partitions between replicas "
        "(like kafka-reassign-partitions.sh).",
        examples=__doc__,
    )
    add_bootstrap(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--generate", action="store_true", help="propose a reassignment")
    action.add_argument("--execute", action="store_true", help="start a reassignment")
    action.add_argument("--verify", action="store_true", help="check it; clear throttles when done")
    action.add_argument("--cancel", action="store_true", help="cancel an active reassignment")
    action.add_argument("--list", action="store_true", help="list the active reassignments")
    p.add_argument("--topics-to-move-json-file", metavar="FILE", help="with --generate")
    p.add_argument("--broker-list", metavar="1,2,3", help="with --generate: the target brokers")
    p.add_argument("--reassignment-json-file", metavar="FILE", help="the reassignment plan")
    p.add_argument("--throttle", type=int, default=-1, metavar="B/s",
                   help="with --execute: inter-broker replication throttle")  # fmt: skip
    p.add_argument("--additional", action="store_true",
                   help="with --execute: even though other reassignments are active")  # fmt: skip
    p.add_argument("--preserve-throttles", action="store_true",
                   help="with --verify/--cancel: leave the throttles in place")  # fmt: skip
    p.add_argument("--disable-rack-aware", action="store_true",
                   help="with --generate: ignore the brokers' racks")  # fmt: skip
    return p


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    _check_args(parser, args)
    try:
        _run(args)
    except CliError as exc:  # Kafka's TerseException: the message alone
        print(exc.message, file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - Kafka's "Error: " + message, exit 1
        print(f"Error: {describe_error(exc)}", file=sys.stderr)
        return 1
    return 0


def _check_args(parser: ToolParser, args) -> None:
    if args.generate and not (args.topics_to_move_json_file and args.broker_list):
        parser.error("--generate needs --topics-to-move-json-file and --broker-list")
    if (args.execute or args.verify or args.cancel) and not args.reassignment_json_file:
        parser.error("--execute, --verify and --cancel need --reassignment-json-file")
    if args.throttle >= 0 and not args.execute:
        parser.error("--throttle goes with --execute")
    if args.additional and not args.execute:
        parser.error("--additional goes with --execute")
    if args.preserve_throttles and not (args.verify or args.cancel):
        parser.error("--preserve-throttles goes with --verify or --cancel")


def _run(args) -> None:
    conf = client_config(args.bootstrap_server, config_file=args.command_config)
    admin = ControllerAdmin(conf)
    if args.list:
        print(listing_text(_ongoing(admin)))
    elif args.generate:
        _generate(admin, args)
    elif args.execute:
        _execute(admin, args)
    elif args.verify:
        _verify(admin, args)
    else:
        _cancel(admin, args)


# -- the cluster ---------------------------------------------------------------------------------


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise CliError("INVALID_REQUEST", f"Cannot read {path}: {exc.strerror}") from None


def _assignments(admin) -> dict[str, dict[int, list[int]]]:
    topics = admin.list_topics(timeout=TIMEOUT_S).topics
    return {
        name: {p: list(meta.replicas) for p, meta in t.partitions.items()}
        for name, t in topics.items()
        if t.error is None
    }


def _current_for(admin, partitions) -> dict[TopicPartition, list[int]]:
    """Kafka's getReplicaAssignmentForPartitions: every one must exist."""
    known = _assignments(admin)
    missing = [tp for tp in partitions if tp[1] not in known.get(tp[0], {})]
    if missing:
        raise CliError(
            "UNKNOWN_TOPIC_OR_PARTITION",
            "Unable to find partition: " + ", ".join(tp_str(tp) for tp in sorted(missing)),
        )
    return {tp: known[tp[0]][tp[1]] for tp in partitions}


def _nodes(admin) -> dict[int, str | None]:
    cluster = result(admin.describe_cluster(request_timeout=TIMEOUT_S), TIMEOUT_S)
    return {n.id: n.rack for n in cluster.nodes}


def _ongoing(admin) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]]:
    resp = controller_request(admin, 46, 0, {"timeout": int(TIMEOUT_S * 1000), "topics": None})
    if resp.error_code != 0:
        raise CliError("LIST_REASSIGNMENTS", f"{resp.error_code.name}: {resp.error_message}")
    return {
        (t.name, p.partition_index): (
            list(p.replicas),
            list(p.adding_replicas),
            list(p.removing_replicas),
        )
        for t in resp.topics
        for p in t.partitions
    }


def _alter(admin, requests: dict[TopicPartition, list[int] | None]) -> dict[TopicPartition, str]:
    """AlterPartitionReassignments; the partitions that failed, with the controller's words."""
    topics: dict[str, list[dict]] = {}
    for (topic, partition), replicas in sorted(requests.items()):
        topics.setdefault(topic, []).append({"partition_index": partition, "replicas": replicas})
    body = {
        "timeout": int(TIMEOUT_S * 1000),
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
    }
    resp = controller_request(admin, 45, 0, body)
    if resp.error_code != 0:
        return {tp: resp.error_message or resp.error_code.name for tp in requests}
    return {
        (t.name, p.partition_index): p.error_message or p.error_code.name
        for t in resp.responses
        for p in t.partitions
        if p.error_code != 0
    }


def _alter_configs(admin, kind: str, name: str, ops: dict[str, str | None]) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    res = ConfigResource(
        ConfigResource.Type.BROKER if kind == "broker" else ConfigResource.Type.TOPIC,
        name,
        incremental_configs=[
            ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
            if value is not None
            else ConfigEntry(key, None, incremental_operation=AlterConfigOpType.DELETE)
            for key, value in ops.items()
        ],
    )
    result(admin.incremental_alter_configs([res])[res], TIMEOUT_S)


def _clear_all_throttles(admin, target: dict[TopicPartition, list[int]]) -> None:
    """Kafka's clearAllThrottles: every live broker's rates, the plan's topics' lists."""
    live = set(_nodes(admin))
    brokers = sorted(live | {b for replicas in target.values() for b in replicas})
    print(f"Clearing broker-level throttles on broker{plural(brokers)} "
          f"{','.join(map(str, brokers))}")  # fmt: skip
    for broker in brokers:
        if broker in live:  # a broker that is down has nobody to answer for it
            _alter_configs(admin, "broker", str(broker), dict.fromkeys(BROKER_LEVEL_THROTTLES))
    topics = sorted({t for t, _ in target})
    print(f"Clearing topic-level throttles on topic{plural(topics)} {','.join(topics)}")
    for topic in topics:
        _alter_configs(admin, "topic", topic, dict.fromkeys(TOPIC_LEVEL_THROTTLES))


# -- the actions ---------------------------------------------------------------------------------


def _generate(admin, args) -> None:
    from ..controller.assignment import assign_replicas, assign_replicas_rack_aware
    from ..protocol.errors import KafkaError

    topics = parse_topics_to_move(_read(args.topics_to_move_json_file))
    wanted = parse_broker_list(args.broker_list)
    known = _assignments(admin)
    for topic in topics:
        if topic not in known:
            raise CliError("UNKNOWN_TOPIC_OR_PARTITION", f"Topic {topic} not found.")
    current = {(t, p): r for t in topics for p, r in known[t].items()}
    racks = {b: rack for b, rack in _nodes(admin).items() if b in wanted}
    if args.disable_rack_aware:
        racks = dict.fromkeys(racks)
    with_rack = [b for b, rack in racks.items() if rack is not None]
    if with_rack and len(with_rack) != len(racks):
        raise CliError(
            "INVALID_REQUEST",
            "Not all brokers have rack information. Add --disable-rack-aware in command line "
            "to make replica assignment without rack information.",
        )
    proposed = {}
    for topic in topics:
        partitions = len(known[topic])
        rf = len(known[topic][0]) if 0 in known[topic] else 1
        try:
            if with_rack:
                plan = assign_replicas_rack_aware(racks, partitions, rf)
            else:
                plan = assign_replicas(sorted(racks), partitions, rf)
        except KafkaError as exc:
            raise CliError("INVALID_REPLICATION_FACTOR", exc.message) from None
        proposed.update({(topic, p): r for p, r in plan.items()})
    print(f"Current partition replica assignment\n{format_reassignment(current)}\n")
    print(f"Proposed partition reassignment configuration\n{format_reassignment(proposed)}")


def _execute(admin, args) -> None:
    proposed = parse_reassignment(_read(args.reassignment_json_file))
    ongoing = _ongoing(admin)
    if not args.additional and ongoing:
        raise CliError("REASSIGNMENT_IN_PROGRESS", CANNOT_EXECUTE_BECAUSE_OF_EXISTING)
    live = _nodes(admin)
    unknown = sorted({b for r in proposed.values() for b in r} - set(live))
    if unknown:
        raise CliError("INVALID_REPLICA_ASSIGNMENT", f"Unknown broker id {unknown[0]}")
    current = _current_for(admin, list(proposed))
    print(current_assignment_text(current))
    if args.throttle >= 0:
        print(YOU_MUST_RUN_VERIFY_PERIODICALLY)
        moves = move_map(ongoing, proposed, current)
        for topic, lists in sorted(topic_throttles(moves).items()):
            _alter_configs(admin, "topic", topic, {k: v for k, v in lists.items() if v})
        for broker in reassigning_brokers(moves):
            rate = str(args.throttle)
            _alter_configs(admin, "broker", str(broker), {LEADER_RATE: rate, FOLLOWER_RATE: rate})
        print(f"The inter-broker throttle limit was set to {args.throttle} B/s")
    errors = _alter(admin, dict(proposed))
    if errors:
        raise CliError(
            "REASSIGNMENT_FAILED",
            "Error reassigning partition(s):\n"
            + "\n".join(f"{tp_str(tp)}: {errors[tp]}" for tp in sorted(errors)),
        )
    print(f"Successfully started partition reassignment{plural(proposed)} for "
          f"{','.join(tp_str(tp) for tp in sorted(proposed))}")  # fmt: skip


def _verify(admin, args) -> None:
    target = parse_reassignment(_read(args.reassignment_json_file))
    ongoing = _ongoing(admin)
    known = _assignments(admin)
    states = {}
    for tp, replicas in target.items():
        if tp in ongoing:
            states[tp] = (ongoing[tp][0], replicas, False)
        else:
            states[tp] = (known.get(tp[0], {}).get(tp[1], []), replicas, True)
    print(status_text(states))
    print()  # Kafka's (empty) list of log dir moves
    if not ongoing and not args.preserve_throttles:
        _clear_all_throttles(admin, target)


def _cancel(admin, args) -> None:
    target = parse_reassignment(_read(args.reassignment_json_file))
    ongoing = _ongoing(admin)
    active = sorted(tp for tp in target if tp in ongoing and (ongoing[tp][1] or ongoing[tp][2]))
    if active:
        errors = _alter(admin, dict.fromkeys(active))
        if errors:
            raise CliError(
                "CANCEL_FAILED",
                f"Error cancelling partition reassignment{plural(errors)} for:\n"
                + "\n".join(f"{tp_str(tp)}: {errors[tp]}" for tp in sorted(errors)),
            )
        print(f"Successfully cancelled partition reassignment{plural(active)} for: "
              f"{','.join(tp_str(tp) for tp in active)}")  # fmt: skip
    else:
        print("None of the specified partition reassignments are active.")
    # Kafka prints this without a line end (what follows shares the line); so do we
    print("None of the specified partition moves are active.", end="")
    if not args.preserve_throttles:
        _clear_all_throttles(admin, target)
    else:
        print()


if __name__ == "__main__":
    sys.exit(main())
