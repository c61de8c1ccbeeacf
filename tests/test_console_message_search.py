"""Message search across partitions (issue 29): server-side filters, bounds and
resuming, pretty JSON and binary values, downloads and bad input, over the REST API and
the page, against a real broker with records produced by confluent-kafka."""

from __future__ import annotations

import base64
import csv
import io
import json

import pytest

from tests.console_helpers import unique

pytest_plugins = ["tests.console_helpers"]

PARTS, PER = 3, 20
BASE = 1_700_000_000_000  # record timestamps: BASE + i * 1000 + p * 10
API = "/api/messages/search"


def ts(p: int, i: int) -> int:
    return BASE + i * 1000 + p * 10


@pytest.fixture(scope="module")
def topic(console_cluster):
    """3 partitions x 20 records with keys, JSON values, headers and timestamps, and one
    binary record (no key) at partition 0 offset 20."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    name = unique("search")
    admin = AdminClient({"bootstrap.servers": console_cluster.bootstrap})
    admin.create_topics([NewTopic(name, PARTS, 1)])[name].result(30)
    producer = Producer({"bootstrap.servers": console_cluster.bootstrap, "acks": "all"})
    for p in range(PARTS):
        for i in range(PER):
            color = "red" if i % 5 == 0 else "blue"
            producer.produce(
                name,
                key=f"k{p}-{i}".encode(),
                value=json.dumps({"p": p, "i": i, "color": color}).encode(),
                partition=p,
                headers=[("h", b"even" if i % 2 == 0 else b"odd")],
                timestamp=ts(p, i),
            )
        producer.flush(30)
    producer.produce(name, value=b"\xff\x00\xfe", partition=0, timestamp=ts(0, PER))
    assert producer.flush(30) == 0
    return name


def search(client, topic: str, **q):
    resp = client.get(API, {"topic": topic, **q})
    assert resp.status_code == 200, resp.content
    return resp.json()


def found(body) -> list[tuple[int, int]]:
    return [(r["partition"], r["offset"]) for r in body["records"]]


def test_value_contains_across_partitions_newest_first(console, topic):
    body = search(console.login("viewer"), topic, value='"red"')
    # offsets equal i; merged by timestamp, newest first
    want = sorted([(p, i) for p in range(PARTS) for i in (0, 5, 10, 15)], key=lambda x: -ts(*x))
    assert found(body) == want
    assert body["matched"] == 12 and body["scanned"] == PARTS * PER + 1
    assert body["scanned_per_partition"] == {"0": 21, "1": 20, "2": 20}
    assert body["stopped"] is None and body["next"] is None and body["resume"] == ""
    assert body["direction"] == "backward"


def test_key_header_regex_and_time_range(console, topic):
    client = console.login("viewer")
    assert found(search(client, topic, key="k1-1", start="oldest")) == [
        (1, i) for i in [1, *range(10, 20)]
    ]  # forwards: by timestamp, oldest first
    body = search(client, topic, header="h=odd", regex=r'"i": 1\d', regex_on="value")
    assert sorted(found(body)) == [(p, i) for p in range(PARTS) for i in (11, 13, 15, 17, 19)]
    body = search(client, topic, start="oldest", ts_from=str(ts(0, 5)), ts_to=str(ts(2, 6)))
    assert found(body) == [(0, 5), (1, 5), (2, 5), (0, 6), (1, 6), (2, 6)]
    # the time range's start is found by ListOffsets: records before it are not read
    assert body["scanned_per_partition"] == {"0": 16, "1": 15, "2": 15}
    assert search(client, topic, header="h")["matched"] == PARTS * PER  # name only
    assert found(search(client, topic, regex="^k2-19$", regex_on="key")) == [(2, 19)]
    assert search(client, topic, regex="^k2-19$", regex_on="value")["matched"] == 0


def test_start_at_offsets_or_a_timestamp(console, topic):
    client = console.login("viewer")
    body = search(client, topic, start="offset", offsets="0:18,1:19", partitions="0,1")
    assert sorted(found(body)) == [(0, 18), (0, 19), (0, 20), (1, 19)]
    body = search(client, topic, start="offset", offsets="19")
    assert sorted(found(body)) == [(0, 19), (0, 20), (1, 19), (2, 19)]
    body = search(client, topic, start="timestamp", timestamp=str(ts(1, 17)))
    # p0's record 17 is 10 ms older than p1's: its first offset at or after is 18
    assert sorted(found(body)) == [(0, 18), (0, 19), (0, 20), (1, 17), (1, 18), (1, 19)] + [
        (2, 17),
        (2, 18),
        (2, 19),
    ]


def test_bounded_search_reports_where_to_resume(console, topic):
    client = console.login("viewer")
    body = search(client, topic, start="oldest", max_scanned="9")
    assert body["scanned"] == 9 and body["stopped"] == "max_scanned"
    assert body["scanned_per_partition"] == {"0": 3, "1": 3, "2": 3}
    assert body["next"] == {"0": 3, "1": 3, "2": 3} and body["resume"] == "0:3,1:3,2:3"
    seen, steps, resume = found(body), 1, body["resume"]
    while resume:
        body = search(client, topic, start="oldest", max_scanned="9", resume=resume)
        seen += found(body)
        resume, steps = body["resume"], steps + 1
    assert sorted(seen) == sorted([(p, i) for p in range(PARTS) for i in range(PER)] + [(0, 20)])
    assert len(seen) == len(set(seen)) and steps == 7
    # backwards: newest first, the next offsets are the ones to read below
    body = search(client, topic, max_scanned="6")
    assert body["next"] == {"0": 19, "1": 18, "2": 18}
    assert sorted(found(body)) == [(0, 19), (0, 20), (1, 18), (1, 19), (2, 18), (2, 19)]
    body = search(client, topic, max_scanned="6", resume=body["resume"])
    assert sorted(found(body)) == [(0, 17), (0, 18), (1, 16), (1, 17), (2, 16), (2, 17)]
    # rounds read at most max_results records per partition: i=0 is red, i=1 blue
    body = search(client, topic, value="blue", max_results="2", start="oldest")
    assert body["stopped"] == "max_results" and found(body) == [(0, 1), (1, 1), (2, 1)]
    assert body["next"] == {"0": 2, "1": 2, "2": 2}


def test_time_budget_stops_between_rounds(console, topic):
    # max_results=1 with no match: one record per partition per round; a round (a fetch
    # from the broker) always outlasts a 1 ms budget, so the search stops after it
    body = search(
        console.login("viewer"), topic, value="nothing-has-this", max_results="1", max_ms="1"
    )
    assert body["stopped"] == "max_ms" and body["matched"] == 0
    assert body["scanned_per_partition"] == {"0": 1, "1": 1, "2": 1}
    assert body["next"] == {"0": 20, "1": 19, "2": 19}


def test_json_pretty_print_and_binary_values(console, topic):
    client = console.login("viewer")
    body = search(client, topic, start="offset", offsets="0:19", partitions="0", format="json")
    first, binary = body["records"]
    assert first["value"] == '{\n  "p": 0,\n  "i": 19,\n  "color": "blue"\n}'
    assert first["value_encoding"] == "json" and first["headers"] == [["h", "odd", "utf-8"]]
    assert binary["key"] is None and binary["key_encoding"] == "null"
    assert binary["value"] == base64.b64encode(b"\xff\x00\xfe").decode()
    assert binary["value_encoding"] == "base64"
    body = search(client, topic, start="offset", offsets="0:20", partitions="0", format="hex")
    assert body["records"][0]["value"].startswith("00000000  ff 00 fe")


def test_download_json_lines_and_csv(console, topic):
    client = console.login("viewer")
    q = {"topic": topic, "start": "offset", "offsets": "0:19", "partitions": "0"}
    resp = client.get(API + "/download", {**q, "as": "jsonl"})
    assert resp.status_code == 200 and resp["Content-Type"] == "application/x-ndjson"
    assert resp["X-Quill-Scanned"] == "2" and resp["X-Quill-Matched"] == "2"
    assert resp["X-Quill-Stopped"] == "" and resp["X-Quill-Resume"] == ""
    line = {
        "partition": 0,
        "offset": 19,
        "timestamp": ts(0, 19),
        "key": "k0-19",
        "key_encoding": "utf-8",
        "value": '{"p": 0, "i": 19, "color": "blue"}',
        "value_encoding": "utf-8",
        "headers": [["h", "odd", "utf-8"]],
        "size": 39,
    }
    binary = {
        **line,
        "offset": 20,
        "timestamp": ts(0, 20),
        "key": None,
        "key_encoding": "null",
        "value": "/wD+",
        "value_encoding": "base64",
        "headers": [],
        "size": 3,
    }
    want = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in (line, binary))
    assert resp.content == want.encode()
    page = client.get("/messages/search/download", {**q, "as": "jsonl"})  # the page's link
    assert page.status_code == 200 and page.content == resp.content
    resp = client.get(API + "/download", {**q, "as": "csv", "max_scanned": "1"})
    assert resp["X-Quill-Stopped"] == "max_scanned" and resp["X-Quill-Resume"] == "0:20"
    rows = list(csv.reader(io.StringIO(resp.content.decode())))
    assert rows == [
        [*"partition offset timestamp key key_encoding value value_encoding".split(), "headers"],
        ["0", "19", str(ts(0, 19)), "k0-19", "utf-8", line["value"], "utf-8", '[["h", "odd"]]'],
    ]


@pytest.mark.parametrize(
    ("query", "field", "words"),
    [
        ({"regex": "("}, "regex", "does not compile: missing ) at position 1"),
        ({"regex": "a" * 201}, "regex", "at most 200 characters"),
        ({"ts_from": "2026-01-02", "ts_to": "2026-01-01"}, "ts_from", "from is after its to"),
        ({"ts_to": "yesterday"}, "ts_to", "neither milliseconds"),
        ({"start": "timestamp", "timestamp": "-2"}, "timestamp", "0 or more milliseconds"),
        ({"max_scanned": "0"}, "max_scanned", "between 1 and 100,000"),
        ({"max_scanned": "100001"}, "max_scanned", "between 1 and 100,000"),
        ({"max_ms": "30001"}, "max_ms", "between 1 and 30,000"),
        ({"max_results": "x"}, "max_results", "whole number"),
        ({"partitions": "3"}, "partitions", "between 0 and 2"),
        ({"start": "offset", "offsets": ""}, "offsets", "Give the offset"),
        ({"start": "offset", "offsets": "0:x"}, "offsets", "whole number"),
        ({"start": "offset", "offsets": "0:-1"}, "offsets", "between 0"),
        ({"start": "offset", "partitions": "0", "offsets": "1:5"}, "offsets", "not one of"),
        ({"resume": "9:1"}, "resume", "Partition 9 is not one of"),
        ({"start": "timestamp"}, "timestamp", "Give the time"),
        ({"start": "middle"}, "start", "Start must be one of"),
        ({"format": "avro"}, "format", "Format must be one of"),
        ({"header": "=x"}, "header", "name=value"),
        ({"regex_on": "headers"}, "regex_on", "Regex on must be one of"),
    ],
)
def test_bad_input_answers_400_with_a_sentence(console, topic, query, field, words):
    client = console.login("viewer")
    for path in (API, API + "/download"):
        resp = client.get(path, {"topic": topic, **query})
        assert resp.status_code == 400, resp.content
        body = resp.json()
        assert words in body["detail"] and field in body["errors"]


def test_a_regex_that_backtracks_without_end_is_stopped_and_refused(console):
    """`(a|aa)+$` on 40 a's and a '!' takes Python's re longer than anyone waits (and it
    cannot be interrupted): the search stops it within its time budget and a grace, and
    answers 400 naming the regex, while the same pattern on a plain record still matches."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    name = unique("backtrack")
    bootstrap = console.cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: its futures need it
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(name, value=b"aa", partition=0)
    producer.produce(name, value=b"a" * 40 + b"!", partition=0)
    assert producer.flush(30) == 0
    client = console.login("viewer")
    found = search(client, name, start="oldest", regex="(a|aa)+$", max_results="1")
    assert [r["offset"] for r in found["records"]] == [0]  # stopped at one match, before the trap
    resp = client.get(API, {"topic": name, "start": "oldest", "regex": "(a|aa)+$", "max_ms": "500"})
    assert resp.status_code == 400, resp.content
    assert "took longer than the search's time budget" in resp.json()["detail"]
    assert "regex" in resp.json()["errors"]


def test_unknown_topic_and_bad_download_kind(console, topic):
    client = console.login("viewer")
    resp = client.get(API, {"topic": "no-such-topic"})
    assert resp.status_code == 404
    assert resp.json()["detail"] == "Topic 'no-such-topic' does not exist."
    assert client.get(API, {"topic": ""}).json()["detail"] == "A topic needs a name."
    resp = client.get(API + "/download", {"topic": topic, "as": "xml"})
    assert resp.status_code == 400 and resp.json()["detail"] == "Download as one of jsonl, csv."


@pytest.mark.parametrize(("role", "status"), [("anonymous", 401), ("norole", 403), ("viewer", 200)])
def test_search_needs_the_viewer_role(console, topic, role, status):
    assert console.login(role).get(API, {"topic": topic}).status_code == status


def test_search_is_in_the_openapi_schema(console):
    schema = console.login("viewer").get("/api/schema").json()
    params = {p["name"] for p in schema["paths"][API]["get"]["parameters"]}
    assert {"topic", "regex", "ts_from", "max_scanned", "resume"} <= params
    assert "as" in {p["name"] for p in schema["paths"][API + "/download"]["get"]["parameters"]}


def test_page_without_scripts_runs_one_bounded_search(console, topic):
    client = console.login("viewer")
    html = client.get("/messages/search", {"topic": topic, "key": "k2-7"}).content.decode()
    assert "Scanned 61 · matched 1 · done" in html and "k2-7" in html
    resp = client.get("/messages/search", {"topic": topic, "regex": "("})
    assert resp.status_code == 400 and "does not compile" in resp.content.decode()
