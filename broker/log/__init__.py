"""The storage layer: partition logs on local files (Kafka's kafka.log).

Files only: no network, no asyncio; imports only broker.protocol. A ``Log`` is not
thread-safe: appends, reads and ``LogManager.tick`` come from one thread (the server's
event loop). The manager alone uses threads, for file work that runs outside the GIL:
thread pools recover logs at start-up (``num.recovery.threads.per.data.dir``) and
create many new logs at once, and its checkpoint job is run on a worker thread, the
checkpoint files under a lock; the open index files are capped under a lock (index.py).
Times are epoch milliseconds; anything that needs "now" takes ``now_ms`` (default: the wall clock).
Errors are ``KafkaError(ErrorCode.<name>, sentence)``.

On disk, exactly Kafka's layout: ``<log.dir>/<topic>-<partition>/%020d.log``,
``.index``, ``.timeindex``, ``%020d.snapshot`` (producer state, Kafka's format),
``leader-epoch-checkpoint``; per log dir ``.lock``, ``meta.properties``,
``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``replication-offset-checkpoint`` and ``.kafka_cleanshutdown``.

Public API
----------

``LogConfig`` (config.py), frozen dataclass, attribute = Kafka key with ``_`` for ``.``:
    LogConfig()                                   Kafka's defaults
    LogConfig.from_broker_props(props)            server.properties -> broker default
    LogConfig.from_props(overrides, defaults=None) topic overrides; INVALID_CONFIG
    .describe() -> list[ConfigDescription(name, value, source, is_default,
                   config_type, synonyms, read_only, is_sensitive)]
    .to_props() -> {key: str} (overrides)   .values() -> {key: str} (all)
    .get(key)  .compact  .delete  .log_append_time  .target_codec  .max_segment_ms

``Log`` (log.py), one partition directory:
    Log(dir, config, *, recovery_point=0, log_start_offset=0, high_watermark=None,
        had_clean_shutdown=False, producer_id_expiration_ms=86400000,
        deleter=None, now_ms=None)                opens and recovers
    .topic .partition .dir .config (assignable) .segments .active_segment
    .log_start_offset .log_end_offset .recovery_point .size_bytes
    .high_watermark (settable; clamped to [log_start_offset, log_end_offset])
    .append_as_leader(records: bytearray, headers=None, leader_epoch=0, now_ms=None)
        -> LogAppendInfo(first_offset, last_offset, max_timestamp,
           offset_of_max_timestamp, log_append_time, log_start_offset,
           record_count, duplicate)
        ``headers`` are records.validate_produce's (validated here when None).
        INVALID_TIMESTAMP, OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH,
        RECORD_LIST_TOO_LARGE, MESSAGE_TOO_LARGE (after recompression), ...
    .append_as_follower(records, now_ms=None) -> LogAppendInfo | None
    .read(fetch_offset, max_bytes, *, max_offset=None, min_one_message=True)
        -> FetchSlice(fd, position, size, offset, segment_base_offset) | None
        one segment's byte range for os.sendfile; None = no data; the first batch may
        start before fetch_offset; OFFSET_OUT_OF_RANGE outside [start, LEO].
        FetchSlice.read_bytes() copies it (tools, tests, replication).
    .read_bytes(fetch_offset, max_bytes, **kw) -> bytes
    .fetch_offset_by_timestamp(ts) -> TimestampAndOffset(offset, timestamp,
        leader_epoch) | None; ts -2 earliest, -1 latest (LEO), -3 max timestamp
    .end_offset_for_epoch(epoch) -> (epoch, end_offset) | None  .latest_epoch
    .leader_epoch_cache (LeaderEpochFileCache)  .producer_state (ProducerStateManager)
    .delete_records_before(offset, now_ms=None) -> new log start (-1 = HW)
    .delete_retention_segments(now_ms=None) -> segments deleted (never the active one)
    .maybe_increment_log_start_offset(offset) -> bool
    .truncate_to(offset) -> bool   .truncate_fully_and_start_at(offset, *, log_start_offset=None)
    .roll(expected_next_offset=None)   .flush(up_to=None)   .flush_rolled_segments()
    .close()   .delete()   .rename_dir(new_dir)

``LogManager`` (manager.py), all logs of a broker:
    LogManager(log_dirs, default_config=None, *, broker_id=None, cluster_id=None,
               topic_configs=None, <Kafka's interval settings>, now_ms=None)
        LogDirLockedError if another process holds a dir; MetaPropertiesError
    LogManager.from_broker_props(props, **kw)     log.dirs, intervals, defaults
    .ensure_meta_properties(broker_id, cluster_id)
    .get_log(topic, p) -> Log | None   .get_or_create_log(topic, p, config=None)
    .all_logs() -> iterator of ((topic, p), Log)   .config_for(topic)
    .update_config(topic, config)   .delete_log(topic, p) -> bool
    .tick(now_ms=None): every periodic job that is due, cheap otherwise:
        .flush_dirty_logs(now)  .cleanup_logs(now)  producer expiry, delayed deletes,
        .checkpoint_recovery_points()  .checkpoint_log_start_offsets()
        .checkpoint_high_watermarks()
    .checkpoint()   .log_dir_sizes() -> {dir: {(topic, p): bytes}}   .close()

Lower level: LogSegment, FetchSlice, DeletionQueue (segment.py); OffsetIndex,
TimeIndex (index.py); ProducerStateManager (producer_state.py);
LeaderEpochFileCache (leader_epoch.py); OffsetCheckpointFile (checkpoint.py).
"""

from broker.log.append import LogAppendInfo
from broker.log.config import ConfigDescription, ConfigSource, LogConfig
from broker.log.log import Log, parse_topic_partition
from broker.log.manager import LogDirLockedError, LogManager, MetaPropertiesError
from broker.log.segment import FetchSlice, TimestampAndOffset

__all__ = [
    "ConfigDescription",
    "ConfigSource",
    "FetchSlice",
    "Log",
    "LogAppendInfo",
    "LogConfig",
    "LogDirLockedError",
    "LogManager",
    "MetaPropertiesError",
    "TimestampAndOffset",
    "parse_topic_partition",
]
