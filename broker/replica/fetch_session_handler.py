"""The follower's side of a fetch session (KIP-227; Kafka's FetchSessionHandler).

The first fetch to a leader is full (epoch 0) and opens a session; each later one
carries the next epoch and names only the partitions whose fetch fields changed since
the last request (in practice: the ones that just appended), plus the ones to forget.
Any doubt (an error from the leader, a lost connection, a timeout) starts over with a
full fetch.
"""

from __future__ import annotations

from typing import Any

from ..protocol.errors import ErrorCode

INITIAL_EPOCH = 0
TopicPartition = tuple[str, int]


class FetchSessionHandler:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.session_id = 0
        self.epoch = INITIAL_EPOCH
        self._session: dict[TopicPartition, tuple] = {}  # what the leader's session holds

    def build(
        self, wanted: dict[TopicPartition, dict], changed: set[TopicPartition] | None = None
    ) -> dict:
        """The session fields, topics and forgotten topics of the next Fetch request for
        ``wanted`` (partition -> its request fields). ``changed``: the partitions whose
        fields may differ from the last request (added, moved or gone); the others are
        taken as held, so an incremental request costs O(changed). None compares every
        partition."""
        held = self._session
        forgotten: dict[str, list[int]] = {}
        if self.epoch == INITIAL_EPOCH:
            send = wanted
            self._session = {k: tuple(v.values()) for k, v in wanted.items()}
        elif changed is None:
            send = {k: v for k, v in wanted.items() if held.get(k) != tuple(v.values())}
            for topic, index in held:
                if (topic, index) not in wanted:
                    forgotten.setdefault(topic, []).append(index)
            self._session = {k: tuple(v.values()) for k, v in wanted.items()}
        else:
            send = {}
            for key in changed:
                fields = wanted.get(key)
                if fields is None:
                    if held.pop(key, None) is not None:
                        forgotten.setdefault(key[0], []).append(key[1])
                    continue
                values = tuple(fields.values())
                if held.get(key) != values:
                    held[key] = values
                    send[key] = fields
        by_topic: dict[str, list[dict]] = {}
        for (topic, _index), fields in send.items():
            by_topic.setdefault(topic, []).append(fields)
        topics = []  # loops, not comprehensions: no frame of their own, every round
        for t, ps in by_topic.items():
            topics.append({"topic": t, "partitions": ps})
        gone = []
        for t, ps in forgotten.items():
            gone.append({"topic": t, "partitions": ps})
        return {
            "session_id": self.session_id,
            "session_epoch": self.epoch,
            "topics": topics,
            "forgotten_topics_data": gone,
        }

    def handle_response(self, resp: Any) -> bool:
        """Take the response's session fields; False (and a fresh start next time) when
        the leader refused the session."""
        if resp.error_code != ErrorCode.none:
            self.reset()
            return False
        if resp.session_id == 0:  # the leader keeps no session for us: full fetches
            self.reset()
        else:
            self.session_id = resp.session_id
            self.epoch = 1 if self.epoch >= 2**31 - 1 else self.epoch + 1
        return True
