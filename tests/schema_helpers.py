"""A schema registry for the console's Avro / Protobuf tests (issue 29), and encoders
for Confluent's wire format.

Karapace (Aiven's Python implementation of the registry API) is not installable from
PyPI here and Confluent's registry is Java, so this is a minimal HTTP server speaking
the one call the console makes, GET /schemas/ids/{id} -> {"schema", "schemaType"}, with
optional basic auth; ids it does not hold answer 404 as the real registry does, and
ids in `garbage` answer a body that is not JSON. Payloads are encoded by the libraries
(fastavro, protobuf from protoc's descriptors), framed as Confluent's serializers do."""

from __future__ import annotations

import base64
import io
import json
import os
import struct
import subprocess
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

AVRO_USER = {
    "type": "record",
    "name": "User",
    "namespace": "shop",
    "fields": [{"name": "name", "type": "string"}, {"name": "visits", "type": "int"}],
}
SHOP_PROTO = """syntax = "proto3";
package shop;
message Customer { string name = 1; }
message Order {
  string id = 1;
  int64 cents = 2;
  message Line { string sku = 1; int32 qty = 2; }
  repeated Line lines = 3;
}
"""


class Registry:
    def __init__(self, schemas: dict[int, dict], auth: tuple[str, str] | None = None):
        self.schemas, self.garbage, self.auth = dict(schemas), set(), auth
        self.requests: list[str] = []
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                registry.requests.append(self.path)
                if registry.auth is not None:
                    want = "Basic " + base64.b64encode(":".join(registry.auth).encode()).decode()
                    if self.headers.get("Authorization") != want:
                        return self._send(401, {"error_code": 401, "message": "Unauthorized"})
                prefix = "/schemas/ids/"
                if not self.path.startswith(prefix) or not self.path[len(prefix) :].isdigit():
                    return self._send(404, {"error_code": 404, "message": "HTTP 404 Not Found"})
                sid = int(self.path[len(prefix) :])
                if sid in registry.garbage:
                    return self._send(200, b"<html>gateway says hello</html>")
                if sid not in registry.schemas:
                    return self._send(404, {"error_code": 40403, "message": "Schema not found"})
                return self._send(200, registry.schemas[sid])

            def _send(self, status, body):
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def avro_bytes(schema: dict, record: dict) -> bytes:
    import fastavro

    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), record)
    return buf.getvalue()


def wire(schema_id: int, payload: bytes, indexes: bytes = b"") -> bytes:
    """Confluent's framing: magic 0, the id (4 bytes, big-endian), Protobuf's message
    indexes (zig-zag varints: b"\\x00" is the first message), the payload."""
    return b"\x00" + struct.pack(">I", schema_id) + indexes + payload


def proto_classes(text: str, names: list[str]) -> dict:
    """{full name: message class} for a .proto text, compiled by protoc."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "t.proto"), "w") as f:
            f.write(text)
        out = os.path.join(tmp, "t.pb")
        subprocess.run(["protoc", f"-I{tmp}", f"--descriptor_set_out={out}", "t.proto"], check=True)
        with open(out, "rb") as f:
            fds = descriptor_pb2.FileDescriptorSet.FromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fds.file[0])
    classes = {}
    for name in names:
        classes[name] = message_factory.GetMessageClass(pool.FindMessageTypeByName(name))
    return classes


def produce(bootstrap: str, topic: str, items: list[tuple[bytes | None, bytes]]) -> None:
    """A one-partition topic holding (key, value) records, written by confluent-kafka."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the topic exists
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for key, value in items:
        producer.produce(topic, key=key, value=value, partition=0)
    assert producer.flush(30) == 0
