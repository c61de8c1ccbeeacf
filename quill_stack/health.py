"""Health checks, each returning (healthy, detail) and never raising.

The supervisor, `quill-stack status`, tests/conftest.py and the docker-compose
healthchecks (`python -m quill_stack.health ...`) all use these.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import socket
import ssl
import struct
import sys
import time
from http.client import HTTPConnection, HTTPException, HTTPSConnection
from pathlib import Path

from broker.protocol.framing import encode_frame
from livefeed.keys import DEFAULT_CLUSTER, HEARTBEAT, cluster_key
from quill_stack.redis_auth import password_from_env, redis_url_from_env, with_password

Health = tuple[bool, str]

API_VERSIONS_KEY = 18


def _exchange(
    host: str, port: int, payload: bytes, timeout: float, want: int, ca: str | None = None
) -> bytes:
    """Send `payload`, read `want` bytes; through TLS verified against `ca` when given."""
    sock = socket.create_connection((host, port), timeout=timeout)
    try:
        if ca:  # wrap_socket takes over the plain socket's descriptor
            sock = ssl.create_default_context(cafile=ca).wrap_socket(sock, server_hostname=host)
        sock.sendall(payload)
        data = b""
        while len(data) < want:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
        return data
    finally:
        sock.close()


def zk_command(host: str, port: int, command: str, timeout: float = 2.0) -> str:
    """Send a ZooKeeper four-letter word (ruok, srvr, stat, mntr) and return the reply."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(command.encode())
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def zookeeper(host: str, port: int, timeout: float = 2.0) -> Health:
    try:
        reply = zk_command(host, port, "ruok", timeout)
    except OSError as exc:
        return False, f"ruok: {exc}"
    if reply == "imok":
        return True, "imok"
    return False, f"ruok answered {reply!r} (is ruok in 4lw.commands.whitelist?)"


def _resp(*words: bytes) -> bytes:
    """One Redis command in RESP (any bytes in its words, a password's too)."""
    return b"*%d\r\n" % len(words) + b"".join(b"$%d\r\n%s\r\n" % (len(w), w) for w in words)


def redis(host: str, port: int, timeout: float = 2.0, password: str | None = None) -> Health:
    """PING answered PONG (after AUTH with `password`, when Redis has requirepass)."""
    request, expect = _resp(b"PING"), b"+PONG"
    if password:
        request, expect = _resp(b"AUTH", password.encode()) + request, b"+OK\r\n+PONG"
    try:
        reply = _exchange(host, port, request, timeout, want=len(expect))
    except OSError as exc:
        return False, f"PING: {exc}"
    if reply.startswith(expect):
        return True, "PONG"
    return False, f"PING answered {reply[:60]!r}"


def api_versions_request(correlation_id: int, client_id: bytes = b"quill-health") -> bytes:
    """ApiVersions v0: int16 api_key, int16 version, int32 correlation id, client id."""
    body = struct.pack(">hhih", API_VERSIONS_KEY, 0, correlation_id, len(client_id)) + client_id
    return encode_frame(body)


def api_versions(host: str, port: int, timeout: float = 2.0, ca: str | None = None) -> Health:
    """True when the port answers an ApiVersions v0 request with our correlation id; on a
    TLS listener (`ca`: the CA to verify it) ApiVersions is answered before SASL, as in
    Kafka."""
    correlation_id = 0x5157494C  # "QWIL"
    request = api_versions_request(correlation_id)
    try:
        reply = _exchange(host, port, request, timeout, want=10, ca=ca)
    except OSError as exc:
        return False, f"ApiVersions: {exc}"
    if len(reply) < 10:
        return False, f"ApiVersions: short reply {reply!r}"
    size, got_id, error_code = struct.unpack(">iih", reply[:10])
    if got_id != correlation_id:
        return False, f"ApiVersions: correlation id {got_id} != {correlation_id}"
    return True, f"ApiVersions ok (error_code {error_code})"


def _zk_client(zk_connect: str, timeout: float, credentials=None):
    """A started ZooKeeper client logged in with ``credentials``, else with the JAAS file
    of QUILL_JAVA_SECURITY_AUTH_LOGIN_CONFIG when set (compose healthchecks)."""
    from broker.zk.security import credentials_from_env, zk_client

    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    credentials = credentials or credentials_from_env()
    client = zk_client(zk_connect, timeout, credentials, connection_retry=None)
    client.start(timeout=timeout)
    return client


def registered_broker_ids(zk_connect: str, timeout: float = 3.0) -> set[int]:
    """Broker ids registered under /brokers/ids (zk_connect may carry a chroot)."""
    from kazoo.exceptions import NoNodeError

    from broker.zk.znodes import BrokerIdsZNode

    client = _zk_client(zk_connect, timeout)
    try:
        return {int(child) for child in client.get_children(BrokerIdsZNode.path)}
    except NoNodeError:
        return set()
    finally:
        client.stop()
        client.close()


def broker_registration(zk_connect: str, broker_id: int, timeout: float = 3.0, credentials=None):
    """(JSON of /brokers/ids/<id>, its creation time in seconds), or None."""
    from kazoo.exceptions import NoNodeError

    from broker.zk.znodes import BrokerIdZNode

    client = _zk_client(zk_connect, timeout, credentials)
    try:
        data, stat = client.get(BrokerIdZNode.path(broker_id))
    except NoNodeError:
        return None
    finally:
        client.stop()
        client.close()
    return json.loads(data or b"{}"), stat.created


def broker(
    host: str,
    port: int,
    broker_id: int,
    zk_connect: str,
    since: float | None = None,
    timeout: float = 3.0,
    ca: str | None = None,
    zk_credentials=None,
) -> Health:
    """Registered at /brokers/ids/<id> in ZooKeeper (read with the SASL login
    `zk_credentials` when given) AND answering ApiVersions (over TLS verified against
    `ca` when given).

    With `since` (a process start time), a registration older than that, left by a
    killed predecessor whose ZooKeeper session has not expired yet, does not count.
    """
    try:
        found = broker_registration(zk_connect, broker_id, timeout, zk_credentials)
    except Exception as exc:  # kazoo raises several unrelated types on connect failure
        return False, f"ZooKeeper {zk_connect}: {exc or type(exc).__name__}"
    if found is None:
        return False, f"not registered at /brokers/ids/{broker_id}"
    if since is not None and found[1] < since - 1.0:
        return False, f"/brokers/ids/{broker_id} is a previous process's registration"
    return api_versions(host, port, timeout, ca)


def http_ok(
    host: str, port: int, path: str = "/healthz", timeout: float = 3.0, ca: Path | None = None
) -> Health:
    """GET `path` answers 200; over HTTPS when `ca` (the certificate must chain to it)."""
    if ca is None:
        conn = HTTPConnection(host, port, timeout=timeout)
    else:
        context = ssl.create_default_context(cafile=str(ca))
        context.check_hostname = False  # a wildcard listen address is no name to check
        conn = HTTPSConnection(host, port, timeout=timeout, context=context)
    try:
        conn.request("GET", path, headers={"Host": "localhost"})
        status = conn.getresponse().status
    except (OSError, HTTPException) as exc:
        return False, f"GET {path}: {exc}"
    finally:
        conn.close()
    return status == 200, f"GET {path} -> {status}"


@functools.lru_cache(maxsize=8)
def _celery(redis_url: str):
    from celery import Celery

    return Celery("quill-health", broker=redis_url, backend=None)


def celery_worker(redis_url: str, node_name: str, timeout: float = 2.0) -> Health:
    """The worker `node_name` answers Celery's broadcast ping over Redis."""
    try:
        replies = _celery(redis_url).control.ping(destination=[node_name], timeout=timeout)
    except Exception as exc:  # kombu raises various connection errors
        return False, f"celery ping: {exc}"
    if any(node_name in reply for reply in replies):
        return True, "pong"
    return False, f"no ping reply from {node_name}"


def cluster_names(environ=None) -> list[str]:
    """The console's clusters: QUILL_CLUSTERS's names, or the one cluster "default"."""
    environ = os.environ if environ is None else environ
    if not environ.get("QUILL_CLUSTERS", "").strip():
        return [DEFAULT_CLUSTER]
    from cluster_client.clusters import clusters_from_env  # only a multi-cluster console

    return list(clusters_from_env(environ))


def monitor(redis_url: str, names: list[str], max_age: float = 10.0) -> Health:
    """Every cluster's monitor sampled in the last `max_age` seconds: its heartbeat in
    Redis. No Django: as a healthcheck this runs every few seconds for the stack's life."""
    import redis as redis_py

    try:
        client = redis_py.Redis.from_url(redis_url, socket_timeout=3, socket_connect_timeout=3)
        stamps = client.mget([cluster_key(name, HEARTBEAT) for name in names])
    except (redis_py.RedisError, OSError) as exc:
        return False, f"reading the monitor's heartbeat: {exc}"
    now, lines, ok = time.time(), [], True
    for name, raw in zip(names, stamps, strict=True):
        age = None if raw is None else max(0.0, now - float(raw))
        if age is None or age > max_age:
            ok = False
            last = "never" if age is None else f"{age:.1f} s ago"
            lines.append(f"{name}: no monitor sample in the last {max_age:g} s (last: {last})")
        else:
            lines.append(f"{name}: monitor sampled {age:.1f} s ago")
    return ok, "; ".join(lines)


def main(argv: list[str] | None = None) -> int:
    """`python -m quill_stack.health KIND ...`: exit 0 when healthy (compose healthchecks)."""
    parser = argparse.ArgumentParser(prog="python -m quill_stack.health")
    parser.add_argument(
        "kind", choices=["zookeeper", "redis", "broker", "http", "worker", "monitor"]
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int)
    parser.add_argument("--broker-id", type=int)
    parser.add_argument("--zookeeper", help="zookeeper.connect, for kind=broker")
    parser.add_argument(
        "--redis-url", help="for kind=worker and monitor (monitor: default QUILL_REDIS_URL)"
    )
    parser.add_argument(
        "--ssl-ca", help="kind=broker or http on a TLS listener: the CA to verify it"
    )
    parser.add_argument("--node", default="quill-worker@" + socket.gethostname())
    args = parser.parse_args(argv)
    if args.kind == "zookeeper":
        ok, detail = zookeeper(args.host, args.port or 2181)
    elif args.kind == "redis":  # the password: QUILL_REDIS_PASSWORD_FILE / _PASSWORD
        ok, detail = redis(args.host, args.port or 6379, password=password_from_env())
    elif args.kind == "broker":
        ok, detail = broker(
            args.host, args.port or 9092, args.broker_id, args.zookeeper, ca=args.ssl_ca
        )
    elif args.kind == "http":
        ok, detail = http_ok(args.host, args.port or 8000, ca=args.ssl_ca)
    elif args.kind == "monitor":  # every cluster of QUILL_CLUSTERS, or "default"
        url = with_password(args.redis_url, password_from_env()) if args.redis_url else None
        try:
            names = cluster_names()
        except Exception as exc:  # ImproperlyConfigured: a QUILL_CLUSTERS the console refuses
            names, ok, detail = [], False, f"QUILL_CLUSTERS: {exc}"
        if names:
            ok, detail = monitor(url or redis_url_from_env(), names)
    else:
        ok, detail = celery_worker(with_password(args.redis_url, password_from_env()), args.node)
    print(json.dumps({"healthy": ok, "detail": detail}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
