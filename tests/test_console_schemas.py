"""Avro and Protobuf display (issue 29): records in Confluent's wire format decoded with
a schema registry, raw records decoded with a schema uploaded to the console, the bad
cases (unknown id, registry down or answering garbage, truncated payload, wrong magic,
a schema that does not compile, hostile sizes), and search on decoded fields; against
a real broker, records produced by confluent-kafka."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.console_helpers import unique
from tests.schema_helpers import (
    AVRO_USER,
    SHOP_PROTO,
    Registry,
    avro_bytes,
    produce,
    proto_classes,
    wire,
)

pytest_plugins = ["tests.console_helpers"]

AVRO_ID, PROTO_ID, JSON_ID, GARBAGE_ID, UNKNOWN_ID = 7, 8, 10, 9, 99
ZERO_ITEMS_ID, DEEP_JSON_ID = 11, 12
NAMES = ["shop.Customer", "shop.Order", "shop.Order.Line"]
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def registry():
    reg = Registry(
        {
            AVRO_ID: {"schema": json.dumps(AVRO_USER)},  # no schemaType: Avro
            PROTO_ID: {"schema": SHOP_PROTO, "schemaType": "PROTOBUF"},
            JSON_ID: {"schema": '{"type": "object"}', "schemaType": "JSON"},
        }
    )
    reg.garbage.add(GARBAGE_ID)
    yield reg
    reg.close()


@pytest.fixture(scope="module")
def wire_topic(console_cluster):
    """One partition: offset 0 Avro (id 7), 1 Protobuf shop.Order (id 8, indexes [1]),
    2 Protobuf shop.Order.Line (indexes [1, 0]), 3 unknown id 99, 4 truncated Avro,
    5 wrong magic byte, 6 plain JSON text, 7 id 9 (the registry answers garbage),
    8 JSON Schema (id 10)."""
    classes = proto_classes(SHOP_PROTO, NAMES)
    order = classes["shop.Order"](id="o-1", cents=1250, lines=[{"sku": "tea", "qty": 2}])
    line = classes["shop.Order.Line"](sku="cup", qty=3)
    alice = avro_bytes(AVRO_USER, {"name": "alice", "visits": 3})
    name = unique("wire")
    produce(
        console_cluster.bootstrap,
        name,
        [
            (b"user-1", wire(AVRO_ID, alice)),
            (b"order-1", wire(PROTO_ID, order.SerializeToString(), b"\x02\x02")),
            (b"line-1", wire(PROTO_ID, line.SerializeToString(), b"\x04\x02\x00")),
            (b"u", wire(UNKNOWN_ID, alice)),
            (b"t", wire(AVRO_ID, alice[:3])),
            (b"m", b"\x01" + wire(AVRO_ID, alice)[1:]),
            (b"j", b'{"plain": true}'),
            (b"g", wire(GARBAGE_ID, alice)),
            (b"js", wire(JSON_ID, b'{"a": [1, 2]}')),
        ],
    )
    return name


@pytest.fixture
def with_registry(console, registry, settings):
    from console.schemas import registry as registry_client

    settings.QUILL_SCHEMA_REGISTRY_URL = registry.url
    registry_client.reset()
    yield console
    registry_client.reset()


def read(client, topic: str, **q) -> list[dict]:
    resp = client.get(
        "/api/messages", {"topic": topic, "partition": 0, "mode": "offset", "value": 0, **q}
    )
    assert resp.status_code == 200, resp.content
    return resp.json()["records"]


def test_wire_format_avro_and_protobuf_decoded_in_the_api(with_registry, wire_topic, registry):
    recs = read(with_registry.login("viewer"), wire_topic)
    assert [r["offset"] for r in recs] == list(range(9))
    avro = recs[0]["value_schema"]
    assert avro["badge"] == "Avro, schema 7" and avro["error"] is None
    assert json.loads(avro["json"]) == {"name": "alice", "visits": 3}
    assert avro["text"] == '{"name": "alice", "visits": 3}'
    order = recs[1]["value_schema"]
    assert order["badge"] == "Protobuf shop.Order, schema 8"
    assert json.loads(order["json"]) == {
        "id": "o-1",
        "cents": "1250",  # int64 in Protobuf's JSON mapping is a string
        "lines": [{"sku": "tea", "qty": 2}],
    }
    line = recs[2]["value_schema"]
    assert line["badge"] == "Protobuf shop.Order.Line, schema 8"
    assert json.loads(line["json"]) == {"sku": "cup", "qty": 3}
    assert json.loads(recs[8]["value_schema"]["json"]) == {"a": [1, 2]}
    assert "key_schema" not in recs[0]  # a text key stays text
    # ids are fetched once and cached
    assert registry.requests.count(f"/schemas/ids/{AVRO_ID}") == 1


def test_bad_wire_records_are_shown_raw_with_the_reason(with_registry, wire_topic):
    recs = read(with_registry.login("viewer"), wire_topic)
    unknown = recs[3]["value_schema"]
    assert unknown["json"] is None
    assert unknown["error"] == "schema 99: not in the registry (404)"
    assert recs[3]["value"].startswith("\x00")  # the raw value is still there
    truncated = recs[4]["value_schema"]
    assert truncated["badge"] == "Avro, schema 7"
    assert "truncated" in truncated["error"]
    assert "value_schema" not in recs[5]  # magic 1: not the wire format, not misread
    assert "value_schema" not in recs[6]
    assert recs[6]["value"] == '{"plain": true}'
    assert recs[7]["value_schema"]["error"] == (
        "schema 9: the registry answered something that is not a schema"
    )


def test_registry_down_is_a_note_per_record_not_a_500(console, wire_topic, settings):
    import socket

    from console.schemas import registry as registry_client

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings.QUILL_SCHEMA_REGISTRY_URL = f"http://127.0.0.1:{port}"
    registry_client.reset()
    client = console.login("viewer")
    recs = read(client, wire_topic)
    assert recs[0]["value_schema"]["error"] == "schema 7: registry unreachable"
    assert recs[1]["value_schema"]["error"] == "schema 8: registry unreachable"
    page = client.get(
        "/messages/", {"topic": wire_topic, "partition": 0, "mode": "offset", "value": 0}
    )
    assert page.status_code == 200
    assert b"schema 7: registry unreachable" in page.content
    registry_client.reset()


def test_registry_basic_auth(console, wire_topic, settings):
    from console.schemas import registry as registry_client

    reg = Registry({AVRO_ID: {"schema": json.dumps(AVRO_USER)}}, auth=("sr-user", "sr-pw"))
    try:
        settings.QUILL_SCHEMA_REGISTRY_URL = reg.url
        registry_client.reset()
        client = console.login("viewer")
        assert "(401)" in read(client, wire_topic, limit=1)[0]["value_schema"]["error"]
        settings.QUILL_SCHEMA_REGISTRY_USER = "sr-user"
        settings.QUILL_SCHEMA_REGISTRY_PASSWORD = "sr-pw"
        registry_client.reset()
        got = read(client, wire_topic, limit=1)[0]["value_schema"]
        assert got["error"] is None and got["badge"] == "Avro, schema 7"
    finally:
        reg.close()
        registry_client.reset()


def test_browse_page_shows_the_badge_and_pretty_json(with_registry, wire_topic):
    page = with_registry.login("viewer").get(
        "/messages/", {"topic": wire_topic, "partition": 0, "mode": "offset", "value": 0}
    )
    assert page.status_code == 200
    html = page.content.decode()
    assert "Avro, schema 7" in html and "Protobuf shop.Order, schema 8" in html
    assert "&quot;name&quot;: &quot;alice&quot;" in html
    assert "schema 99: not in the registry (404)" in html


def test_search_matches_a_decoded_field(with_registry, wire_topic):
    client = with_registry.login("viewer")
    resp = client.get("/api/messages/search", {"topic": wire_topic, "value": '"name": "alice"'})
    assert resp.status_code == 200, resp.content
    body = resp.json()
    assert [r["offset"] for r in body["records"]] == [0]
    assert body["records"][0]["value_schema"]["badge"] == "Avro, schema 7"
    resp = client.get("/api/messages/search", {"topic": wire_topic, "regex": r'"sku": "(tea|cup)"'})
    assert sorted(r["offset"] for r in resp.json()["records"]) == [1, 2]


# ---------------------------------------------------------------- uploaded schemas

RECURSIVE = {
    "type": "record",
    "name": "Node",
    "fields": [{"name": "next", "type": ["null", "Node"]}],
}


EMPTY = {"type": "record", "name": "Empty", "fields": []}
# arrays whose items take no bytes: 5 bytes of payload could claim billions of items
ZERO_BYTE_ITEM_ARRAYS = [
    {"type": "array", "items": "null"},
    {"type": "array", "items": EMPTY},
    {"type": "array", "items": {"type": "fixed", "name": "Nothing", "size": 0}},
    {
        "type": "record",
        "name": "Holder",
        "fields": [
            {"name": "one", "type": EMPTY},
            {
                "name": "many",
                "type": {"type": "map", "values": {"type": "array", "items": "Empty"}},
            },
        ],
    },
]


@pytest.fixture(scope="module")
def raw_topic(console_cluster):
    """Raw Avro values (no wire format), raw Protobuf keys: offset 0 bob, 1 carol, 2 a
    value that is not Avro of the schema, 3 a recursive value 200 levels deep, 4 a value
    whose first byte is 0 and an empty key."""
    customer = proto_classes(SHOP_PROTO, NAMES)["shop.Customer"]
    name = unique("raw")
    produce(
        console_cluster.bootstrap,
        name,
        [
            (
                customer(name="c-bob").SerializeToString(),
                avro_bytes(AVRO_USER, {"name": "bob", "visits": 1}),
            ),
            (
                customer(name="c-carol").SerializeToString(),
                avro_bytes(AVRO_USER, {"name": "carol", "visits": 40}),
            ),
            (b"\xff", b"\x02"),
            (None, b"\x02" * 200 + b"\x00"),
            # a raw value that starts with byte 0 (an empty name) and a key with no field set
            (customer().SerializeToString(), avro_bytes(AVRO_USER, {"name": "", "visits": 2**30})),
        ],
    )
    return name


def put_schema(client, topic: str, part: str, body: dict):
    return client.put(
        f"/api/topics/{topic}/schemas/{part}", json.dumps(body), content_type="application/json"
    )


def test_uploaded_schemas_decode_raw_records(console, raw_topic):
    from console.models import AuditEntry

    operator, viewer = console.login("operator"), console.login("viewer")
    avro = {"kind": "avro", "schema": json.dumps(AVRO_USER)}
    assert put_schema(viewer, raw_topic, "value", avro).status_code == 403
    resp = put_schema(operator, raw_topic, "value", avro)
    assert resp.status_code == 200, resp.content
    proto = {"kind": "protobuf", "schema": SHOP_PROTO, "message": "shop.Customer"}
    assert put_schema(operator, raw_topic, "key", proto).status_code == 200
    listed = viewer.get(f"/api/topics/{raw_topic}/schemas").json()
    assert [(s["part"], s["kind"], s["message"]) for s in listed] == [
        ("key", "protobuf", "shop.Customer"),
        ("value", "avro", ""),
    ]
    recs = read(viewer, raw_topic)
    assert recs[0]["value_schema"]["badge"] == "Avro (value schema)"
    assert json.loads(recs[1]["value_schema"]["json"]) == {"name": "carol", "visits": 40}
    assert recs[1]["key_schema"]["badge"] == "Protobuf shop.Customer"
    assert json.loads(recs[1]["key_schema"]["json"]) == {"name": "c-carol"}
    assert "not Avro of this schema" in recs[2]["value_schema"]["error"]
    entries = AuditEntry.objects.filter(target=f"topic:{raw_topic}/value", action="schema.set")
    assert entries.count() == 1 and entries[0].after["kind"] == "avro"
    # search on a decoded field of an uploaded schema
    resp = viewer.get("/api/messages/search", {"topic": raw_topic, "value": '"visits": 40'})
    assert [r["offset"] for r in resp.json()["records"]] == [1]
    # delete: operator only, audited; records are raw again
    assert viewer.delete(f"/api/topics/{raw_topic}/schemas/value").status_code == 403
    assert operator.delete(f"/api/topics/{raw_topic}/schemas/value").status_code == 204
    assert operator.delete(f"/api/topics/{raw_topic}/schemas/value").status_code == 404
    assert AuditEntry.objects.filter(action="schema.delete").count() == 1
    assert "value_schema" not in read(viewer, raw_topic)[0]


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"kind": "avro", "schema": "{not json"}, "schema", "not JSON"),
        (
            {
                "kind": "avro",
                "schema": '{"type": "record", "name": "X", "fields": [{"name": "a", "type": "Nope"}]}',
            },
            "schema",
            "does not parse",
        ),
        (
            {"kind": "protobuf", "schema": "message X { strin a = 1; }"},
            "schema",
            "does not compile",
        ),
        ({"kind": "protobuf", "schema": SHOP_PROTO}, "message", "Name the message"),
        (
            {"kind": "protobuf", "schema": SHOP_PROTO, "message": "shop.Nope"},
            "message",
            "no message",
        ),
        ({"kind": "xml", "schema": "<a/>"}, "kind", "avro, protobuf"),
        (
            {"kind": "avro", "schema": json.dumps({**AVRO_USER, "doc": "x" * 300_000})},
            "schema",
            "at most",
        ),
        *(
            ({"kind": "avro", "schema": json.dumps(schema)}, "schema", "items take no bytes")
            for schema in ZERO_BYTE_ITEM_ARRAYS
        ),
    ],
)
def test_a_schema_that_does_not_compile_is_a_400(console, raw_topic, body, field, words):
    resp = put_schema(console.login("operator"), raw_topic, "value", body)
    assert resp.status_code == 400, resp.content
    got = resp.json()
    assert field in got["errors"] and words in got["detail"], got
    assert "WARNING" not in got["detail"] and not got["detail"].endswith(".."), got


def test_upload_form_keeps_the_text_and_says_why(console, raw_topic):
    client = console.login("operator")
    resp = client.post(
        f"/messages/schemas?topic={raw_topic}",
        {"topic": raw_topic, "part": "value", "kind": "protobuf", "schema": "message X {"},
    )
    assert resp.status_code == 400
    html = resp.content.decode()
    assert "does not compile" in html and "message X {" in html
    resp = client.post(
        f"/messages/schemas?topic={raw_topic}",
        {"topic": raw_topic, "part": "value", "kind": "avro", "schema": json.dumps(RECURSIVE)},
    )
    assert resp.status_code == 302
    # hostile depth: 200 nested records decode to a note, not a crash
    rec = read(console.login("viewer"), raw_topic)[3]
    assert "deeper than 64 levels" in rec["value_schema"]["error"]


def test_payload_larger_than_the_bound_is_shown_raw(console, raw_topic, monkeypatch):
    from console.schemas import codec

    client = console.login("operator")
    put_schema(client, raw_topic, "value", {"kind": "avro", "schema": json.dumps(AVRO_USER)})
    monkeypatch.setattr(codec, "MAX_PAYLOAD_BYTES", 6)
    recs = read(client, raw_topic)
    assert recs[0]["value_schema"]["error"] is None  # 5 bytes
    assert "larger than 6" in recs[1]["value_schema"]["error"]  # carol: 7 bytes


def test_raw_value_starting_with_zero_falls_back_to_the_uploaded_schema(with_registry, raw_topic):
    operator = with_registry.login("operator")
    avro = {"kind": "avro", "schema": json.dumps(AVRO_USER)}
    assert put_schema(operator, raw_topic, "value", avro).status_code == 200
    proto = {"kind": "protobuf", "schema": SHOP_PROTO, "message": "shop.Customer"}
    assert put_schema(operator, raw_topic, "key", proto).status_code == 200
    rec = read(with_registry.login("viewer"), raw_topic)[4]
    # bytes 1-4 read as a schema id (0x80808080) are not in the registry: the uploaded schema
    assert rec["value_schema"]["badge"] == "Avro (value schema)"
    assert json.loads(rec["value_schema"]["json"]) == {"name": "", "visits": 2**30}
    # proto3 fields left at their defaults are shown, not dropped
    assert json.loads(rec["key_schema"]["json"]) == {"name": ""}


# ---------------------------------------------------------------- hostile schemas and payloads

DEEP_LIST = b"\x02" * 5000 + b"\x00"  # a Node linked list 5000 long


def test_a_deep_recursive_avro_value_does_not_kill_the_process():
    """fastavro's compiled reader has no depth check: this payload segfaulted the
    process; run in a subprocess so the old code fails the test, not the test run."""
    code = (
        "import json, sys\n"
        "from console.schemas import codec\n"
        f"c = codec.compile_avro({json.dumps(json.dumps(RECURSIVE))})\n"
        "try:\n"
        f"    codec.decode_avro(c, {DEEP_LIST!r})\n"
        "except codec.SchemaError as exc:\n"
        "    print(exc)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run
    assert run.stdout.decode().strip() == "the value nests deeper than 64 levels"


def test_a_deep_recursive_record_is_shown_raw_and_the_console_lives_on(console):
    topic = unique("deep")
    produce(console.cluster.bootstrap, topic, [(b"deep", DEEP_LIST), (b"short", b"\x02\x00")])
    operator = console.login("operator")
    avro = {"kind": "avro", "schema": json.dumps(RECURSIVE)}
    assert put_schema(operator, topic, "value", avro).status_code == 200
    for _ in range(2):  # a second request: the process is still there
        recs = read(console.login("viewer"), topic)
        assert recs[0]["value_schema"]["error"] == "the value nests deeper than 64 levels"
        assert recs[0]["value"] == DEEP_LIST.decode("latin-1")
        assert json.loads(recs[1]["value_schema"]["json"]) == {"next": {"next": None}}
    page = console.login("viewer").get(
        "/messages/", {"topic": topic, "partition": 0, "mode": "offset", "value": 0}
    )
    assert page.status_code == 200 and b"nests deeper than 64 levels" in page.content


def test_a_registry_schema_of_zero_byte_items_is_a_note_per_record(with_registry, registry):
    registry.schemas[ZERO_ITEMS_ID] = {"schema": json.dumps(ZERO_BYTE_ITEM_ARRAYS[0])}
    topic = unique("nulls")
    # a block of 1,000,000 nulls in 4 bytes (the old code built the list)
    claim = wire(ZERO_ITEMS_ID, b"\x80\x89\x7a\x00")
    produce(with_registry.cluster.bootstrap, topic, [(b"n", claim)])
    got = read(with_registry.login("viewer"), topic)[0]["value_schema"]
    assert got["json"] is None
    assert got["error"].startswith(f"schema {ZERO_ITEMS_ID}: the Avro schema has an array whose")
    assert "items take no bytes" in got["error"]


def test_a_deeply_nested_json_record_is_a_note_not_a_500(with_registry, registry):
    """json.loads raises RecursionError (not ValueError) on 100,000 brackets."""
    registry.schemas[DEEP_JSON_ID] = {"schema": '{"type": "array"}', "schemaType": "JSON"}
    topic = unique("deepjson")
    deep = wire(DEEP_JSON_ID, b"[" * 100_000)
    produce(
        with_registry.cluster.bootstrap, topic, [(b"d", deep), (b"ok", wire(DEEP_JSON_ID, b"[1]"))]
    )
    client = with_registry.login("viewer")
    recs = read(client, topic)
    assert recs[0]["value_schema"]["error"] == "the value nests deeper than 64 levels"
    assert recs[0]["value_schema"]["json"] is None
    assert json.loads(recs[1]["value_schema"]["json"]) == [1]
    page = client.get("/messages/", {"topic": topic, "partition": 0, "mode": "offset", "value": 0})
    assert page.status_code == 200 and b"nests deeper than 64 levels" in page.content
    found = client.get("/api/messages/search", {"topic": topic, "value": "[1]"})
    assert found.status_code == 200, found.content
    assert [r["offset"] for r in found.json()["records"]] == [1]


def test_an_uploaded_proto_compiles_once_and_a_new_upload_is_used_at_once(console):
    from console.schemas import codec

    topic = unique("once")
    produce(console.cluster.bootstrap, topic, [(b"\x0a\x01x", b"v")])  # field 1 = "x"
    operator = console.login("operator")

    def upload(field: str) -> None:
        text = f'// {topic}\nsyntax = "proto3";\nmessage K {{ string {field} = 1; }}\n'
        body = {"kind": "protobuf", "schema": text, "message": "K"}
        assert put_schema(operator, topic, "key", body).status_code == 200

    def key_json(client) -> dict:
        return json.loads(read(client, topic)[0]["key_schema"]["json"])

    upload("name")
    before = codec.protoc_runs()
    viewer = console.login("viewer")
    assert key_json(viewer) == {"name": "x"}
    page = viewer.get("/messages/", {"topic": topic, "partition": 0, "mode": "offset", "value": 0})
    assert page.status_code == 200 and b"Protobuf K" in page.content
    assert key_json(viewer) == {"name": "x"}
    assert codec.protoc_runs() - before == 1  # three reads, one compile
    upload("label")  # a changed schema is seen by the next page
    assert key_json(viewer) == {"label": "x"}


def test_a_proto_imports_only_the_well_known_types(console):
    from google.protobuf import timestamp_pb2

    topic = unique("imports")
    at = timestamp_pb2.Timestamp(seconds=1_700_000_000).SerializeToString()
    produce(console.cluster.bootstrap, topic, [(b"\x0a" + bytes([len(at)]) + at, b"v")])
    operator = console.login("operator")
    stamped = (
        'syntax = "proto3";\nimport "google/protobuf/timestamp.proto";\n'
        "message Stamped { google.protobuf.Timestamp at = 1; }\n"
    )
    body = {"kind": "protobuf", "schema": stamped, "message": "Stamped"}
    assert put_schema(operator, topic, "key", body).status_code == 200
    got = read(console.login("viewer"), topic)[0]["key_schema"]
    assert json.loads(got["json"]) == {"at": "2023-11-14T22:13:20Z"}
    # a file of the console's machine is neither imported nor shown (protoc read it as a
    # .proto and printed its lines: "stdio.h:23:1: Expected top-level statement")
    for header in ("stdio.h", "zlib.h"):
        text = f'syntax = "proto3";\nimport "{header}";\nmessage M {{ string a = 1; }}\n'
        resp = put_schema(operator, topic, "key", {**body, "schema": text, "message": "M"})
        assert resp.status_code == 400, resp.content
        detail = resp.json()["detail"]
        assert f'Import "{header}" was not found' in detail, detail
        assert f"{header}:" not in detail.replace(f'"{header}"', ""), detail
