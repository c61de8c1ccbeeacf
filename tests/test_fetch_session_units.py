"""Fetch sessions (KIP-227) without a network: the leader's cache and the follower's
handler, on the request and response shapes kio gives them."""

from __future__ import annotations

from types import SimpleNamespace as NS

from kio.schema.errors import ErrorCode

from broker.replica.fetch_session_handler import FetchSessionHandler
from broker.server.fetch_session import FetchSessionCache


def _req(session_id: int, epoch: int, parts: dict, forget=()) -> NS:
    topics: dict[str, list] = {}
    for (topic, p), offset in parts.items():
        topics.setdefault(topic, []).append(
            NS(partition=p, fetch_offset=offset, partition_max_bytes=100, current_leader_epoch=3)
        )
    forgotten: dict[str, list] = {}
    for topic, p in forget:
        forgotten.setdefault(topic, []).append(p)
    return NS(
        session_id=session_id,
        session_epoch=epoch,
        topics=[NS(topic=t, partitions=ps) for t, ps in topics.items()],
        forgotten_topics_data=[NS(topic=t, partitions=ps) for t, ps in forgotten.items()],
    )


def test_cache_opens_updates_and_checks_epochs():
    cache = FetchSessionCache()
    error, session, incremental = cache.begin(_req(0, 0, {("t", 0): 5, ("t", 1): 7}))
    assert (error, incremental) == (ErrorCode.none, False)
    assert session.id > 0 and session.epoch == 1
    assert {k: p.fetch_offset for k, p in session.partitions.items()} == {
        ("t", 0): 5,
        ("t", 1): 7,
    }
    error, same, incremental = cache.begin(_req(session.id, 1, {("t", 0): 9}, forget=[("t", 1)]))
    assert (error, same, incremental) == (ErrorCode.none, session, True)
    assert {k: p.fetch_offset for k, p in session.partitions.items()} == {("t", 0): 9}
    assert session.epoch == 2
    assert cache.begin(_req(session.id, 1, {}))[0] == ErrorCode.invalid_fetch_session_epoch
    missing = (session.id + 1) % (1 << 31) or 1
    assert cache.begin(_req(missing, 1, {}))[0] == ErrorCode.fetch_session_id_not_found
    # epoch -1 closes the session it names and fetches without one
    assert cache.begin(_req(session.id, -1, {("t", 0): 9}))[1] is None
    assert session.id not in cache.sessions


def _open(cache: FetchSessionCache, now: float, partitions: int = 1, follower: bool = False):
    req = _req(0, 0, {("t", p): 0 for p in range(partitions)})
    req.replica_id = 2 if follower else -1
    return cache.begin(req, now_ms=now)[1]


def test_a_full_cache_refuses_young_sessions_a_consumer_would_evict():
    """Kafka's tryEvict: no session is stale and none was created more than 120 s ago,
    so a consumer's new session is refused (a sessionless full fetch)."""
    cache = FetchSessionCache(max_sessions=2)
    a, b = _open(cache, 0), _open(cache, 1)
    assert _open(cache, 2, partitions=50) is None
    assert set(cache.sessions) == {a.id, b.id} and cache.evictions == 0
    assert FetchSessionCache(max_sessions=0).begin(_req(0, 0, {("t", 0): 0}))[1] is None


def test_a_followers_session_is_never_evicted_by_a_consumers():
    cache = FetchSessionCache(max_sessions=1)
    follower = _open(cache, 0, follower=True)
    for now in (1, 60_000, 130_000, 200_000):  # old, but used every time: never stale
        cache.begin(_req(follower.id, follower.epoch, {}), now_ms=now)
        assert _open(cache, now + 1, partitions=1000) is None
    assert set(cache.sessions) == {follower.id}


def test_a_follower_evicts_the_smallest_consumer_session():
    cache = FetchSessionCache(max_sessions=2)
    big, small = _open(cache, 0, partitions=5), _open(cache, 1, partitions=2)
    follower = _open(cache, 2, follower=True)  # privileged: any consumer's session may go
    assert follower is not None and follower.privileged
    assert set(cache.sessions) == {big.id, follower.id} and cache.evictions == 1
    assert small.id not in cache.sessions
    assert _open(cache, 3, follower=True) is not None  # the next follower takes the consumer's
    assert big.id not in cache.sessions


def test_a_stale_session_goes_first_even_a_followers():
    cache = FetchSessionCache(max_sessions=2)
    follower = _open(cache, 0, follower=True, partitions=100)
    consumer = _open(cache, 100_000)
    newcomer = _open(cache, 120_001 + 1)  # the follower's session unused for > 120 s
    assert newcomer is not None
    assert set(cache.sessions) == {consumer.id, newcomer.id}
    assert follower.id not in cache.sessions


def test_an_old_consumer_session_gives_way_to_a_bigger_one_only():
    cache = FetchSessionCache(max_sessions=1)
    old = _open(cache, 0, partitions=3)
    cache.begin(_req(old.id, old.epoch, {}), now_ms=121_000)  # used: not stale, but old
    assert _open(cache, 121_001, partitions=3) is None  # not bigger: refused
    bigger = _open(cache, 121_002, partitions=4)
    assert bigger is not None and set(cache.sessions) == {bigger.id}


def test_session_answers_only_news():
    cache = FetchSessionCache()
    session = cache.begin(_req(0, 0, {("t", 0): 0}))[1]
    sp = session.partitions[("t", 0)]
    quiet = NS(
        records_size=0,
        error_code=0,
        high_watermark=4,
        last_stable_offset=4,
        log_start_offset=0,
        preferred_read_replica=-1,
    )
    assert sp.changed(quiet)  # never answered: news
    sp.heard(quiet)
    assert not sp.changed(quiet)
    assert sp.changed(NS(**{**vars(quiet), "high_watermark": 5}))
    assert sp.changed(NS(**{**vars(quiet), "records_size": 10}))
    assert sp.changed(NS(**{**vars(quiet), "error_code": 6}))
    assert sp.changed(NS(**{**vars(quiet), "preferred_read_replica": 2}))  # KIP-392: always


def _fields(offset: int) -> dict:
    return {"partition": 0, "current_leader_epoch": 1, "fetch_offset": offset}


def test_handler_sends_full_then_only_changes():
    h = FetchSessionHandler()
    wanted = {("t", 0): _fields(5), ("t", 1): {**_fields(7), "partition": 1}}
    first = h.build(wanted)
    assert (first["session_id"], first["session_epoch"]) == (0, 0)
    assert sum(len(t["partitions"]) for t in first["topics"]) == 2
    assert h.handle_response(NS(error_code=ErrorCode.none, session_id=42))
    quiet = h.build(wanted)
    assert (quiet["session_id"], quiet["session_epoch"], quiet["topics"]) == (42, 1, [])
    h.handle_response(NS(error_code=ErrorCode.none, session_id=42))
    moved = h.build({("t", 0): _fields(6)})  # partition 0 appended, partition 1 left
    assert moved["session_epoch"] == 2
    assert moved["topics"] == [{"topic": "t", "partitions": [_fields(6)]}]
    assert moved["forgotten_topics_data"] == [{"topic": "t", "partitions": [1]}]
    assert not h.handle_response(NS(error_code=ErrorCode.invalid_fetch_session_epoch, session_id=0))
    again = h.build({("t", 0): _fields(6)})  # refused: start over with a full fetch
    assert (again["session_id"], again["session_epoch"]) == (0, 0)
    assert again["topics"] == [{"topic": "t", "partitions": [_fields(6)]}]


def test_partitions_that_returned_records_go_last():
    from broker.server.handlers.fetch import _news_only

    cache = FetchSessionCache()
    session = cache.begin(_req(0, 0, {("t", 0): 0, ("t", 1): 0, ("t", 2): 0}))[1]

    def answer(p: int, size: int) -> NS:
        return NS(
            partition=p,
            records_size=size,
            error_code=0,
            high_watermark=9,
            last_stable_offset=9,
            log_start_offset=0,
            preferred_read_replica=-1,
        )

    full = _news_only(session, [("t", [answer(0, 50), answer(1, 0), answer(2, 0)])], False)
    assert [p.partition for p in full[0][1]] == [0, 1, 2]  # a full answer names all
    assert [sp.partition for sp in session.by_topic()[0][1]] == [1, 2, 0]
    news = _news_only(session, [("t", [answer(1, 10), answer(2, 0), answer(0, 0)])], True)
    assert [p.partition for p in news[0][1]] == [1]  # only partition 1 has anything new
    assert [sp.partition for sp in session.by_topic()[0][1]] == [2, 0, 1]


def test_handler_sends_only_the_changed_partitions_it_is_told_of():
    """The follower names the partitions whose fields changed; the others are taken as
    the leader holds them (no comparison of every partition each round)."""
    h = FetchSessionHandler()
    wanted = {("t", p): {**_fields(p), "partition": p} for p in range(100)}
    h.build(wanted, set(wanted))
    assert h.handle_response(NS(error_code=ErrorCode.none, session_id=42))
    assert h.build(wanted, set())["topics"] == []
    h.handle_response(NS(error_code=ErrorCode.none, session_id=42))
    wanted[("t", 7)] = {**_fields(70), "partition": 7}
    del wanted[("t", 9)]
    wanted[("u", 0)] = _fields(0)
    moved = h.build(wanted, {("t", 7), ("t", 9), ("u", 0), ("t", 8)})  # 8: told, not moved
    assert moved["session_epoch"] == 2
    assert sorted(moved["topics"], key=lambda t: t["topic"]) == [
        {"topic": "t", "partitions": [{**_fields(70), "partition": 7}]},
        {"topic": "u", "partitions": [_fields(0)]},
    ]
    assert moved["forgotten_topics_data"] == [{"topic": "t", "partitions": [9]}]
    h.handle_response(NS(error_code=ErrorCode.none, session_id=42))
    # None compares every partition: same answer as the told set would give
    assert h.build(wanted, None)["topics"] == []
    h.reset()  # a lost connection: a full fetch of everything wanted
    full = h.build(wanted, set())
    assert full["session_epoch"] == 0
    assert sum(len(t["partitions"]) for t in full["topics"]) == 100
