"""``quill-broker`` / ``python -m broker``: start one broker from a properties file."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys

from . import clock_fault, malloc_tuning
from .config import BrokerConfig, ConfigError

log = logging.getLogger("broker")


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="quill-broker",
        description="Run a Quill broker (Kafka wire protocol). Configuration uses Kafka's "
        "server.properties names; QUILL_<KEY> environment variables (dots as underscores, "
        "e.g. QUILL_LOG_DIRS) and --override key=value take precedence.",
    )
    parser.add_argument("config", nargs="?", help="path to server.properties")
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one property (repeatable)",
    )
    parser.add_argument("--log-level", default=os.environ.get("QUILL_LOG_LEVEL", "INFO"))
    return parser.parse_args(argv)


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)",
        stream=sys.stderr,
    )
    logging.getLogger("kazoo").setLevel(logging.WARNING)


def _event_loop_factory():
    """asyncio's own loop by default: it has loop.sendfile, so fetches are zero-copy.

    uvloop (QUILL_EVENT_LOOP=uvloop) has no sendfile; record data then passes through
    Python bytes. bench/ measures both.
    """
    if os.environ.get("QUILL_EVENT_LOOP", "asyncio") == "uvloop":
        try:
            import uvloop

            return uvloop.new_event_loop
        except ImportError:
            log.warning("uvloop is not installed; using asyncio's event loop")
    return asyncio.new_event_loop


def _raise_open_files_limit() -> None:
    """Every segment keeps its .log open (as in Kafka), so lift the soft limit on open
    files to the hard one and say what the broker got."""
    import resource  # noqa: PLC0415 - POSIX only, used once

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:
            log.warning("cannot raise the open files limit from %d to %d: %s", soft, hard, exc)
    log.info(
        "open files limit %s: about one per log segment is needed; raise it (ulimit -n) "
        "for more partitions",
        "unlimited" if soft == resource.RLIM_INFINITY else f"{soft:,}",
    )


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    _setup_logging(args.log_level)
    _raise_open_files_limit()
    malloc_tuning.tune()  # before the logs load: their reads are the first
    clock_fault.install()  # the fault harness's wall clock; nothing without its variable
    overrides = {}
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"quill-broker: --override expects KEY=VALUE, got {item!r}", file=sys.stderr)
            return 2
        overrides[key.strip()] = value.strip()
    try:
        config = BrokerConfig.load(args.config, overrides)
    except ConfigError as exc:
        print(f"quill-broker: {exc}", file=sys.stderr)
        return 2
    from ..log.manager import LogDirLockedError, MetaPropertiesError  # noqa: PLC0415
    from ..zk.client import ZkError  # noqa: PLC0415
    from .kafka_server import KafkaServer  # noqa: PLC0415

    async def run() -> None:
        await KafkaServer(config).run()
        # Stopped cleanly: logs flushed, checkpoints written, ZooKeeper closed. Exit now
        # rather than wait for the loop's teardown, which joins executor threads that a
        # ZooKeeper call made during shutdown may keep blocked.
        logging.shutdown()
        os._exit(0)

    try:
        with asyncio.Runner(loop_factory=_event_loop_factory()) as runner:
            runner.run(run())
    except (ZkError, LogDirLockedError, MetaPropertiesError) as exc:
        log.error("%s", exc)
        return 2
    except KeyboardInterrupt:
        pass
    # The logs are flushed and checkpointed by now: a library thread still blocked on a
    # closed connection must not keep a stopped broker alive.
    logging.shutdown()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
