"""LogManager: every partition log of a broker, across its log dirs (Kafka's LogManager).

Per log dir it holds a ``.lock`` (``flock``; a second broker on the same dir fails
with a clear error), checks ``meta.properties`` (broker.id, cluster.id, version=0),
reads and writes the offset checkpoints, and writes ``.kafka_cleanshutdown`` on close
so the next start skips recovery.

The server calls ``tick(now_ms)`` (or the individual periodic methods) from its loop;
each is cheap when nothing is due. Threads only do file work that runs outside the GIL:
pools load and recover the logs at start-up (``num.recovery.threads.per.data.dir``)
and open many new logs at once, and the server runs ``checkpoint_job`` on a worker
thread (the checkpoint files are written under one lock, so close writes last). With thousands of logs a
tick visits only what changed: the logs that rolled (their flush), the ones with a
finite flush.ms, and a dir's checkpoint file is rewritten only when one of its
values moved since the last write (``checkpoint_plan`` finds that, re-formatting only
the lines that moved; ``write_checkpoint_files`` does the blocking write).
"""

from __future__ import annotations

import concurrent.futures
import fcntl
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, ValuesView
from operator import attrgetter
from pathlib import Path

from broker.log.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CheckpointError,
    OffsetCheckpointFile,
    OffsetCheckpointRows,
    OffsetCheckpointText,
    fsync_dir,
    write_atomically,
)
from broker.log.cleaner import LogCleaner
from broker.log.config import LONG_MAX, LogConfig
from broker.log.dir_failure import LogDirFailureChannel, is_disk_full, storage_error
from broker.log.log import Log, is_delete_dir, parse_topic_partition
from broker.log.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS
from broker.log.segment import DeletionQueue
from broker.protocol.errors import KafkaError

__all__ = ["LogDirLockedError", "LogManager", "MetaPropertiesError", "read_meta_properties"]

log = logging.getLogger(__name__)
#: threads that create the logs of a LeaderAndIsr with many new partitions: the work
#: is file creation and fsync, which overlap well (bench/create_topics.py)
NEW_LOG_THREADS = 8

LOCK_FILE = ".lock"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
META_PROPERTIES = "meta.properties"
DELETE_DIR_SUFFIX = "-delete"
TopicPartition = tuple[str, int]


#: Each checkpoint file's value of a log. The fields behind Log's properties, read by
#: attrgetter: with 10,000 logs a property call each is most of the cost of finding that
#: nothing moved.
_recovery_point = attrgetter("recovery_point")
_log_start_offset = attrgetter("log_start_offset")
_high_watermark = attrgetter("_hw")

_CHECKPOINT_VALUES = {
    RECOVERY_POINT_CHECKPOINT: _recovery_point,
    LOG_START_OFFSET_CHECKPOINT: _log_start_offset,
    REPLICATION_OFFSET_CHECKPOINT: _high_watermark,
}


class LogDirLockedError(RuntimeError):
    """Another process holds the ``.lock`` of a log dir."""


class MetaPropertiesError(RuntimeError):
    """``meta.properties`` disagrees with this broker's broker.id or cluster.id."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def read_meta_properties(log_dir: Path | str) -> dict[str, str]:
    """The key=value pairs of ``meta.properties`` ({} if absent)."""
    path = Path(log_dir) / META_PROPERTIES
    if not path.exists():
        return {}
    props = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")) and "=" in line:
            key, _, value = line.partition("=")
            props[key.strip()] = value.strip()
    return props


class LogManager:
    """All logs of this broker. ``log_dirs``: Kafka's log.dirs."""

    def __init__(
        self,
        log_dirs: list[str] | list[Path],
        default_config: LogConfig | None = None,
        *,
        broker_id: int | None = None,
        cluster_id: str | None = None,
        topic_configs: Mapping[str, LogConfig] | None = None,
        retention_check_interval_ms: int = 300000,
        recovery_point_checkpoint_interval_ms: int = 60000,
        start_offset_checkpoint_interval_ms: int = 60000,
        high_watermark_checkpoint_interval_ms: int = 5000,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        producer_id_expiration_check_interval_ms: int = 600000,
        cleaner_enable: bool = True,
        cleaner_backoff_ms: int = 15000,
        cleaner_dedupe_buffer_size: int = 128 * 1024 * 1024,
        cleaner_io_max_bytes_per_second: float = float("inf"),
        recovery_threads_per_data_dir: int = 1,
        now_ms: int | None = None,
    ) -> None:
        if not log_dirs:
            raise ValueError("At least one log dir is needed (log.dirs)")
        self.log_dirs = [Path(d).absolute() for d in log_dirs]
        self.default_config = default_config if default_config is not None else LogConfig()
        self.topic_configs: dict[str, LogConfig] = dict(topic_configs or {})
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.deleter = DeletionQueue()
        self.cleaner = LogCleaner(
            self.log_dirs,
            enabled=cleaner_enable,
            backoff_ms=cleaner_backoff_ms,
            dedupe_buffer_size=cleaner_dedupe_buffer_size,
            io_max_bytes_per_second=cleaner_io_max_bytes_per_second,
        )
        self._logs: dict[TopicPartition, Log] = {}
        self.failure_channel = LogDirFailureChannel()
        self._rolled: set[Log] = set()  # logs that rolled since the last flush pass
        #: derived from the set of logs and their configs; None: recompute (_logs_changed)
        self._dir_logs: dict[Path, dict[TopicPartition, Log]] | None = None
        self._timed_flush: list[Log] | None = None  # logs with a finite flush.ms
        #: dir -> its logs in checkpoint order; (dir, checkpoint file name) -> its text
        self._checkpoint_rows: dict[Path, OffsetCheckpointRows[Log]] = {}
        self._checkpoint_texts: dict[tuple[Path, str], OffsetCheckpointText] = {}
        self._doomed_dirs: list[tuple[int, Path, Log | None]] = []
        self._locks: list[int] = []
        self.recovery_threads = max(1, recovery_threads_per_data_dir)
        self._dirs_seen: dict[TopicPartition, Path] = {}
        now = _now_ms() if now_ms is None else now_ms
        self._intervals = {
            "cleanup": retention_check_interval_ms,
            "recovery": recovery_point_checkpoint_interval_ms,
            "start": start_offset_checkpoint_interval_ms,
            "hw": high_watermark_checkpoint_interval_ms,
            "producers": producer_id_expiration_check_interval_ms,
        }
        self._last_run = dict.fromkeys(self._intervals, now)
        try:
            for d in self.log_dirs:
                d.mkdir(parents=True, exist_ok=True)
                self._lock(d)
            if broker_id is not None:
                self.ensure_meta_properties(broker_id, cluster_id)
            self._load_logs(now)
        except BaseException:
            self._release_locks()
            raise
        self._checkpoint_lock = threading.Lock()
        self._checkpoints_final = False  # close wrote the last ones
        self.closed = False

    @classmethod
    def from_broker_props(cls, props: Mapping[str, str], **kwargs) -> LogManager:
        """Build from server.properties: log.dirs (or log.dir), the default LogConfig,
        and the checkpoint / retention intervals."""
        dirs = props.get("log.dirs") or props.get("log.dir") or "/tmp/kafka-logs"
        intervals = {
            "retention_check_interval_ms": "log.retention.check.interval.ms",
            "recovery_point_checkpoint_interval_ms": "log.flush.offset.checkpoint.interval.ms",
            "start_offset_checkpoint_interval_ms": "log.flush.start.offset.checkpoint.interval.ms",
            "high_watermark_checkpoint_interval_ms": "replica.high.watermark.checkpoint.interval.ms",
            "producer_id_expiration_ms": "producer.id.expiration.ms",
            "producer_id_expiration_check_interval_ms": "producer.id.expiration.check.interval.ms",
            "cleaner_backoff_ms": "log.cleaner.backoff.ms",
            "cleaner_dedupe_buffer_size": "log.cleaner.dedupe.buffer.size",
            "recovery_threads_per_data_dir": "num.recovery.threads.per.data.dir",
        }
        for arg, key in intervals.items():
            if key in props and arg not in kwargs:
                kwargs[arg] = int(props[key])
        rate = props.get("log.cleaner.io.max.bytes.per.second")
        if rate is not None and "cleaner_io_max_bytes_per_second" not in kwargs:
            kwargs["cleaner_io_max_bytes_per_second"] = float(rate)
        if "log.cleaner.enable" in props and "cleaner_enable" not in kwargs:
            kwargs["cleaner_enable"] = str(props["log.cleaner.enable"]).strip().lower() == "true"
        if "broker.id" in props and "broker_id" not in kwargs and int(props["broker.id"]) >= 0:
            kwargs["broker_id"] = int(props["broker.id"])
        return cls(
            [d.strip() for d in dirs.split(",") if d.strip()],
            LogConfig.from_broker_props(props),
            **kwargs,
        )

    # --- log dirs: lock, meta.properties -------------------------------------------------

    def _lock(self, log_dir: Path) -> None:
        fd = os.open(log_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise LogDirLockedError(
                f"Failed to acquire lock on file .lock in {log_dir}. A Kafka instance in "
                f"another process or thread is using this directory."
            ) from None
        self._locks.append(fd)

    def _release_locks(self) -> None:
        for fd in self._locks:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
        self._locks = []

    def ensure_meta_properties(self, broker_id: int, cluster_id: str | None = None) -> None:
        """Check every dir's meta.properties against broker.id (and cluster.id when
        known), then write it where missing or incomplete."""
        for d in self.log_dirs:
            props = read_meta_properties(d)
            stored = props.get("broker.id")
            if stored is not None and int(stored) != broker_id:
                raise MetaPropertiesError(
                    f"Configured broker.id {broker_id} doesn't match stored broker.id {stored} "
                    f"in meta.properties in {d}. If you moved your data, make sure your "
                    f"configured broker.id matches. If you intend to create a new broker, you "
                    f"should remove all data in your data directories (log.dirs)."
                )
            stored_cluster = props.get("cluster.id")
            if cluster_id is not None and stored_cluster not in (None, cluster_id):
                raise MetaPropertiesError(
                    f"The Cluster ID {cluster_id} doesn't match stored clusterId {stored_cluster} "
                    f"in meta.properties in {d}. The broker is trying to join the wrong "
                    f"cluster. Configured zookeeper.connect may be wrong."
                )
            cluster = cluster_id or stored_cluster
            if stored is None or (cluster is not None and stored_cluster is None):
                lines = [
                    "#",
                    f"#{time.strftime('%a %b %d %H:%M:%S %Z %Y')}",
                    "version=0",
                    f"broker.id={broker_id}",
                ]
                if cluster is not None:
                    lines.append(f"cluster.id={cluster}")
                write_atomically(d / META_PROPERTIES, ("\n".join(lines) + "\n").encode())

    # --- loading -------------------------------------------------------------------------

    def _read_checkpoint(self, log_dir: Path, name: str) -> dict[TopicPartition, int]:
        try:
            return OffsetCheckpointFile(log_dir / name).read()
        except (CheckpointError, OSError) as exc:
            log.warning("Error reading %s in %s (%s); using defaults", name, log_dir, exc)
            return {}

    def _load_logs(self, now: int) -> None:
        """Load (and after an unclean stop, recover) every log, each dir's logs on
        ``num.recovery.threads.per.data.dir`` threads (Kafka's): recovery is mostly
        fsync and file opening, which run outside the GIL. Each thread loads a share
        of the dir's logs in one task (a future per log cost a thread handoff a log)."""
        threads, started = self.recovery_threads, time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(
            threads * len(self.log_dirs), thread_name_prefix="log-recovery"
        ) as pool:
            loading = []
            for d in self.log_dirs:
                jobs = self._load_jobs(d, now)
                shares = [jobs[i::threads] for i in range(threads)]
                loading.append((d, jobs, [pool.submit(self._load_share, s) for s in shares if s]))
            for d, jobs, futures in loading:
                loaded = dict(pair for future in futures for pair in future.result())
                for tp, *_ in jobs:  # in the dir's order, whichever thread loaded it
                    self._logs[tp] = self._attach(loaded[tp])
                marker = d / CLEAN_SHUTDOWN_FILE
                if marker.exists():
                    marker.unlink()
        log.info("Loaded %d logs in %.2fs", len(self._logs), time.monotonic() - started)

    @staticmethod
    def _load_share(jobs: list) -> list[tuple[TopicPartition, Log]]:
        return [(tp, Log(path, config, **kwargs)) for tp, path, config, kwargs in jobs]

    def _load_jobs(self, d: Path, now: int) -> list:
        """(partition, dir, config, Log arguments) of every partition dir in ``d``."""
        clean = (d / CLEAN_SHUTDOWN_FILE).exists()
        recovery = self._read_checkpoint(d, RECOVERY_POINT_CHECKPOINT)
        starts = self._read_checkpoint(d, LOG_START_OFFSET_CHECKPOINT)
        hws = self._read_checkpoint(d, REPLICATION_OFFSET_CHECKPOINT)
        with os.scandir(d) as entries:  # entry types: no stat per partition dir
            names = sorted(e.name for e in entries if e.is_dir())
        jobs = []
        for name in names:
            sub = d / name
            if is_delete_dir(name):
                shutil.rmtree(sub, ignore_errors=True)
                continue
            if name.endswith(("-future", "-stray")):
                continue
            try:
                tp = parse_topic_partition(name)
            except ValueError:
                log.warning("Ignoring directory %s: not in the form topic-partition", sub)
                continue
            if tp in self._dirs_seen:
                raise RuntimeError(
                    f"Duplicate log directories for {tp[0]}-{tp[1]} are found in both "
                    f"{self._dirs_seen[tp]} and {sub}."
                )
            self._dirs_seen[tp] = sub
            kwargs = {
                "recovery_point": recovery.get(tp, 0),
                "log_start_offset": starts.get(tp, 0),
                "high_watermark": hws.get(tp),
                "had_clean_shutdown": clean,
                "producer_id_expiration_ms": self.producer_id_expiration_ms,
                "deleter": self.deleter,
                "now_ms": now,
            }
            jobs.append((tp, sub, self.config_for(tp[0]), kwargs))
        return jobs

    # --- logs ----------------------------------------------------------------------------

    def _attach(self, lg: Log) -> Log:
        """A log joins the manager: its dir failures and rolls reach us."""
        for d in self.log_dirs:
            if d == lg.parent_dir:
                lg.parent_dir = d  # this very object: grouping by dir is an identity lookup
                break
        lg.failure_channel = self.failure_channel
        lg.roll_listener = self._on_roll
        self._rolled.add(lg)  # a roll before now (recovery) is flushed on the next tick
        self._logs_changed()
        return lg

    def _on_roll(self, lg: Log) -> None:
        self._rolled.add(lg)

    def _logs_changed(self) -> None:
        """The set of logs, or a config, changed: the derived views are recomputed."""
        self._counts = None
        self._dir_logs = None
        self._timed_flush = None

    def config_for(self, topic: str) -> LogConfig:
        return self.topic_configs.get(topic, self.default_config)

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> Iterator[tuple[TopicPartition, Log]]:
        return iter(list(self._logs.items()))

    def live_logs(self) -> ValuesView[Log]:
        """The logs as a live view of the manager's own dict, for a reader that goes
        through all of them without yielding to the event loop (a metrics scrape),
        where the copy all_logs makes would cost more than the reading."""
        return self._logs.values()

    def __len__(self) -> int:
        return len(self._logs)

    @property
    def online_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if not self.failure_channel.is_offline(d)]

    def _online_logs(self) -> list[Log]:
        return [lg for lg in self._logs.values() if not lg.offline]

    def _dir_counts(self) -> dict[Path, int]:
        """Partitions per log dir, kept up to date (recounting all logs for every new
        partition made creating thousands of partitions quadratic)."""
        if getattr(self, "_counts", None) is None:
            self._counts = {d: 0 for d in self.log_dirs}
            for lg in self._logs.values():
                if lg.parent_dir in self._counts:
                    self._counts[lg.parent_dir] += 1
        return self._counts

    def get_or_create_log(
        self, topic: str, partition: int, config: LogConfig | None = None, now_ms: int | None = None
    ) -> Log:
        """The log, created (in the log dir holding the fewest partitions) if absent."""
        existing = self._logs.get((topic, partition))
        if existing is not None:
            return existing
        if config is not None:
            self.topic_configs[topic] = config
        counts = self._dir_counts()
        online = self.online_dirs
        if not online:
            raise storage_error(f"No online log dir to create {topic}-{partition} in")
        target = min(online, key=lambda d: counts[d])
        directory = target / f"{topic}-{partition}"
        lg = Log(
            directory,
            self.config_for(topic),
            producer_id_expiration_ms=self.producer_id_expiration_ms,
            deleter=self.deleter,
            now_ms=now_ms,
        )
        fsync_dir(target)
        self._logs[(topic, partition)] = self._attach(lg)
        counts[target] += 1
        self._counts = counts  # still right with the one added: no recount of every log
        return lg

    # -- many new logs at once (the LeaderAndIsr of a new topic) -------------------------
    def place_new_logs(
        self, keys: list[TopicPartition], configs: Mapping[str, LogConfig]
    ) -> list[tuple[TopicPartition, Path]]:
        """The log dir of each new partition (the dir holding the fewest partitions, as
        get_or_create_log chooses); partitions that have a log already are left out."""
        self.topic_configs.update(configs)
        counts = dict(self._dir_counts())
        online = self.online_dirs
        if not online:
            raise storage_error(f"No online log dir to create {len(keys)} new partitions in")
        placed = []
        for key in keys:
            if key not in self._logs:
                target = min(online, key=lambda d: counts[d])
                counts[target] += 1
                placed.append((key, target))
        return placed

    def open_new_logs(
        self, placed: list[tuple[TopicPartition, Path]], epochs: Mapping[TopicPartition, int]
    ) -> list[Log]:
        """Create the logs ``placed`` on NEW_LOG_THREADS threads (blocking: file creation
        and fsync, which run outside the GIL) and record each one's first leader epoch
        that ``epochs`` names. Touches no state of the manager, so it may run on a
        thread while the event loop serves; ``add_new_logs`` registers the result. A
        log that fails is left out (get_or_create_log tries it again, alone)."""

        def create(key: TopicPartition, target: Path) -> Log:
            lg = Log(
                target / f"{key[0]}-{key[1]}",
                self.config_for(key[0]),
                producer_id_expiration_ms=self.producer_id_expiration_ms,
                deleter=self.deleter,
            )
            lg.failure_channel = self.failure_channel
            if key in epochs:
                lg.leader_epoch_cache.assign(epochs[key], lg.log_end_offset)
            return lg

        opened = []
        with concurrent.futures.ThreadPoolExecutor(NEW_LOG_THREADS) as pool:
            futures = [(key, pool.submit(create, key, target)) for key, target in placed]
            for key, future in futures:
                try:
                    opened.append(future.result())
                except (KafkaError, OSError) as exc:
                    log.warning("creating the log of %s-%d failed: %s", *key, exc)
        for target in {target for _key, target in placed}:
            fsync_dir(target)
        return opened

    def add_new_logs(self, logs: list[Log]) -> None:
        """Register logs made by open_new_logs (on the thread that reads the logs)."""
        for lg in logs:
            key = (lg.topic, lg.partition)
            if key in self._logs:  # made meanwhile by get_or_create_log: keep that one
                lg.close()
            else:
                self._logs[key] = self._attach(lg)
        self._logs_changed()

    def update_config(self, topic: str, config: LogConfig) -> None:
        """New topic config (from ZooKeeper): applies to existing and future logs."""
        self.topic_configs[topic] = config
        for (t, _), lg in self._logs.items():
            if t == topic:
                lg.config = config
        self._timed_flush = None

    def delete_log(self, topic: str, partition: int, now_ms: int | None = None) -> bool:
        """Rename ``<topic>-<n>`` to ``<topic>-<n>.<uuid>-delete``; files go after
        file.delete.delay.ms (descriptors stay open until then for in-flight reads)."""
        lg = self._logs.pop((topic, partition), None)
        self._logs_changed()
        if lg is None:
            return False
        self._rolled.discard(lg)
        self.cleaner.update_checkpoint(lg.parent_dir, (topic, partition), None)
        doomed = lg.dir.with_name(f"{lg.dir.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        lg.rename_dir(doomed)
        fsync_dir(doomed.parent)
        due = (_now_ms() if now_ms is None else now_ms) + lg.config.file_delete_delay_ms
        self._doomed_dirs.append((due, doomed, lg))
        return True

    def _delete_doomed_dirs(self, now: int, force: bool = False) -> None:
        keep = []
        for due, path, lg in self._doomed_dirs:
            if force or due <= now:
                if lg is not None:
                    lg.delete()
                shutil.rmtree(path, ignore_errors=True)
            else:
                keep.append((due, path, lg))
        self._doomed_dirs = keep

    # --- periodic work -------------------------------------------------------------------

    def _due(self, task: str, now: int) -> bool:
        if now - self._last_run[task] >= self._intervals[task]:
            self._last_run[task] = now
            return True
        return False

    def tick(self, now_ms: int | None = None, checkpoints: list[str] | None = None) -> None:
        """Everything periodic that is due: flushes, retention, deletions, checkpoints.
        With ``checkpoints``, the names of the checkpoint files due are put there instead
        of written here: the server writes them in a worker thread (checkpoint_job)."""
        now = _now_ms() if now_ms is None else now_ms
        self.flush_dirty_logs(now)
        if self._due("cleanup", now):
            self.cleanup_logs(now)
        if self._due("producers", now):
            for lg in self._online_logs():
                lg.producer_state.remove_expired_producers(now)
        if self.cleaner.due(now):
            self.cleaner.maybe_clean(
                {tp: lg for tp, lg in self._logs.items() if not lg.offline}, now
            )
        self.deleter.run(now)
        if self._doomed_dirs:
            self._delete_doomed_dirs(now)
        for key, name in (
            ("recovery", RECOVERY_POINT_CHECKPOINT),
            ("start", LOG_START_OFFSET_CHECKPOINT),
            ("hw", REPLICATION_OFFSET_CHECKPOINT),
        ):
            if self._due(key, now):
                if checkpoints is None:
                    self._write_checkpoints(name, _CHECKPOINT_VALUES[name])
                else:
                    checkpoints.append(name)

    def flush_dirty_logs(self, now_ms: int | None = None) -> int:
        """Flush logs whose flush.ms elapsed, and segments rolled since the last call:
        only the logs that rolled and the ones with a finite flush.ms are visited."""
        now = _now_ms() if now_ms is None else now_ms
        flushed = 0
        rolled, self._rolled = self._rolled, set()
        for lg in rolled:
            if lg.offline or lg.closed:
                continue
            try:
                lg.flush_rolled_segments(now)
            except KafkaError as exc:  # that log's dir is offline now; the others go on
                log.error("%s", exc.message)
        if self._timed_flush is None:
            self._timed_flush = [lg for lg in self._logs.values() if lg.config.flush_ms < LONG_MAX]
        for lg in self._timed_flush:
            if lg.offline or now - lg.last_flush_ms < lg.config.flush_ms:
                continue
            try:
                lg.flush(now_ms=now)
                flushed += 1
            except KafkaError as exc:
                log.error("%s", exc.message)
        return flushed

    def cleanup_logs(self, now_ms: int | None = None) -> int:
        """Retention (retention.ms / retention.bytes / log start offset) on every log;
        returns the number of segments deleted."""
        now = _now_ms() if now_ms is None else now_ms
        deleted = sum(lg.delete_retention_segments(now) for lg in self._online_logs())
        self.deleter.run(now)
        return deleted

    def _by_dir(self) -> dict[Path, dict[TopicPartition, Log]]:
        """The logs of each online dir (kept between calls while no log comes or goes;
        the caller must not change the dicts)."""
        if self._dir_logs is None:
            self._dir_logs = {d: {} for d in self.log_dirs}
            for tp, lg in self._logs.items():
                if lg.parent_dir in self._dir_logs:
                    self._dir_logs[lg.parent_dir][tp] = lg
        return {d: logs for d, logs in self._dir_logs.items() if d in self.online_dirs}

    def checkpoint_plan(
        self, name: str, value, by_dir: dict[Path, dict[TopicPartition, Log]] | None = None
    ) -> list[tuple[Path, OffsetCheckpointText, list[int], list[str]]]:
        """What checkpoint file ``name`` needs written: (dir, its text, the values, the
        lines) for each online dir where one of ``value(log)`` moved since the file was
        last written (every dir the first time, and when its set of logs changed).
        ``by_dir``: the logs of each dir, as _by_dir gave them. Costs a pass over the
        logs in C and the formatting of the lines that changed."""
        plan = []
        for d, logs in (self._by_dir() if by_dir is None else by_dir).items():
            rows = self._checkpoint_rows.get(d)
            if rows is None or rows.source is not logs:
                rows = self._checkpoint_rows[d] = OffsetCheckpointRows(logs)
            text = self._checkpoint_texts.get((d, name))
            if text is None or text.rows is not rows:
                text = self._checkpoint_texts[(d, name)] = OffsetCheckpointText(rows)
            values = list(map(value, rows.items))
            lines = text.lines_for(values)
            if lines is not None:
                plan.append((d, text, values, lines))
        return plan

    def write_checkpoint_files(
        self,
        name: str,
        plan: list[tuple[Path, OffsetCheckpointText, list[int], list[str]]],
        failed: list[tuple[Path, str]] | None = None,
    ) -> None:
        """Write checkpoint_plan's files (blocking: write, fsync, rename; touches no log).
        A full disk keeps the old file (the write is atomic) and is retried next time;
        any other error takes the dir offline, as Kafka's LogDirFailureChannel does (or,
        with ``failed``, is put there for the loop to do it: see checkpoint_job)."""
        for d, text, values, lines in plan:
            try:
                write_atomically(d / name, text.render(lines))
            except OSError as exc:
                if is_disk_full(exc):
                    log.warning("cannot write %s in %s: %s; will retry", name, d, exc.strerror)
                elif failed is None:
                    self.failure_channel.fail(d, f"writing {name} failed: {exc}")
                else:
                    failed.append((d, f"writing {name} failed: {exc}"))
            else:
                text.written(values, lines)

    def _write_checkpoints(self, name: str, value, by_dir=None, failed=None) -> None:
        """One checkpoint file per online dir whose values changed. Planned and written
        under one lock, so of two writers (the chores' thread, close) the later one
        computed its values later too; nothing is written after close's own checkpoint."""
        with self._checkpoint_lock:
            if not self._checkpoints_final:
                plan = self.checkpoint_plan(name, value, by_dir)
                self.write_checkpoint_files(name, plan, failed)

    def checkpoint_job(self, names: list[str]) -> Callable[[], list[tuple[Path, str]]]:
        """The checkpoint files ``names`` (from tick) as a blocking job for a worker
        thread, so that a broker with 10,000 partitions does not stall its event loop
        computing and writing them (Kafka writes them from its scheduler thread). The
        logs of each dir are taken now, on the loop; the job reads their offsets, writes,
        and returns the (dir, reason) failures: hand them to fail_dirs on the loop."""
        by_dir = self._by_dir()

        def job() -> list[tuple[Path, str]]:
            failed: list[tuple[Path, str]] = []
            for name in names:
                self._write_checkpoints(name, _CHECKPOINT_VALUES[name], by_dir, failed)
            return failed

        return job

    def fail_dirs(self, failed: list[tuple[Path, str]]) -> None:
        """Take the dirs a checkpoint_job could not write offline (on the loop)."""
        for d, reason in failed:
            self.failure_channel.fail(d, reason)

    def checkpoint_recovery_points(self) -> None:
        self._write_checkpoints(RECOVERY_POINT_CHECKPOINT, _recovery_point)

    def checkpoint_log_start_offsets(self) -> None:
        self._write_checkpoints(LOG_START_OFFSET_CHECKPOINT, _log_start_offset)

    def checkpoint_high_watermarks(self) -> None:
        self._write_checkpoints(REPLICATION_OFFSET_CHECKPOINT, _high_watermark)

    def checkpoint(self) -> None:
        """Write recovery points, log start offsets and high watermarks now."""
        self.checkpoint_recovery_points()
        self.checkpoint_log_start_offsets()
        self.checkpoint_high_watermarks()

    def log_dir_sizes(self) -> dict[str, dict[TopicPartition, int]]:
        """DescribeLogDirs: log dir -> {(topic, partition): size in bytes}."""
        return {
            str(d): {tp: lg.size_bytes for tp, lg in logs.items()}
            for d, logs in self._by_dir().items()
        }

    def close(self) -> None:
        """Flush and close every log, checkpoint, mark each dir cleanly shut down, and
        release the locks."""
        if self.closed:
            return
        for lg in self._logs.values():
            try:
                if not lg.offline:
                    lg.flush()
                lg.close()
            except (KafkaError, OSError) as exc:  # offline now: no clean-shutdown mark
                log.error("closing %s: %s", lg.dir, exc)
        self.checkpoint()
        with self._checkpoint_lock:  # a chores thread still running writes nothing now
            self._checkpoints_final = True
        self.deleter.run_all()
        self._delete_doomed_dirs(0, force=True)
        for d in self.online_dirs:  # an offline or full dir recovers at the next start
            try:
                write_atomically(d / CLEAN_SHUTDOWN_FILE, b"")
            except OSError as exc:
                log.warning("cannot mark %s cleanly shut down: %s", d, exc)
        self._release_locks()
        self.closed = True
