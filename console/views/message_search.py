"""Message search across the partitions of a topic: server-side filters (key, value,
header, regex, time range), bounded in records scanned and in time, resumable.

A search walks every chosen partition in rounds of `CHUNK` records, newest first
(backwards from the log end) or forwards from the oldest record, an offset per
partition or a timestamp (ListOffsets by time). It stops when every partition is
exhausted, when `max_scanned` records were looked at, when `max_results` matched or
when `max_ms` ran out; the answer says how many were scanned per partition and the
`next` offsets to resume from (the same query with `resume=` continues it)."""

from __future__ import annotations

import base64
import csv
import io
import json
import time
from dataclasses import dataclass, field

import regex  # re's syntax, and a search that can time out (re's cannot)

from cluster_client import admin, records, zk
from cluster_client.errors import OpError
from console.changes import messages as message_ops
from console.changes import validation
from console.schemas.decoder import PARTS, Decoder

STARTS = ("newest", "oldest", "offset", "timestamp")
FORMATS = ("text", "json", "hex")
REGEX_ON = ("either", "key", "value")
MAX_SCANNED_DEFAULT, MAX_SCANNED_CAP = 10_000, 100_000
MAX_MS_DEFAULT, MAX_MS_CAP = 5_000, 30_000
MAX_RESULTS_DEFAULT, MAX_RESULTS_CAP = 200, 10_000
REGEX_MAX_LEN = 200
CHUNK = 500  # records read per partition per round

# The query parameters a search takes (the page's form, the API, the download).
PARAMS = (
    "topic partitions start offsets timestamp resume key value header regex regex_on "
    "ts_from ts_to max_scanned max_ms max_results format"
).split()


@dataclass
class Spec:
    topic: str
    partitions: list[int]
    start: str
    offsets: dict[int, int]  # start=offset: the first offset per partition
    timestamp: int | None
    resume: dict[int, int] | None
    key: bytes | None
    value: bytes | None
    header: tuple[str, bytes | None] | None
    regex: regex.Pattern | None
    regex_on: str
    ts_from: int | None
    ts_to: int | None
    max_scanned: int
    max_ms: int
    max_results: int
    fmt: str

    @property
    def backwards(self) -> bool:
        return self.start == "newest"


def _text(q, name: str) -> str:
    return str(q.get(name) or "").strip()


def _bound(q, name: str, default: int, cap: int, what: str) -> int:
    raw = _text(q, name)
    return default if not raw else validation.whole(raw, name, 1, cap, what)


def _offset_map(raw: str, name: str, parts: list[int]) -> dict[int, int]:
    """'12' (every partition) or '0:12,3:40' (partition:offset pairs)."""
    if not raw:
        raise OpError("Give the offset to start from: 12, or partition:offset pairs.", name)
    if ":" not in raw:
        first = validation.whole(raw, name, 0, validation.LONG_MAX, "Offset")
        return {p: first for p in parts}
    out = {}
    for item in raw.split(","):
        p, sep, o = item.strip().partition(":")
        if not sep:
            raise OpError(f"{item.strip()!r} is not partition:offset.", name)
        p = validation.whole(p, name, 0, validation.INT_MAX, "Partition")
        if p not in parts:
            raise OpError(f"Partition {p} is not one of those searched ({_span(parts)}).", name)
        out[p] = validation.whole(o, name, 0, validation.LONG_MAX, "Offset")
    return out


def _span(parts: list[int]) -> str:
    return ", ".join(map(str, parts)) if len(parts) < 8 else f"{parts[0]} to {parts[-1]}"


def _partitions(raw: str, count: int) -> list[int]:
    if not raw:
        return list(range(count))
    out = set()
    for item in raw.split(","):
        out.add(validation.whole(item, "partitions", 0, count - 1, "Partition"))
    return sorted(out)


# what a round's regex searches may run past the time budget before the search is refused
REGEX_GRACE_S = 1.0


def _regex(raw: str) -> regex.Pattern | None:
    if not raw:
        return None
    if len(raw) > REGEX_MAX_LEN:
        raise OpError(
            f"A regex is at most {REGEX_MAX_LEN} characters; this one has {len(raw)}.", "regex"
        )
    try:
        return regex.compile(raw)
    except regex.error as exc:
        raise OpError(f"That regex does not compile: {exc}.", "regex") from None


def _regex_search(pattern: regex.Pattern, text: str, hard_deadline: float) -> bool:
    """One search, never past ``hard_deadline`` (time.monotonic): a pattern that
    backtracks without end, such as ``(a|aa)+$``, is stopped and refused with a
    sentence instead of holding a console worker (Python's re cannot be stopped)."""
    try:
        return pattern.search(text, timeout=max(0.0, hard_deadline - time.monotonic())) is not None
    except TimeoutError:
        raise OpError(
            "The regex took longer than the search's time budget on one record (a pattern "
            "with nested repeats backtracks without end); simplify it, or raise max_ms.",
            "regex",
        ) from None


def _when(raw: str, name: str) -> int | None:
    if not raw:
        return None
    try:
        when = message_ops.parse_when(raw)
    except OpError as exc:
        raise OpError(exc.message, name) from None
    if when < 0:  # -1, -2, -3 mean latest, earliest, max timestamp to ListOffsets
        raise OpError(f"A time is 0 or more milliseconds since the epoch; got {when}.", name)
    return when


def parse(q) -> Spec:
    """A Spec from a query mapping (request.GET or the API's arguments); OpError
    (400, with the field) on bad input, NotFound for an unknown topic."""
    topic = validation.topic_name(_text(q, "topic"), "topic")
    parts = _partitions(_text(q, "partitions"), len(zk.assignment(topic)))
    start = _text(q, "start") or "newest"
    if start not in STARTS:
        raise OpError(f"Start must be one of {', '.join(STARTS)}.", "start")
    offsets = _offset_map(_text(q, "offsets"), "offsets", parts) if start == "offset" else {}
    timestamp = _when(_text(q, "timestamp"), "timestamp") if start == "timestamp" else None
    if start == "timestamp" and timestamp is None:
        raise OpError("Give the time to start from (ms or 2026-01-31T12:00).", "timestamp")
    resume_raw = _text(q, "resume")
    resume = _offset_map(resume_raw, "resume", parts) if resume_raw else None
    header = None
    if raw := str(q.get("header") or ""):
        name, sep, text = raw.partition("=")
        if not name.strip():
            raise OpError("A header filter is name=value (or just name).", "header")
        header = (name.strip(), text.encode() if sep else None)
    regex_on = _text(q, "regex_on") or "either"
    if regex_on not in REGEX_ON:
        raise OpError(f"Regex on must be one of {', '.join(REGEX_ON)}.", "regex_on")
    ts_from, ts_to = _when(_text(q, "ts_from"), "ts_from"), _when(_text(q, "ts_to"), "ts_to")
    if ts_from is not None and ts_to is not None and ts_from > ts_to:
        raise OpError("The time range's from is after its to.", "ts_from")
    fmt = _text(q, "format") or "text"
    if fmt not in FORMATS:
        raise OpError(f"Format must be one of {', '.join(FORMATS)}.", "format")
    return Spec(
        topic=topic,
        partitions=parts,
        start=start,
        offsets=offsets,
        timestamp=timestamp,
        resume=resume,
        key=str(q.get("key") or "").encode() or None,
        value=str(q.get("value") or "").encode() or None,
        header=header,
        regex=_regex(str(q.get("regex") or "")),
        regex_on=regex_on,
        ts_from=ts_from,
        ts_to=ts_to,
        max_scanned=_bound(q, "max_scanned", MAX_SCANNED_DEFAULT, MAX_SCANNED_CAP, "Max scanned"),
        max_ms=_bound(q, "max_ms", MAX_MS_DEFAULT, MAX_MS_CAP, "Time budget (ms)"),
        max_results=_bound(q, "max_results", MAX_RESULTS_DEFAULT, MAX_RESULTS_CAP, "Max results"),
        fmt=fmt,
    )


# ---------------------------------------------------------------- matching


def matches(spec: Spec, msg, hard_deadline: float, decoded: dict | None = None) -> bool:
    """``hard_deadline``: when the regex must give up (the search's budget and a grace).
    ``decoded``: the key's and value's Avro / Protobuf decoding (Decoder.decode) when a
    schema is known; the key, value and regex filters then match the raw bytes or the
    decoded JSON text (compact: ``{"name": "alice", "n": 3}``)."""
    key, value = msg.key() or b"", msg.value() or b""
    as_json = {p: ((decoded or {}).get(p) or {}).get("text") for p in PARTS}
    json_key, json_value = (as_json[p].encode() if as_json[p] else b"" for p in PARTS)
    if spec.key is not None and spec.key not in key and spec.key not in json_key:
        return False
    if spec.value is not None and spec.value not in value and spec.value not in json_value:
        return False
    if spec.header is not None:
        name, want = spec.header
        if not any(k == name and (want is None or v == want) for k, v in msg.headers() or []):
            return False
    ts = msg.timestamp()[1]
    if spec.ts_from is not None and ts < spec.ts_from:
        return False
    if spec.ts_to is not None and ts > spec.ts_to:
        return False
    if spec.regex is not None:
        keys, values = (
            [key, json_key] if json_key else [key],
            [value, json_value] if json_value else [value],
        )
        fields = {"key": keys, "value": values, "either": keys + values}[spec.regex_on]
        texts = (f.decode("utf-8", errors="replace") for f in fields)
        if not any(_regex_search(spec.regex, t, hard_deadline) for t in texts):
            return False
    return True


def show(data: bytes | None, fmt: str) -> tuple[str | None, str]:
    """(text, encoding): UTF-8 text (JSON pretty printed for 'json'), a hexdump, or
    base64 for bytes that are not UTF-8."""
    if data is None:
        return None, "null"
    if fmt == "hex":
        return message_ops.hexdump(data), "hex"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return base64.b64encode(data).decode(), "base64"
    if fmt == "json":
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False), "json"
        except ValueError:
            pass
    return text, "utf-8"


def row(msg, fmt: str, decoded: dict | None = None) -> dict:
    key, key_enc = show(msg.key(), fmt)
    value, value_enc = show(msg.value(), fmt)
    return {
        "partition": msg.partition(),
        "offset": msg.offset(),
        "timestamp": msg.timestamp()[1],
        "key": key,
        "key_encoding": key_enc,
        "value": value,
        "value_encoding": value_enc,
        "headers": [[k, *show(v, "text")] for k, v in msg.headers() or []],
        "size": len(msg.key() or b"") + len(msg.value() or b""),
        **{f"{p}_schema": d for p, d in (decoded or {}).items() if d is not None},
    }


# ---------------------------------------------------------------- the walk


@dataclass
class Walk:
    """Cursors per partition: forwards the next offset to read, backwards the offset
    to read below; a partition leaves `cursor` when it is exhausted."""

    low: dict[int, int]
    high: dict[int, int]
    cursor: dict[int, int]
    scanned: dict[int, int] = field(default_factory=dict)


def _begin(spec: Spec) -> Walk:
    parts = [(spec.topic, p) for p in spec.partitions]
    low = {p: o for (_, p), o in admin.offsets(parts, "earliest").items()}
    high = {p: o for (_, p), o in admin.offsets(parts, "latest").items()}
    if spec.resume is not None:
        cursor = dict(spec.resume)
    elif spec.start == "newest":
        cursor = dict(high)
    elif spec.start == "oldest":
        cursor = dict(low)
    elif spec.start == "offset":
        cursor = {p: spec.offsets.get(p, low[p]) for p in spec.partitions}
    else:
        cursor = {p: o for (_, p), o in admin.offsets(parts, spec.timestamp).items()}
    if not spec.backwards and spec.ts_from is not None and spec.resume is None:
        by_time = admin.offsets(parts, spec.ts_from)  # nothing earlier is that recent
        cursor = {p: max(o, by_time[(spec.topic, p)]) for p, o in cursor.items()}
    if spec.backwards:
        cursor = {p: min(o, high[p]) for p, o in cursor.items() if min(o, high[p]) > low[p]}
    else:
        cursor = {p: max(o, low[p]) for p, o in cursor.items() if max(o, low[p]) < high[p]}
    return Walk(low, high, cursor, {p: 0 for p in spec.partitions})


def _round(spec: Spec, walk: Walk, budget: int, wanted: int) -> list:
    """Read one chunk of each open partition; advance the cursors; the records read
    (at most `budget` in all, and at most `wanted` per partition, so a search asking
    for a few matches does not read far past them)."""
    per = max(1, min(CHUNK, wanted, budget // max(1, len(walk.cursor))))
    if spec.backwards:
        begin = {p: max(walk.low[p], c - per) for p, c in walk.cursor.items()}
    else:
        begin = dict(walk.cursor)
    unfinished: set = set()
    assign = {(spec.topic, p): o for p, o in begin.items()}
    got = records.fetch(assign, want=per, unfinished=unfinished)
    by_part: dict[int, list] = {p: [] for p in begin}
    for msg in got:
        p = msg.partition()
        if not spec.backwards or msg.offset() < walk.cursor[p]:
            by_part[p].append(msg)
    out = []
    for p, msgs in by_part.items():
        if (spec.topic, p) in unfinished:
            # the read timed out short of the chunk's end: never count unread offsets
            # as read. Forwards keeps what came; backwards reads the chunk again.
            if spec.backwards or not msgs:
                continue
            walk.cursor[p] = msgs[-1].offset() + 1
        elif spec.backwards:
            msgs.reverse()
            walk.cursor[p] = begin[p]  # gaps (control records, compaction) count as read
        else:
            walk.cursor[p] = msgs[-1].offset() + 1 if msgs else walk.high[p]
        walk.scanned[p] += len(msgs)
        out.extend(msgs)
        done = walk.cursor[p] <= walk.low[p] if spec.backwards else walk.cursor[p] >= walk.high[p]
        if done:
            del walk.cursor[p]
    return out


def search(spec: Spec) -> dict:
    """Walk the partitions until exhausted or a bound is hit; matches merged by
    timestamp (newest first when walking backwards). The bounds are checked between
    rounds: a round's matches are all kept, so `matched` may pass `max_results`."""
    walk = _begin(spec)
    decoder = Decoder(spec.topic)  # its schemas read before the clock starts
    deadline = time.monotonic() + spec.max_ms / 1000
    decoder.deadline = deadline + REGEX_GRACE_S
    found, scanned, stopped = [], 0, None
    while walk.cursor:
        if scanned >= spec.max_scanned:
            stopped = "max_scanned"
        elif len(found) >= spec.max_results:
            stopped = "max_results"
        elif time.monotonic() >= deadline:
            stopped = "max_ms"
        if stopped:
            break
        msgs = _round(spec, walk, spec.max_scanned - scanned, spec.max_results - len(found))
        scanned += len(msgs)
        for m in msgs:
            decoded = _decode(decoder, m)
            if matches(spec, m, deadline + REGEX_GRACE_S, decoded):
                found.append((m, decoded))
    found.sort(
        key=lambda f: (f[0].timestamp()[1], f[0].partition(), f[0].offset()),
        reverse=spec.backwards,
    )
    return {
        "topic": spec.topic,
        "direction": "backward" if spec.backwards else "forward",
        "scanned": scanned,
        "scanned_per_partition": {str(p): n for p, n in walk.scanned.items()},
        "matched": len(found),
        "stopped": stopped,
        "next": {str(p): o for p, o in sorted(walk.cursor.items())} or None,
        "resume": ",".join(f"{p}:{o}" for p, o in sorted(walk.cursor.items())),
        "log": {str(p): [walk.low[p], walk.high[p]] for p in spec.partitions},
        "records": [row(m, spec.fmt, decoded) for m, decoded in found],
    }


def _decode(decoder: Decoder, msg) -> dict | None:
    if not decoder.active:
        return None
    return {"key": decoder.decode(msg.key(), "key"), "value": decoder.decode(msg.value(), "value")}


# ---------------------------------------------------------------- download

DOWNLOADS = ("jsonl", "csv")
_COLUMNS = ("partition", "offset", "timestamp", "key", "key_encoding", "value", "value_encoding")


def download(q) -> tuple[bytes, str, dict]:
    """(body, content type, search summary): what a search finds, as JSON lines or CSV;
    keys and values as UTF-8 text, or base64 (said in *_encoding) when they are not."""
    kind = _text(q, "as") or "jsonl"
    if kind not in DOWNLOADS:
        raise OpError(f"Download as one of {', '.join(DOWNLOADS)}.", "as")
    spec = parse(q)
    spec.fmt = "text"
    result = search(spec)
    rows = result.pop("records")
    if kind == "jsonl":
        body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        return body.encode(), "application/x-ndjson", result
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*_COLUMNS, "headers"])
    for r in rows:
        headers = json.dumps([[k, v] for k, v, _ in r["headers"]], ensure_ascii=False)
        writer.writerow([*(r[c] for c in _COLUMNS), headers])
    return out.getvalue().encode(), "text/csv; charset=utf-8", result


def summary_headers(result: dict) -> dict[str, str]:
    """A download's search summary as response headers (the body holds only records)."""
    return {
        "X-Quill-Scanned": str(result["scanned"]),
        "X-Quill-Matched": str(result["matched"]),
        "X-Quill-Stopped": result["stopped"] or "",
        "X-Quill-Resume": result["resume"],
    }
