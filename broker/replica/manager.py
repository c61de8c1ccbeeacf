"""ReplicaManager: the partitions this broker hosts, and appends and reads on them.

It applies the controller's partition states (become leader / follower / stop), and
serves the Produce and Fetch paths: validate, append, and read slices of the log for
the socket layer to send with sendfile.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from ..log.config import LogConfig
from ..log.manager import LogManager
from ..protocol import records as rec
from ..protocol.errors import ErrorCode, KafkaError
from .partition import Partition, PartitionState

log = logging.getLogger(__name__)
ZSTD = 4


@dataclass(slots=True)
class ProduceResult:
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    base_offset: int = -1
    last_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1


@dataclass(slots=True)
class FetchResult:
    error: ErrorCode = ErrorCode.none
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    region: object = None  # a FetchSlice from the log (fd, position, size) or None
    size: int = 0


class ReplicaManager:
    def __init__(
        self,
        broker_id: int,
        log_manager: LogManager,
        topic_config: Callable[[str], LogConfig],
    ) -> None:
        self.broker_id = broker_id
        self.logs = log_manager
        self.topic_config = topic_config
        self.partitions: dict[tuple[str, int], Partition] = {}

    # -- partition state from the controller ------------------------------------------
    def apply_state(self, topic: str, index: int, state: PartitionState) -> None:
        key = (topic, index)
        part = self.partitions.get(key)
        if self.broker_id not in state.replicas:
            if part is not None:
                self.stop_replica(topic, index, delete=False)
            return
        if part is None:
            part = Partition(topic, index, self.broker_id)
            self.partitions[key] = part
        if part.log is None:
            part.log = self.logs.get_or_create_log(topic, index, self.topic_config(topic))
        old = part.state
        part.state = state
        if part.is_leader and (old is None or old.leader_epoch != state.leader_epoch):
            log.info(
                "%s-%d: leader at epoch %d, log end offset %d",
                topic,
                index,
                state.leader_epoch,
                part.log.log_end_offset,
            )
            part.log.leader_epoch_cache.assign(state.leader_epoch, part.log.log_end_offset)
        part.maybe_advance_high_watermark()
        part.wake_waiters()

    def stop_replica(self, topic: str, index: int, *, delete: bool) -> None:
        part = self.partitions.pop((topic, index), None)
        if part is not None:
            part.state = None
            part.wake_waiters()
        if delete:
            self.logs.delete_log(topic, index)

    def update_topic_config(self, topic: str, config: LogConfig) -> None:
        self.logs.update_config(topic, config)

    def get_partition(self, topic: str, index: int) -> Partition:
        part = self.partitions.get((topic, index))
        if part is None or part.state is None:
            raise KafkaError(
                ErrorCode.unknown_topic_or_partition,
                f"this broker does not host {topic}-{index}",
            )
        return part

    # -- produce ---------------------------------------------------------------------
    def append(
        self,
        topic: str,
        index: int,
        records: bytes | None,
        *,
        acks: int = 1,
        zstd_allowed: bool = True,
    ) -> ProduceResult:
        try:
            part = self.get_partition(topic, index)
            log_ = part.require_leader()
            min_isr = log_.config.min_insync_replicas
            if acks == -1 and len(part.state.isr) < min_isr:
                raise KafkaError(
                    ErrorCode.not_enough_replicas,
                    f"{topic}-{index} has {len(part.state.isr)} in-sync replicas, "
                    f"min.insync.replicas is {min_isr}",
                )
            if not records:
                raise KafkaError(ErrorCode.invalid_record, "empty record set")
            headers = rec.validate_produce(records, max_message_bytes=log_.config.max_message_bytes)
            if not zstd_allowed and any(h.compression == ZSTD for h in headers):
                raise KafkaError(
                    ErrorCode.unsupported_compression_type,
                    "zstd batches need Produce v7 or later",
                )
            info = part.append_as_leader(bytearray(records), headers)
        except KafkaError as exc:
            if exc.code not in (ErrorCode.not_leader_or_follower,):
                log.info("produce to %s-%d refused: %s", topic, index, exc.message)
            return ProduceResult(exc.code, exc.message)
        return ProduceResult(
            base_offset=info.first_offset,
            last_offset=info.last_offset,
            log_append_time=info.log_append_time,
            log_start_offset=info.log_start_offset,
        )

    # -- fetch -------------------------------------------------------------------------
    def read(
        self,
        topic: str,
        index: int,
        offset: int,
        max_bytes: int,
        *,
        current_leader_epoch: int = -1,
        isolation_committed: bool = False,
        min_one_message: bool = True,
    ) -> FetchResult:
        try:
            part = self.get_partition(topic, index)
            log_ = part.require_leader()
            part.check_leader_epoch(current_leader_epoch)
            hw = log_.high_watermark
            if offset < log_.log_start_offset or offset > log_.log_end_offset:
                raise KafkaError(
                    ErrorCode.offset_out_of_range,
                    f"offset {offset} is outside [{log_.log_start_offset}, {log_.log_end_offset}]",
                )
            region = None
            if max_bytes > 0 and offset < hw:
                region = log_.read(
                    offset, max_bytes, max_offset=hw, min_one_message=min_one_message
                )
        except KafkaError as exc:
            part = self.partitions.get((topic, index))
            lso = part.log.log_start_offset if part and part.log else -1
            hw = part.high_watermark if part and part.log else -1
            return FetchResult(exc.code, high_watermark=hw, log_start_offset=lso)
        return FetchResult(
            high_watermark=hw,
            last_stable_offset=hw,
            log_start_offset=log_.log_start_offset,
            region=region,
            size=region.size if region is not None else 0,
        )

    async def wait_committed(self, topic: str, index: int, offset: int, timeout_s: float) -> bool:
        """Wait until ``offset`` is below the high watermark (acks=all); False on timeout
        or when this broker stops leading the partition."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while True:
            part = self.partitions.get((topic, index))
            if part is None or not part.is_leader or part.log is None:
                return False
            if part.log.high_watermark > offset:
                return True
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            await self.wait_for_data([(topic, index)], remaining)

    async def wait_for_data(self, keys: list[tuple[str, int]], timeout_s: float) -> None:
        """Park a fetch until any of its partitions gets new data, or the timeout."""
        if timeout_s <= 0:
            return
        fut = asyncio.get_running_loop().create_future()
        parts = [p for p in (self.partitions.get(k) for k in keys) if p is not None]
        for part in parts:
            part.add_waiter(fut)
        try:
            await asyncio.wait_for(fut, timeout_s)
        except TimeoutError:
            pass
        finally:
            for part in parts:
                part.remove_waiter(fut)
