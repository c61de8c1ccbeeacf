"""``max.incremental.fetch.session.cache.slots``: the broker keeps at most that many
fetch sessions (KIP-227), on a real broker over the wire; 0 means none at all."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from broker.server.config import BrokerConfig, ConfigError
from tests.wire import WireClient

pytestmark = pytest.mark.cluster


def _fetch(w: WireClient, topic: str, session_id: int, epoch: int):
    """A full fetch that opens a session (epoch 0), or an incremental one naming nothing."""
    parts = [(topic, 0, 0)] if epoch == 0 else []
    return w.fetch_request(parts, session_id=session_id, session_epoch=epoch)


def _surviving(bootstrap: str, sessions: int) -> tuple[list[int], int]:
    """Open ``sessions`` sessions, then continue each: (the session ids the broker gave,
    how many it still knew)."""
    w = WireClient.for_bootstrap(bootstrap)
    try:
        assert w.create_topic("slots", 1).error_code == ErrorCode.none
        opened = [_fetch(w, "slots", 0, 0) for _ in range(sessions)]
        assert all(r.error_code == ErrorCode.none for r in opened)
        ids = [r.session_id for r in opened]
        later = [_fetch(w, "slots", i, 1).error_code for i in ids if i]
        assert set(later) <= {ErrorCode.none, ErrorCode.fetch_session_id_not_found}
        return ids, later.count(ErrorCode.none)
    finally:
        w.close()


def test_at_most_the_configured_sessions_live(cluster):
    """Two slots: the third and fourth consumers find no session they may evict (both
    are younger than 120 s), so theirs are refused: session id 0, a full fetch."""
    ids, alive = _surviving(cluster(1, max_incremental_fetch_session_cache_slots=2).bootstrap, 4)
    assert all(ids[:2]) and ids[2:] == [0, 0]
    assert alive == 2


def test_no_slots_means_sessionless_fetches(cluster):
    ids, alive = _surviving(cluster(1, max_incremental_fetch_session_cache_slots=0).bootstrap, 3)
    assert ids == [0, 0, 0] and alive == 0


def test_a_negative_slot_count_is_refused_with_the_key_named():
    with pytest.raises(ConfigError, match="max.incremental.fetch.session.cache.slots"):
        BrokerConfig({"broker.id": "1", "max.incremental.fetch.session.cache.slots": "-1"})
