"""quill-consumer-groups: list, describe, reset and delete consumer groups (Kafka's
kafka-consumer-groups.sh), over the Kafka protocol with confluent_kafka's AdminClient.

    quill-consumer-groups --bootstrap-server localhost:9092 --list
    quill-consumer-groups --bootstrap-server localhost:9092 --describe --group g
    quill-consumer-groups --bootstrap-server localhost:9092 --describe --group g --state
    quill-consumer-groups --bootstrap-server localhost:9092 --describe --group g --members
    quill-consumer-groups --bootstrap-server localhost:9092 --reset-offsets --group g \\
        --topic t --to-earliest [--execute]
    quill-consumer-groups --bootstrap-server localhost:9092 --delete --group g

--describe prints, per partition, Kafka's columns: GROUP TOPIC PARTITION CURRENT-OFFSET
LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID. --reset-offsets shows the new offsets and
changes nothing unless --execute is given; like Kafka it refuses a group that has active
members. Offsets outside [earliest, latest] are clamped, with a warning.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import sys

from .common import (
    CliError,
    ToolParser,
    add_bootstrap,
    admin_client,
    describe_error,
    result,
    run_tool,
)

NONE = "-"


def _parser() -> argparse.ArgumentParser:
    p = ToolParser(
        examples=__doc__,
        prog="quill-consumer-groups",
        description="List, describe, reset offsets of, or delete consumer groups.",
    )
    add_bootstrap(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list all consumer groups")
    action.add_argument("--describe", action="store_true", help="describe consumer group(s)")
    action.add_argument("--reset-offsets", action="store_true", help="reset committed offsets")
    action.add_argument("--delete", action="store_true", help="delete consumer group(s)")
    p.add_argument("--group", action="append", default=[], help="a group (repeatable)")
    p.add_argument("--all-groups", action="store_true", help="every group")
    p.add_argument("--state", action="store_true", help="with --describe: group state")
    p.add_argument("--members", action="store_true", help="with --describe: the members")
    p.add_argument("--verbose", action="store_true", help="with --members: the assignments")
    p.add_argument("--offsets", action="store_true", help="with --describe: offsets (default)")
    p.add_argument("--topic", action="append", default=[], help="TOPIC or TOPIC:0,1 (repeatable)")
    p.add_argument(
        "--all-topics", action="store_true", help="every topic the group has offsets for"
    )
    scenario = p.add_mutually_exclusive_group()
    scenario.add_argument("--to-earliest", action="store_true", help="reset to the log start")
    scenario.add_argument("--to-latest", action="store_true", help="reset to the log end")
    scenario.add_argument("--to-current", action="store_true", help="keep the committed offset")
    scenario.add_argument("--to-offset", type=int, metavar="N", help="reset to offset N")
    scenario.add_argument("--shift-by", type=int, metavar="N", help="move by N (may be < 0)")
    scenario.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss", help="by time")
    scenario.add_argument("--by-duration", metavar="PnDTnHnMnS", help="by time before now")
    run = p.add_mutually_exclusive_group()
    run.add_argument("--execute", action="store_true", help="apply the reset")
    run.add_argument("--dry-run", action="store_true", help="only show the result (default)")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for answers")
    return p


def main(argv: list[str] | None = None) -> int:
    # Every failure becomes one line and exit 1; Ctrl-C is left to Python.
    return run_tool(
        lambda a: _run(_parser().parse_args(a)),
        argv,
        catch=(Exception,),
        interrupt_code=None,
    )


def _run(args: argparse.Namespace) -> int:
    admin = admin_client(args)
    if args.list:
        for listing in _list(admin, args.timeout):
            print(listing.group_id)
        return 0
    groups = list(args.group)
    if args.all_groups:
        groups = [g.group_id for g in _list(admin, args.timeout)]
    if not groups:
        raise CliError("INVALID_REQUEST", "One of --group or --all-groups is required.")
    if args.describe:
        return _describe(admin, groups, args)
    if args.delete:
        return _delete(admin, groups, args.timeout)
    return _reset(admin, groups, args)


def _list(admin, timeout: float):
    listed = result(admin.list_consumer_groups(request_timeout=timeout), timeout)
    return sorted(listed.valid, key=lambda g: g.group_id)


_STATES = {
    "PREPARING_REBALANCING": "PreparingRebalance",
    "COMPLETING_REBALANCING": "CompletingRebalance",
}


def _state(description) -> str:
    """Kafka's name of the group state (confluent_kafka's enum says STABLE, ...)."""
    name = description.state.name
    return _STATES.get(name, name.title())


# -- describe --------------------------------------------------------------------------------
def _describe_groups(admin, groups: list[str], timeout: float) -> dict:
    futures = admin.describe_consumer_groups(groups, request_timeout=timeout)
    return {g: result(f, timeout) for g, f in futures.items()}


def _committed(admin, group: str, timeout: float) -> dict[tuple[str, int], int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    futures = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group)], request_timeout=timeout
    )
    answer = result(futures[group], timeout)
    return {(tp.topic, tp.partition): tp.offset for tp in answer.topic_partitions if tp.offset >= 0}


def _offsets(admin, tps, spec, timeout: float) -> dict[tuple[str, int], int]:
    """ListOffsets for (topic, partition)s; ``spec`` is an OffsetSpec."""
    from confluent_kafka import TopicPartition

    if not tps:
        return {}
    futures = admin.list_offsets(
        {TopicPartition(t, p): spec for t, p in tps}, request_timeout=timeout
    )
    return {(tp.topic, tp.partition): result(f, timeout).offset for tp, f in futures.items()}


def _table(rows: list[list], header: list[str]) -> None:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=False)]
    print()
    for row in [header, *rows]:
        print(" ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=False)).rstrip())


def _describe(admin, groups: list[str], args) -> int:
    from confluent_kafka.admin import OffsetSpec

    descriptions = _describe_groups(admin, groups, args.timeout)
    for group in groups:
        d = descriptions[group]
        state = _state(d)
        if state == "Dead":
            print(f"Consumer group '{group}' does not exist.", file=sys.stderr)
            continue
        if args.state:
            coordinator = f"{d.coordinator.host}:{d.coordinator.port} ({d.coordinator.id})"
            _table(
                [[group, coordinator, d.partition_assignor or "", state, len(d.members)]],
                ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
            )
            continue
        if not d.members:
            print(f"\nConsumer group '{group}' has no active members.")
        if args.members:
            _describe_members(group, d, args.verbose)
            continue
        owners = {}
        for m in d.members:
            for tp in m.assignment.topic_partitions:
                owners[(tp.topic, tp.partition)] = m
        committed = _committed(admin, group, args.timeout)
        tps = sorted(set(committed) | set(owners))
        ends = _offsets(admin, tps, OffsetSpec.latest(), args.timeout)
        rows = []
        for tp in tps:
            current, end, m = committed.get(tp), ends.get(tp), owners.get(tp)
            lag = end - current if current is not None and end is not None else NONE
            rows.append(
                [
                    group, tp[0], tp[1],
                    NONE if current is None else current,
                    NONE if end is None else end,
                    lag,
                    m.member_id if m else NONE,
                    m.host if m else NONE,
                    m.client_id if m else NONE,
                ]
            )  # fmt: skip
        header = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"]
        _table(rows, header + ["CONSUMER-ID", "HOST", "CLIENT-ID"])
        print(f"\nGroup state: {state}")
    return 0


def _describe_members(group: str, d, verbose: bool) -> None:
    rows = []
    for m in d.members:
        parts = m.assignment.topic_partitions
        row = [group, m.member_id, m.group_instance_id or NONE, m.host, m.client_id, len(parts)]
        if verbose:
            by_topic: dict[str, list[int]] = {}
            for tp in parts:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            row.append(
                ", ".join(
                    f"{t}({','.join(map(str, sorted(p)))})" for t, p in sorted(by_topic.items())
                )
                or NONE
            )
        rows.append(row)
    header = ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    _table(rows, header + (["ASSIGNMENT"] if verbose else []))


# -- delete ----------------------------------------------------------------------------------
def _delete(admin, groups: list[str], timeout: float) -> int:
    futures = admin.delete_consumer_groups(groups, request_timeout=timeout)
    failed = {}
    for group, future in futures.items():
        try:
            result(future, timeout)
        except Exception as exc:  # noqa: BLE001 - reported per group, as Kafka does
            failed[group] = describe_error(exc)
    ok = [g for g in groups if g not in failed]
    if ok:
        names = ", ".join(f"'{g}'" for g in ok)
        print(f"Deletion of requested consumer groups ({names}) was successful.")
    if failed:
        print("Deletion of some consumer groups failed:", file=sys.stderr)
        for group, why in failed.items():
            print(f"* Group '{group}' could not be deleted due to: {why}", file=sys.stderr)
        return 1
    return 0


# -- reset -----------------------------------------------------------------------------------
_DURATION = re.compile(
    r"^P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$", re.I
)


def parse_duration_ms(text: str) -> int:
    """ISO-8601 duration as Kafka's --by-duration takes it: PnDTnHnMnS."""
    m = _DURATION.match(text.strip())
    if not m or text.strip().upper() in ("P", "PT"):
        raise CliError("INVALID_REQUEST", f"Invalid duration {text!r}: expected PnDTnHnMnS.")
    days, hours, minutes = (int(m.group(k) or 0) for k in "dhm")
    seconds = float(m.group("s") or 0)
    return int((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000)


def parse_datetime_ms(text: str) -> int:
    """Kafka's --to-datetime: YYYY-MM-DDTHH:mm:SS.sss, optionally with a zone (Z, +hh:mm);
    without one, local time."""
    value = text.strip().replace("Z", "+00:00")
    try:
        when = dt.datetime.fromisoformat(value)
    except ValueError:
        raise CliError(
            "INVALID_REQUEST", f"Invalid datetime {text!r}: expected YYYY-MM-DDTHH:mm:SS.sss."
        ) from None
    if when.tzinfo is None:
        when = when.astimezone()
    return int(when.timestamp() * 1000)


def _scenario(args) -> str:
    for name in (
        "to_earliest",
        "to_latest",
        "to_current",
        "to_offset",
        "shift_by",
        "to_datetime",
        "by_duration",
    ):
        value = getattr(args, name)
        if value not in (None, False):
            return name
    raise CliError(
        "INVALID_REQUEST",
        "One of the reset scenarios is required: --to-earliest, --to-latest, --to-current, "
        "--to-offset, --shift-by, --to-datetime, --by-duration.",
    )


def _targets(admin, group: str, args, committed: dict) -> list[tuple[str, int]]:
    if args.all_topics:
        return sorted(committed)
    if not args.topic:
        raise CliError("INVALID_REQUEST", "One of --topic or --all-topics is required.")
    meta = admin.list_topics(timeout=args.timeout).topics
    out = []
    for spec in args.topic:
        topic, _, parts = spec.partition(":")
        if topic not in meta:
            raise CliError("UNKNOWN_TOPIC_OR_PARTITION", f"Topic '{topic}' does not exist.")
        wanted = (
            [int(p) for p in parts.split(",") if p] if parts else sorted(meta[topic].partitions)
        )
        out += [(topic, p) for p in wanted]
    return out


def _new_offsets(admin, tps, args, committed) -> dict[tuple[str, int], int]:
    from confluent_kafka.admin import OffsetSpec

    scenario = _scenario(args)
    earliest = _offsets(admin, tps, OffsetSpec.earliest(), args.timeout)
    latest = _offsets(admin, tps, OffsetSpec.latest(), args.timeout)
    if scenario == "to_earliest":
        wanted = dict(earliest)
    elif scenario == "to_latest":
        wanted = dict(latest)
    elif scenario == "to_current":
        wanted = {tp: committed.get(tp, latest[tp]) for tp in tps}
    elif scenario == "to_offset":
        wanted = dict.fromkeys(tps, args.to_offset)
    elif scenario == "shift_by":
        wanted = {tp: committed.get(tp, latest[tp]) + args.shift_by for tp in tps}
    else:
        if scenario == "to_datetime":
            ts = parse_datetime_ms(args.to_datetime)
        else:
            ts = int(dt.datetime.now().timestamp() * 1000) - parse_duration_ms(args.by_duration)
        found = _offsets(admin, tps, OffsetSpec.for_timestamp(ts), args.timeout)
        wanted = {tp: found[tp] if found[tp] >= 0 else latest[tp] for tp in tps}
    out = {}
    for tp in tps:
        new = wanted[tp]
        if new < earliest[tp]:
            print(
                f"New offset ({new}) is lower than earliest offset for topic partition {tp[0]}-{tp[1]}. Value will be set to {earliest[tp]}",
                file=sys.stderr,
            )
            new = earliest[tp]
        elif new > latest[tp]:
            print(
                f"New offset ({new}) is higher than latest offset for topic partition {tp[0]}-{tp[1]}. Value will be set to {latest[tp]}",
                file=sys.stderr,
            )
            new = latest[tp]
        out[tp] = new
    return out


def _reset(admin, groups: list[str], args) -> int:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    descriptions = _describe_groups(admin, groups, args.timeout)
    rows, refused = [], False
    for group in groups:
        state = _state(descriptions[group])
        if state not in ("Empty", "Dead", "Unknown"):
            print(
                f"Error: Assignments can only be reset if the group '{group}' is inactive, "
                f"but the current state is {state}.",
                file=sys.stderr,
            )
            refused = True
            continue
        committed = _committed(admin, group, args.timeout)
        new = _new_offsets(admin, _targets(admin, group, args, committed), args, committed)
        if args.execute and new:
            request = ConsumerGroupTopicPartitions(
                group, [TopicPartition(t, p, o) for (t, p), o in sorted(new.items())]
            )
            future = admin.alter_consumer_group_offsets([request], request_timeout=args.timeout)
            result(future[group], args.timeout)
        rows += [[group, t, p, o] for (t, p), o in sorted(new.items())]
    if rows:
        _table(rows, ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"])
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
