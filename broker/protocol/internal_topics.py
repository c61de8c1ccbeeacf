"""Topics that others depend on by their partition count: Kafka's internal topics
(``Topic.INTERNAL_TOPICS``) and the pipeline sink's marker topic.

Groups and transactional ids are mapped to a partition of their topic by a hash modulo
the partition count, so adding partitions to ``__consumer_offsets`` moves every group to
another partition (its committed offsets seem to vanish) and deleting it loses them all.
The broker refuses CreatePartitions and DeleteTopics on Kafka's internal topics; the
console, its API and our CLIs refuse every topic here, each with the reason below.
"""

from __future__ import annotations

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
SINK_COMMITS_TOPIC = "__quill_sink_commits"  # pipeline.exactly_once.COMMITS_TOPIC

INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})

_WHY = {
    OFFSETS_TOPIC: "it is Kafka's internal topic of committed offsets: every group is "
    "kept in the partition its id hashes to, so a change would lose the committed offsets "
    "of every consumer group",
    TRANSACTION_STATE_TOPIC: "it is Kafka's internal topic of transaction state: every "
    "transactional id is kept in the partition its id hashes to, so a change would lose "
    "the state of every transactional producer",
    SINK_COMMITS_TOPIC: "it holds the pipeline sink's exactly-once markers, which must "
    "stay in one partition, in one order, for the sink to resume without duplicates",
}
PROTECTED_TOPICS = frozenset(_WHY)


def refusal(name: str, change: str) -> str | None:
    """The sentence refusing `change` ("add partitions to", "delete") for a protected
    topic, or None when `name` may be changed."""
    why = _WHY.get(name)
    if why is None:
        return None
    return f"Cannot {change} {name}: {why}."
