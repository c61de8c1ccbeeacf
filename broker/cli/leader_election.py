"""quill-leader-election: elect partition leaders (Kafka's kafka-leader-election.sh), with
the same options and output texts.

    quill-leader-election --bootstrap-server localhost:9092 --election-type PREFERRED \\
        --all-topic-partitions
    quill-leader-election --bootstrap-server localhost:9092 --election-type UNCLEAN \\
        --topic foo --partition 0
    quill-leader-election --bootstrap-server localhost:9092 --election-type PREFERRED \\
        --path-to-json-file partitions.json

partitions.json: {"partitions":[{"topic":"foo","partition":1}]}

Prints "Successfully completed leader election (PREFERRED) for partitions foo-0, ...",
"Valid replica already elected for partitions ..." and, for each failure, "Error completing
leader election (PREFERRED) for partition: foo-1: <exception>: <message>"; exit code 1 when
any partition failed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kio.schema.errors import ErrorCode

from .common import CliError, ToolParser, add_bootstrap, client_config, describe_error
from .controller_client import ControllerAdmin, controller_request

TOOL = "quill-leader-election"
ELECTION_TYPES = {"PREFERRED": 0, "UNCLEAN": 1}
TIMEOUT_MS = 30000


def _parser() -> ToolParser:
    p = ToolParser(
        prog=TOOL,
        description="Elect the leaders of partitions (like kafka-leader-election.sh).",
        examples=__doc__,
    )
    add_bootstrap(p, config_flag="--admin.config")
    p.add_argument("--election-type", required=True, type=str.upper,
                   choices=sorted(ELECTION_TYPES), help="PREFERRED or UNCLEAN")  # fmt: skip
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--all-topic-partitions", action="store_true",
                       help="every partition of every topic")  # fmt: skip
    which.add_argument("--topic", help="one topic (with --partition)")
    which.add_argument("--path-to-json-file", metavar="FILE",
                       help='{"partitions":[{"topic":"foo","partition":1}]}')  # fmt: skip
    p.add_argument("--partition", type=int, help="with --topic: the partition")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.topic is not None and args.partition is None:
        parser.error("Missing required option(s) [partition]")
    if args.partition is not None and args.topic is None:
        parser.error("--partition goes with --topic")
    try:
        return _run(args)
    except CliError as exc:
        print(exc.message, file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - "Error: " + message, exit 1
        print(f"Error: {describe_error(exc)}", file=sys.stderr)
        return 1


def _partitions(args) -> list[tuple[str, int]] | None:
    if args.all_topic_partitions:
        return None
    if args.topic is not None:
        return [(args.topic, args.partition)]
    try:
        body = json.loads(Path(args.path_to_json_file).read_text())
        parts = [(str(p["topic"]), int(p["partition"])) for p in body["partitions"]]
    except OSError as exc:
        raise CliError(
            "INVALID_REQUEST", f"Cannot read {args.path_to_json_file}: {exc.strerror}"
        ) from None
    except (ValueError, KeyError, TypeError):
        raise CliError(
            "INVALID_REQUEST",
            f'{args.path_to_json_file} must look like {{"partitions":[{{"topic":"foo",'
            '"partition":1}]}.',
        ) from None
    duplicates = sorted({tp for tp in parts if parts.count(tp) > 1})
    if duplicates:
        raise CliError(
            "INVALID_REQUEST",
            "Replica election data contains duplicate partitions: "
            + ",".join(f"{t}-{p}" for t, p in duplicates),
        )
    return parts


def exception_name(code: ErrorCode) -> str:
    """Kafka's exception class for an error code (PREFERRED_LEADER_NOT_AVAILABLE ->
    org.apache.kafka.common.errors.PreferredLeaderNotAvailableException)."""
    camel = "".join(word.capitalize() for word in code.name.split("_"))
    return f"org.apache.kafka.common.errors.{camel}Exception"


def _run(args) -> int:
    conf = client_config(args.bootstrap_server, config_file=args.command_config)
    admin = ControllerAdmin(conf)
    partitions = _partitions(args)
    topics: dict[str, list[int]] = {}
    for topic, partition in partitions or ():
        topics.setdefault(topic, []).append(partition)
    body = {
        "election_type": ELECTION_TYPES[args.election_type],
        "topic_partitions": None
        if partitions is None
        else [{"topic": t, "partitions": ps} for t, ps in topics.items()],
        "timeout": TIMEOUT_MS,
    }
    resp = controller_request(admin, 43, 2, body)
    if resp.error_code != ErrorCode.none:
        raise CliError(resp.error_code.name, f"{exception_name(resp.error_code)}: election refused")
    succeeded, noop, failed = [], [], []
    for t in resp.replica_election_results:
        for r in t.partition_result:
            tp = (t.topic, r.partition_id)
            if r.error_code == ErrorCode.none:
                succeeded.append(tp)
            elif r.error_code == ErrorCode.election_not_needed:
                noop.append(tp)
            else:
                failed.append((tp, r.error_code, r.error_message))
    kind = args.election_type
    if succeeded:
        print(f"Successfully completed leader election ({kind}) for partitions "
              + ", ".join(f"{t}-{p}" for t, p in sorted(succeeded)))  # fmt: skip
    if noop:
        print("Valid replica already elected for partitions "
              + ", ".join(f"{t}-{p}" for t, p in sorted(noop)))  # fmt: skip
    if failed:
        for (t, p), code, message in sorted(failed):
            print(f"Error completing leader election ({kind}) for partition: {t}-{p}: "
                  f"{exception_name(code)}: {message}")  # fmt: skip
        print(f"{len(failed)} replica(s) could not be elected", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
