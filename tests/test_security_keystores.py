"""Kafka's keystore and truststore types on a real broker: JKS (made by Java's keytool),
PKCS12 and PEM, each read with its passwords; confluent-kafka produces and consumes over
SSL with a client certificate the truststore verifies. A wrong password stops start-up
with the key named; a leaf signed with SHA-1 is served, with a warning, as Kafka does;
the broker's own client reads the same truststore types."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.serialization import (
    BestAvailableEncryption,
    load_pem_private_key,
    pkcs12,
)

from broker.client.security import ClientSecurity, ClientSecurityError
from broker.security.ssl_factory import broker_client_context
from quill_stack import ports, tls
from tests.group_helpers import unique
from tests.security_helpers import round_trip

pytestmark = pytest.mark.cluster

STORE_PW, KEY_PW, TRUST_PW = "store-secret", "key-secret", "trust-secret"
HOSTS = ("localhost", "127.0.0.1")


def _keytool(cwd: Path, *args: str) -> None:
    subprocess.run(["keytool", *args], cwd=cwd, check=True, capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """The broker's key in PKCS12 (cryptography), JKS (keytool, from the PKCS12, its key
    under its own password) and PEM; the CA in a JKS and a PKCS12 truststore (keytool)."""
    d = tmp_path_factory.mktemp("stores")
    broker = tls.issue(d, "broker", HOSTS)
    key = load_pem_private_key(broker.key.read_bytes(), None)
    cert = x509.load_pem_x509_certificate(broker.cert.read_bytes())
    ca = x509.load_pem_x509_certificate((d / "ca.crt").read_bytes())
    p12 = d / "broker.p12"
    p12.write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"broker", key, cert, [ca], BestAvailableEncryption(STORE_PW.encode())
        )
    )
    _keytool(d, "-importkeystore", "-noprompt", "-srckeystore", p12.name, "-srcstoretype",
             "PKCS12", "-srcstorepass", STORE_PW, "-destkeystore", "broker.jks",
             "-deststoretype", "JKS", "-deststorepass", STORE_PW, "-destkeypass", KEY_PW)  # fmt: skip
    for kind, name in (("JKS", "trust.jks"), ("PKCS12", "trust.p12")):
        _keytool(d, "-importcert", "-noprompt", "-alias", "ca", "-file", "ca.crt", "-keystore",
                 name, "-storetype", kind, "-storepass", TRUST_PW)  # fmt: skip
    return SimpleNamespace(
        dir=d,
        ca=d / "ca.crt",
        pem=broker.keystore,
        p12=p12,
        jks=d / "broker.jks",
        trust={"JKS": d / "trust.jks", "PKCS12": d / "trust.p12", "PEM": d / "ca.crt"},
        alice=tls.issue(d, "alice"),
        sha1=_sha1_keystore(d),
    )


def _sha1_keystore(d: Path) -> Path:
    """A PEM keystore whose leaf the CA signed with SHA-1 (OpenSSL's CLI still signs so;
    cryptography refuses to)."""

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True, timeout=60)

    openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", "sha1.key", "-subj", "/O=Quill/CN=sha1-broker", "-out", "sha1.csr")  # fmt: skip
    (d / "sha1.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    openssl("x509", "-req", "-sha1", "-in", "sha1.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "30", "-extfile", "sha1.ext", "-out", "sha1.crt")  # fmt: skip
    leaf = x509.load_pem_x509_certificate((d / "sha1.crt").read_bytes())
    assert isinstance(leaf.signature_hash_algorithm, hashes.SHA1)
    keystore = d / "sha1.pem"
    keystore.write_bytes(b"".join((d / n).read_bytes() for n in ("sha1.key", "sha1.crt", "ca.crt")))
    return keystore


def _store_settings(stores, kind: str) -> dict[str, str]:
    keystore = {
        "JKS": {"ssl.keystore.location": str(stores.jks), "ssl.key.password": KEY_PW},
        "PKCS12": {"ssl.keystore.location": str(stores.p12)},
        "PEM": {"ssl.keystore.location": str(stores.pem)},
    }[kind]
    password = {} if kind == "PEM" else {"ssl.keystore.password": STORE_PW}
    trust = {} if kind == "PEM" else {"ssl.truststore.password": TRUST_PW}
    return {
        "ssl.keystore.type": kind,
        **keystore,
        **password,
        "ssl.truststore.type": kind,
        "ssl.truststore.location": str(stores.trust[kind]),
        **trust,
    }


def _ssl_cluster(cluster_factory, settings: dict[str, str], **extra: str):
    ssl_port = ports.free_port()
    listeners = lambda _b, port: f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{ssl_port}"  # noqa: E731
    cluster = cluster_factory(
        1,
        **{
            "listeners": listeners,
            "advertised.listeners": listeners,
            "listener.name.ssl.ssl.client.auth": "required",
            **settings,
            **extra,
        },
    )
    cluster.ssl_bootstrap = f"127.0.0.1:{ssl_port}"
    return cluster


def _client_conf(cluster, stores, **extra) -> dict:
    return {
        "bootstrap.servers": cluster.ssl_bootstrap,
        "security.protocol": "SSL",
        "ssl.ca.location": str(stores.ca),
        "ssl.certificate.location": str(stores.alice.cert),
        "ssl.key.location": str(stores.alice.key),
        **extra,
    }


@pytest.mark.parametrize("kind", ["JKS", "PKCS12", "PEM"])
def test_each_store_type_serves_ssl_clients(cluster_factory, stores, kind):
    cluster = _ssl_cluster(cluster_factory, _store_settings(stores, kind))
    topic = unique(f"ks-{kind.lower()}")
    values = [b"%s-%d" % (kind.encode(), i) for i in range(5)]
    conf = _client_conf(cluster, stores)
    got = round_trip(conf, topic, values, unique("g"))
    assert [v for _, v in got] == values
    assert [o for o, _ in got] == list(range(5))
    # the broker's own client, from the same settings, and ClientSecurity from the
    # truststore settings alone, both verify the broker
    settings = _store_settings(stores, kind)
    assert _handshake(broker_client_context(settings), cluster.ssl_bootstrap)
    client_props = {k: v for k, v in settings.items() if k.startswith("ssl.truststore.")} | {
        "security.protocol": "SSL"
    }
    security = ClientSecurity.from_properties(client_props)
    assert _handshake(security.ssl_context(), cluster.ssl_bootstrap, client_cert=stores.alice)


def _handshake(ctx, address: str, client_cert=None) -> bool:
    if client_cert is not None:
        ctx.load_cert_chain(client_cert.cert, client_cert.key)
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as tls_sock:
            return tls_sock.version() is not None


def _start(tmp_path, settings: dict[str, str]) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "broker"]
    props = {
        "broker.id": "1",
        "log.dirs": str(tmp_path / "logs"),
        "listeners": f"PLAINTEXT://127.0.0.1:{ports.free_port()},SSL://127.0.0.1:{ports.free_port()}",
        "zookeeper.connect": "127.0.0.1:1",
        **settings,
    }
    for key, value in props.items():
        args += ["--override", f"{key}={value}"]
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("kind", "wrong", "named"),
    [
        ("JKS", {"ssl.keystore.password": "nope"}, "ssl.keystore.password"),
        ("JKS", {"ssl.key.password": "nope"}, "ssl.key.password"),
        ("PKCS12", {"ssl.keystore.password": "nope"}, "ssl.keystore.password"),
        ("PKCS12", {"ssl.truststore.password": "nope"}, "ssl.truststore.password"),
        ("JKS", {"ssl.keystore.type": "BKS"}, "ssl.keystore.type"),
    ],
)
def test_a_wrong_password_stops_start_up_with_the_key_named(tmp_path, stores, kind, wrong, named):
    result = _start(tmp_path, {**_store_settings(stores, kind), **wrong})
    assert result.returncode == 2, result.stderr[-2000:]
    assert named in result.stderr, result.stderr[-2000:]


def test_client_security_names_a_wrong_truststore_password(stores):
    with pytest.raises(ClientSecurityError, match=r"ssl\.truststore\.password"):
        ClientSecurity.from_properties(
            {
                "ssl.truststore.type": "JKS",
                "ssl.truststore.location": str(stores.trust["JKS"]),
                "ssl.truststore.password": "nope",
            }
        )


def test_a_sha1_signed_leaf_is_served_with_a_warning(cluster_factory, stores):
    cluster = _ssl_cluster(
        cluster_factory,
        {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(stores.sha1),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(stores.ca),
        },
    )
    broker = cluster.brokers[0]
    assert "is signed with SHA1" in broker.log_tail(200)
    # OpenSSL 3 clients refuse a SHA-1 signature at their default security level too
    conf = _client_conf(cluster, stores, **{"ssl.cipher.suites": "DEFAULT:@SECLEVEL=0"})
    topic = unique("ks-sha1")
    got = round_trip(conf, topic, [b"one", b"two"], unique("g"))
    assert got == [(0, b"one"), (1, b"two")]
