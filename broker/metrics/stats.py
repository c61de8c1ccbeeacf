"""Hot-path counters: plain ints and bounded deques, summed up at scrape time.

``prometheus_client``'s ``Counter.inc`` takes a lock and walks a labels dict on each
call; the broker counts per record batch and per request, so it bumps attributes of
small ``__slots__`` objects instead (one event loop, no lock needed) and the collector
turns them into metric families when scraped. ``bench/metrics.py`` measures the
difference. With metrics off the broker holds the ``NULL_*`` twins, whose methods do
nothing.
"""

from __future__ import annotations

import struct
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar

# Kafka's histogram attributes as jmx_exporter's rules label them: 50thPercentile ->
# quantile="0.50", ..., 999thPercentile -> quantile="0.999"
QUANTILES = (("0.50", 0.5), ("0.75", 0.75), ("0.95", 0.95), ("0.98", 0.98), ("0.99", 0.99))
QUANTILES += (("0.999", 0.999),)
RESERVOIR_SIZE = 1028  # the sample count of Yammer's ExponentiallyDecayingReservoir


class Histogram:
    """Kafka's Yammer histogram, simplified: the last ``RESERVOIR_SIZE`` values for
    quantiles (sorted only when a scrape finds new ones), and the count of all."""

    __slots__ = ("values", "count", "total", "_seen", "_quantiles")

    def __init__(self) -> None:
        self.values: deque[float] = deque(maxlen=RESERVOIR_SIZE)
        self.count = 0
        self.total = 0.0
        self._seen = -1
        self._quantiles: list[tuple[str, float]] = []

    def update(self, value: float) -> None:
        self.values.append(value)
        self.count += 1
        self.total += value

    def quantiles(self) -> list[tuple[str, float]]:
        """[(label, value)]: Yammer's Snapshot.getValue over the reservoir."""
        if self._seen != self.count:
            self._seen = self.count
            ordered = sorted(self.values)
            self._quantiles = [(label, _quantile(ordered, q)) for label, q in QUANTILES]
        return self._quantiles


def _quantile(ordered: list[float], q: float) -> float:
    n = len(ordered)
    if n == 0:
        return 0.0
    pos = q * (n + 1)
    if pos < 1:
        return ordered[0]
    if pos >= n:
        return ordered[-1]
    lower = ordered[int(pos) - 1]
    return lower + (pos - int(pos)) * (ordered[int(pos)] - lower)


class TopicStats:
    """One topic's BrokerTopicMetrics counters."""

    __slots__ = (
        "messages_in",
        "bytes_in",
        "bytes_out",
        "total_produce",
        "failed_produce",
        "total_fetch",
        "failed_fetch",
    )

    def __init__(self) -> None:
        self.messages_in = self.bytes_in = self.bytes_out = 0
        self.total_produce = self.failed_produce = 0
        self.total_fetch = self.failed_fetch = 0


# Kafka's ReplicaManager does not mark failedProduceRequestRate/failedFetchRequestRate
# for these: they are the client's routing or position problem, not a failed request
# (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, RECORD_LIST_TOO_LARGE,
# MESSAGE_TOO_LARGE, CORRUPT_MESSAGE, KAFKA_STORAGE_ERROR, OFFSET_OUT_OF_RANGE,
# FENCED/UNKNOWN_LEADER_EPOCH)
NOT_COUNTED_AS_FAILED = frozenset({3, 6, 18, 10, 2, 56, 1, 74, 75})


class BrokerTopicStats:
    """Per-topic counters; the all-topics figures are their sums at scrape time."""

    def __init__(self) -> None:
        self.topics: dict[str, TopicStats] = {}
        # Kafka's all-topics NoKeyCompactedTopicRecordsPerSec: keyless records refused by
        # a compacted topic (each is one of the refused appends' record_errors)
        self.no_key_compacted = 0

    def _get(self, topic: str) -> TopicStats:
        stats = self.topics.get(topic)
        if stats is None:
            stats = self.topics[topic] = TopicStats()
        return stats

    def produced(self, topic: str, result, size: int) -> None:
        """One partition of a produce request: its ProduceResult, ``size`` bytes sent."""
        stats = self._get(topic)
        stats.total_produce += 1
        if result.error:
            if result.error not in NOT_COUNTED_AS_FAILED:
                stats.failed_produce += 1
            if result.record_errors:
                self.no_key_compacted += len(result.record_errors)
            return
        stats.messages_in += result.last_offset - result.base_offset + 1
        stats.bytes_in += size

    def fetched(self, topics: list) -> None:
        """A consumer's fetch response: [(topic, [PartitionData])]."""
        get = self._get
        for topic, parts in topics:
            stats = get(topic)
            for p in parts:
                stats.total_fetch += 1
                if p.error_code and p.error_code not in NOT_COUNTED_AS_FAILED:
                    stats.failed_fetch += 1
                stats.bytes_out += p.records_size

    def retain(self, topics) -> None:
        """Forget the topics not in ``topics`` (deleted ones: Kafka removes their
        metrics too)."""
        for gone in [t for t in self.topics if t not in topics]:
            del self.topics[gone]


class _NullTopicStats(BrokerTopicStats):
    def produced(self, topic: str, result, size: int) -> None:
        return None

    def fetched(self, topics: list) -> None:
        return None


NULL_TOPIC_STATS = _NullTopicStats()

# remote time of the request being handled: time spent parked in a purgatory
_remote_ns: ContextVar[int] = ContextVar("quill_remote_ns", default=0)

# the timers Kafka's RequestMetrics keeps per request name
TIMERS = ("totaltimems", "requestqueuetimems", "localtimems", "remotetimems", "responsesendtimems")


class RequestStats:
    """Kafka's RequestMetrics: a count per (request, version) and the time histograms
    per request name (Fetch also as FetchConsumer or FetchFollower, as in Kafka)."""

    def __init__(self, names: dict[int, str]) -> None:
        self.names = names
        self.counts: dict[tuple[int, int], int] = {}
        # as Kafka's RequestChannel.Metrics: every served API's timers from start-up (a
        # fresh broker's dashboards show zeros); the per-version counts come with traffic,
        # as Kafka's RequestsPerSec meters do
        self.timers: dict[str, tuple[Histogram, ...]] = {}
        for name in (*names.values(), "FetchConsumer", "FetchFollower"):
            self._timers(name)

    def _timers(self, name: str) -> tuple[Histogram, ...]:
        timers = self.timers.get(name)
        if timers is None:
            timers = self.timers[name] = tuple(Histogram() for _ in TIMERS)
        return timers

    def observe(
        self,
        frame: bytes,
        received: int,
        started: int,
        handled: int,
        sent: int,
        parked_ns: int = 0,
        waited_ns: int = 0,
    ) -> None:
        """One request, its perf_counter_ns times: arrived, handler started, handler
        done, response written; ``parked_ns`` parked inside the handler (a long-poll
        fetch, ``PurgatoryStats.parked``), ``waited_ns`` on the future the handler
        answered with (an acks=all produce): both are Kafka's remote time."""
        api_key, version = _KEY_VERSION.unpack_from(frame)
        key = (api_key, version)
        self.counts[key] = self.counts.get(key, 0) + 1
        remote = parked_ns + waited_ns
        local, send = handled - started - parked_ns, sent - handled - waited_ns
        ms = 1e-6
        values = (
            (sent - received) * ms,
            (started - received) * ms,
            local * ms,
            remote * ms,
            max(send, 0) * ms,
        )
        name = self.names.get(api_key, str(api_key))
        for hist, value in zip(self._timers(name), values, strict=True):
            hist.update(value)
        if api_key == 1:
            fetch_name = "FetchFollower" if fetch_replica_id(frame) >= 0 else "FetchConsumer"
            for hist, value in zip(self._timers(fetch_name), values, strict=True):
                hist.update(value)


_KEY_VERSION = struct.Struct(">hh")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def fetch_replica_id(frame: bytes) -> int:
    """The replica_id of a Fetch request (v4-v12): after the header's client_id (and,
    from v12, its tagged fields); -1 when the frame is too short to tell."""
    try:
        (client_len,) = _INT16.unpack_from(frame, 8)
        pos = 10 + max(client_len, 0)
        if _KEY_VERSION.unpack_from(frame)[1] >= 12:
            if frame[pos] != 0:  # tagged fields in the header: rare; count it a consumer
                return -1
            pos += 1
        return _INT32.unpack_from(frame, pos)[0]
    except (struct.error, IndexError):
        return -1


class PurgatoryStats:
    """Kafka's DelayedOperationPurgatory.PurgatorySize per delayedOperation, and the
    time each parked request spends there (its remote time)."""

    def __init__(self) -> None:
        self.size: dict[str, int] = {"Produce": 0, "Fetch": 0}

    @staticmethod
    def take_parked_ns() -> int:
        """The time the request being handled spent in ``parked``; reset for the next
        one. Called by the connection in the task that ran the handler."""
        parked = _remote_ns.get()
        if parked:
            _remote_ns.set(0)
        return parked

    @contextmanager
    def parked(self, operation: str) -> Iterator[None]:
        self.size[operation] = self.size.get(operation, 0) + 1
        start = time.perf_counter_ns()
        try:
            yield
        finally:
            self.size[operation] -= 1
            _remote_ns.set(_remote_ns.get() + time.perf_counter_ns() - start)

    def track(self, operation: str, fut) -> None:
        """An operation parked as a future (an acks=all produce): counted in the
        purgatory until it completes."""
        self.size[operation] = self.size.get(operation, 0) + 1
        fut.add_done_callback(lambda _f: self._left(operation))

    def _left(self, operation: str) -> None:
        self.size[operation] -= 1


_NOTHING = nullcontext()  # reusable: it holds no state


class _NullPurgatoryStats(PurgatoryStats):
    def parked(self, operation: str) -> AbstractContextManager[None]:
        return _NOTHING  # a generator context manager cost five calls per parked fetch

    def track(self, operation: str, fut) -> None:
        return None


NULL_PURGATORY_STATS = _NullPurgatoryStats()


class Timer:
    """A histogram of durations in ms for code outside the event loop (the
    controller's thread, kazoo's): ``with timer.time(): ...``."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.histogram = Histogram()
        self.clock = clock

    def timed(self, fn: Callable) -> Callable:
        """``fn`` timed on each call."""

        def timed_fn(*args, **kwargs):
            with self.time():
                return fn(*args, **kwargs)

        return timed_fn

    @contextmanager
    def time(self) -> Iterator[None]:
        start = self.clock()
        try:
            yield
        finally:
            self.histogram.update((self.clock() - start) * 1000.0)
