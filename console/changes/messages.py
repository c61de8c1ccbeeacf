"""Messages: read a partition from an offset, a timestamp or the end, shown as text,
pretty JSON or hex; produce one record (operators)."""

from __future__ import annotations

import datetime as dt
import json

from cluster_client import admin, records, zk
from cluster_client.errors import OpError
from console.changes import Actor, validation
from console.roles import OPERATOR
from console.schemas.decoder import Decoder

FORMATS = ("text", "json", "hex")
MAX_LIMIT = 500


def render(data: bytes | None, fmt: str) -> str | None:
    if data is None:
        return None
    if fmt == "hex":
        return hexdump(data)
    text = data.decode("utf-8", errors="replace")
    if fmt == "json":
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            return text
    return text


def hexdump(data: bytes, width: int = 16) -> str:
    lines = []
    for i in range(0, len(data), width):
        chunk = data[i : i + width]
        hexes = " ".join(f"{b:02x}" for b in chunk)
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{i:08x}  {hexes:<{width * 3}} {text}")
    return "\n".join(lines)


def parse_when(value: str) -> int:
    """Milliseconds since the epoch, or an ISO date-time (UTC unless it says otherwise)."""
    value = (value or "").strip()
    if value.lstrip("-").isdigit():
        return int(value)
    try:
        when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise OpError(
            f"{value!r} is neither milliseconds since the epoch nor a date-time like "
            f"2026-01-31T12:00:00.",
            "timestamp",
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1000)


def _partition(topic: str, partition, field: str = "partition") -> int:
    count = len(zk.assignment(topic))
    if partition is None or not str(partition).strip():
        raise OpError(
            f"Choose the partition to read: {topic} has partitions 0 to {count - 1}.", field
        )
    return validation.whole(partition, field, 0, count - 1, "Partition")


def read(topic: str, partition, mode: str = "end", value=None, limit=50, fmt="text") -> dict:
    """Records of one partition: mode 'offset' (from value), 'timestamp' (from the first
    record at or after value), 'end' (the last `limit` records)."""
    topic = validation.topic_name(topic, "topic")
    p = _partition(topic, partition)
    limit = validation.whole(limit, "limit", 1, MAX_LIMIT, "Limit")
    if fmt not in FORMATS:
        raise OpError(f"Format must be one of {', '.join(FORMATS)}.", "format")
    part = (topic, p)
    start = admin.offsets([part], "earliest")[part]
    end = admin.offsets([part], "latest")[part]
    if mode == "offset":
        first = validation.whole(value, "offset", 0, validation.LONG_MAX, "Offset")
    elif mode == "timestamp":
        first = admin.offsets([part], parse_when(value))[part]
    elif mode == "end":
        first = max(start, end - limit)
    else:
        raise OpError("Mode must be offset, timestamp or end.", "mode")
    first = min(max(first, start), end)
    msgs = records.fetch({part: first}, want=limit) if first < end else []
    decoder = Decoder(topic)  # Avro / Protobuf when a schema is known (key_schema, value_schema)
    return {
        "topic": topic,
        "partition": p,
        "start": start,
        "end": end,
        "first": first,
        "records": [record_dict(m, fmt, decoder) for m in msgs],
    }


def record_dict(msg, fmt: str, decoder: Decoder | None = None) -> dict:
    ts_type, ts = msg.timestamp()
    out = {
        "offset": msg.offset(),
        "timestamp": ts,
        "timestamp_type": {1: "CreateTime", 2: "LogAppendTime"}.get(ts_type, "none"),
        "key": render(msg.key(), fmt),
        "value": render(msg.value(), fmt),
        "headers": [[k, render(v, "text")] for k, v in (msg.headers() or [])],
        "size": len(msg.value() or b"") + len(msg.key() or b""),
    }
    return decoder.annotate(out, msg) if decoder is not None else out


def produce(actor: Actor, topic: str, partition=None, key=None, value="", headers=None) -> dict:
    actor.require(OPERATOR)
    topic = validation.topic_name(topic, "topic")
    p = None if partition in (None, "") else _partition(topic, partition)
    header_list = []
    for item in headers or []:
        name, _, text = item.partition("=") if isinstance(item, str) else (item[0], "", item[1])
        if not name.strip():
            raise OpError("Headers are name=value, one a line.", "headers")
        header_list.append((name.strip(), text.encode()))
    encoded_key = key.encode() if key else None
    result = records.produce(topic, p, encoded_key, (value or "").encode(), header_list)
    actor.done(
        "message.produce",
        f"topic:{topic}/{result['partition']}",
        None,
        {"offset": result["offset"], "key": key, "bytes": len((value or "").encode())},
    )
    return result
