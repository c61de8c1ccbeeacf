"""The secure stack's generated parts, with real files, real TLS and a real ZooKeeper:
the CA and broker certificates, the SCRAM users' znodes in Kafka's bytes, the admin's
client properties, the brokers' server.properties, and the client credentials that the
console, workers and pipeline take from the environment."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import socket
import ssl
import subprocess
import sys
import threading
import uuid

import pytest
from confluent_kafka import Producer
from cryptography import x509
from kazoo.security import ACL, OPEN_ACL_UNSAFE, Id, Permissions

from broker.cli.common import read_properties_file
from broker.security.jaas import parse_jaas_file
from broker.server.config import BrokerConfig
from broker.zk.security import ZkCredentials, read_client_credentials, zk_client
from cluster_client import client_security
from pipeline.options import parse_source_options
from quill_stack import secure, tls
from quill_stack.process import ManagedProcess
from quill_stack.services import PROJECT_ROOT, ConfigError, StackConfig, build_stack
from quill_stack.state import write_private

SECURITY_ENV = [*client_security.ENV_PROPERTIES, client_security.CONFIG_FILE_ENV]


@pytest.fixture
def clean_env(monkeypatch):
    for name in SECURITY_ENV:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _stack(tmp_path, security="sasl_ssl", brokers=2) -> tuple[StackConfig, list]:
    """Build the stack and write every process's config files, as the supervisor does."""
    env = {"QUILL_STATE_DIR": str(tmp_path), "QUILL_SECURITY": security}
    env["QUILL_BROKERS"] = str(brokers)
    cfg = StackConfig.from_env(env)
    specs = build_stack(cfg)
    for spec in specs:
        ManagedProcess(spec).prepare()
    return cfg, specs


def _tls_handshake(server_pem, ca, dial: str) -> str:
    """A real TLS server holding `server_pem`; a client trusting only `ca` dials it by
    the name `dial`. Returns the negotiated version, or raises the client's error."""
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(server_pem)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve():
        conn, _ = listener.accept()
        try:
            with server_ctx.wrap_socket(conn, server_side=True) as tls_conn:
                tls_conn.sendall(b"ok")
        except (ssl.SSLError, OSError):
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        client_ctx = ssl.create_default_context(cafile=str(ca))
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with client_ctx.wrap_socket(raw, server_hostname=dial) as conn:
                assert conn.recv(2) == b"ok"
                return conn.version()
    finally:
        thread.join(10)
        listener.close()


# ---------------------------------------------------------------- certificates


def test_broker_certificates_verify_against_the_stack_ca(tmp_path):
    _stack(tmp_path)
    tls_dir = tmp_path / "tls"
    ca = x509.load_pem_x509_certificate((tls_dir / "ca.crt").read_bytes())
    for name in ("broker-1", "broker-2"):
        pem = (tls_dir / f"{name}.pem").read_bytes()
        assert pem.startswith(b"-----BEGIN PRIVATE KEY-----")  # Kafka's PEM keystore: PKCS#8
        leaf, chain_ca = x509.load_pem_x509_certificates(pem)
        leaf.verify_directly_issued_by(ca)
        assert chain_ca == ca
        san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert name in san.get_values_for_type(x509.DNSName)
        assert "localhost" in san.get_values_for_type(x509.DNSName)
        assert (tls_dir / f"{name}.pem").stat().st_mode & 0o077 == 0
    assert (tls_dir / "ca.key").stat().st_mode & 0o077 == 0
    # a real TLS handshake, host name checked, by every name a client uses
    for dial in ("127.0.0.1", "localhost", "broker-1"):
        assert _tls_handshake(tls_dir / "broker-1.pem", tls_dir / "ca.crt", dial).startswith("TLS")


def test_a_client_trusting_another_ca_or_dialing_another_name_is_refused(tmp_path):
    _stack(tmp_path)
    other = tmp_path / "other"
    tls.ensure_ca(other)
    with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
        _tls_handshake(tmp_path / "tls" / "broker-1.pem", other / "ca.crt", "127.0.0.1")
    with pytest.raises(ssl.SSLCertVerificationError, match="mismatch"):
        _tls_handshake(
            tmp_path / "tls" / "broker-1.pem", tmp_path / "tls" / "ca.crt", "example.org"
        )


def test_certificates_and_passwords_are_made_once(tmp_path):
    _stack(tmp_path)
    before = {p.name: p.read_bytes() for p in [*(tmp_path / "tls").iterdir()]}
    admin = (tmp_path / "secrets" / "admin.password").read_text()
    _stack(tmp_path)  # `quill-stack status` and a restart build the stack again
    assert {p.name: p.read_bytes() for p in (tmp_path / "tls").iterdir()} == before
    assert (tmp_path / "secrets" / "admin.password").read_text() == admin
    # a broker certificate that lacks a name it needs is made again, by the same CA
    pem = tls.ensure_server_cert(tmp_path / "tls", "broker-1", ["broker-1", "kafka.example"])
    assert pem.read_bytes() != before["broker-1.pem"]
    assert (tmp_path / "tls" / "ca.crt").read_bytes() == before["ca.crt"]


# ---------------------------------------------------------------- server.properties


def test_secure_brokers_get_sasl_ssl_scram_and_the_authorizer(tmp_path):
    cfg, specs = _stack(tmp_path)
    broker = next(s for s in specs if s.name == "broker-2")
    props = read_properties_file(str(tmp_path / "broker-2" / "server.properties"))
    port = cfg.broker_base_port + 1
    broker_password = (tmp_path / "secrets" / "broker.password").read_text()
    expected = {
        "listeners": f"SASL_SSL://127.0.0.1:{port}",
        "advertised.listeners": f"SASL_SSL://127.0.0.1:{port}",
        "listener.security.protocol.map": "SASL_SSL:SASL_SSL",
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="broker" password="{broker_password}";'
        ),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(tmp_path / "tls" / "broker-2.pem"),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tmp_path / "tls" / "ca.crt"),
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
        "super.users": "User:broker;User:admin",
    }
    assert {k: props.get(k) for k in expected} == expected
    assert (tmp_path / "broker-2" / "server.properties").stat().st_mode & 0o077 == 0
    assert broker.pre_start[-1][2:5] == ["quill_stack.secure", "users", "--state-dir"]
    for app in (s for s in specs if s.kind in ("worker", "console", "monitor")):
        assert app.env["QUILL_CLIENT_CONFIG"] == str(tmp_path / "client-admin.properties")


def test_zookeeper_and_redis_take_logins_and_the_apps_get_their_files(tmp_path):
    cfg, specs = _stack(tmp_path)
    zk_password = (tmp_path / "secrets" / "zookeeper-kafka.password").read_text()
    redis_password = (tmp_path / "secrets" / "redis.password").read_text()
    zoo_cfg = read_properties_file(str(tmp_path / "zookeeper" / "zoo.cfg"))
    assert zoo_cfg["authProvider.sasl"].endswith("SASLAuthenticationProvider")
    assert (zoo_cfg["enforce.auth.enabled"], zoo_cfg["enforce.auth.schemes"]) == ("true", "sasl")
    server = parse_jaas_file((tmp_path / "zookeeper" / "jaas.conf").read_text())["Server"][0]
    assert server.options == {"user_kafka": zk_password}
    client_jaas = tmp_path / "zookeeper-client.jaas"
    assert read_client_credentials(client_jaas) == ZkCredentials("kafka", zk_password)
    zookeeper = next(s for s in specs if s.name == "zookeeper")
    assert f"-Djava.security.auth.login.config={tmp_path}/zookeeper/jaas.conf" in zookeeper.argv
    redis_conf = (tmp_path / "redis" / "redis.conf").read_text()
    assert f'requirepass "{redis_password}"' in redis_conf
    for path in ("zookeeper/jaas.conf", "zookeeper-client.jaas", "redis/redis.conf"):
        assert (tmp_path / path).stat().st_mode & 0o077 == 0, path
    for broker in ("broker-1", "broker-2"):
        props = read_properties_file(str(tmp_path / broker / "server.properties"))
        assert props["java.security.auth.login.config"] == str(client_jaas)
        assert props["zookeeper.set.acl"] == "true"
    for app in (s for s in specs if s.kind in ("worker", "console", "monitor")):
        assert app.env["QUILL_JAVA_SECURITY_AUTH_LOGIN_CONFIG"] == str(client_jaas)
        assert app.env["QUILL_REDIS_PASSWORD_FILE"] == str(tmp_path / "secrets/redis.password")
        # the passwords themselves are in no env var (nor in `quill-stack status`)
        assert not any(p in v for v in app.env.values() for p in (zk_password, redis_password))


def test_the_secure_stack_serves_the_console_over_https_only(tmp_path):
    """daphne on Twisted's ssl endpoint with the console's keystore from the stack's CA,
    Secure cookies and HSTS on (QUILL_CONSOLE_TLS); plaintext keeps plain HTTP."""
    cfg, specs = _stack(tmp_path)
    console = next(s for s in specs if s.kind == "console")
    pem = tmp_path / "tls" / "console.pem"
    endpoint = f"ssl:port={cfg.console_port}:interface=127.0.0.1:privateKey={pem}:certKey={pem}"
    assert console.argv[-3:] == ["-e", endpoint, "console.asgi:application"]
    assert "-p" not in console.argv and console.env["QUILL_CONSOLE_TLS"] == "1"
    assert pem.stat().st_mode & 0o077 == 0
    assert _tls_handshake(pem, tmp_path / "tls" / "ca.crt", "localhost").startswith("TLS")
    _, plain = _stack(tmp_path / "plain", security="")
    console = next(s for s in plain if s.kind == "console")
    assert "-p" in console.argv and "QUILL_CONSOLE_TLS" not in console.env


def test_the_plaintext_stack_is_unchanged(tmp_path):
    cfg, specs = _stack(tmp_path, security="")
    assert cfg.security == "plaintext"
    props = read_properties_file(str(tmp_path / "broker-1" / "server.properties"))
    assert props["listeners"] == f"PLAINTEXT://127.0.0.1:{cfg.broker_base_port}"
    assert not any(k.startswith(("ssl.", "sasl.", "authorizer", "super.")) for k in props)
    assert all("QUILL_CLIENT_CONFIG" not in s.env for s in specs)
    assert not (tmp_path / "tls").exists() and not (tmp_path / "client-admin.properties").exists()
    assert "enforce.auth" not in (tmp_path / "zookeeper" / "zoo.cfg").read_text()
    assert "requirepass" not in (tmp_path / "redis" / "redis.conf").read_text()
    assert not any("QUILL_REDIS_PASSWORD_FILE" in s.env for s in specs)


@pytest.mark.parametrize("jwks", ["", "https://idp.example.test/jwks.json"])
def test_the_secure_stack_can_offer_oauthbearer(tmp_path, jwks):
    env = {
        "QUILL_STATE_DIR": str(tmp_path),
        "QUILL_SECURITY": "sasl_ssl",
        "QUILL_BROKERS": "1",
        "QUILL_SASL_MECHANISMS": "SCRAM-SHA-512,OAUTHBEARER",
        "QUILL_OAUTH_JWKS_URL": jwks,
        "QUILL_OAUTH_AUDIENCE": "quill",
    }
    for spec in build_stack(StackConfig.from_env(env)):
        ManagedProcess(spec).prepare()
    path = tmp_path / "broker-1" / "server.properties"
    props = read_properties_file(str(path))
    prefix = "listener.name.sasl_ssl.oauthbearer."
    assert props["sasl.enabled.mechanisms"] == "SCRAM-SHA-512,OAUTHBEARER"
    assert props["sasl.mechanism.inter.broker.protocol"] == "SCRAM-SHA-512"
    assert props[prefix + "sasl.jaas.config"] == (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
    )
    assert props.get(prefix + "sasl.oauthbearer.jwks.endpoint.url") == (jwks or None)
    assert props.get(prefix + "sasl.oauthbearer.expected.audience") == ("quill" if jwks else None)
    handler = props.get(prefix + "sasl.server.callback.handler.class", "")
    assert handler.endswith("OAuthBearerValidatorCallbackHandler") == bool(jwks)
    # the broker takes these keys (the listener's validator is built at start)
    assert BrokerConfig.load(path).unknown == []


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"QUILL_SASL_MECHANISMS": "OAUTHBEARER"}, "QUILL_SASL_MECHANISMS must be"),
        ({"QUILL_SASL_MECHANISMS": "SCRAM-SHA-512,PLAIN"}, "QUILL_SASL_MECHANISMS must be"),
        (
            {"QUILL_SECURITY": "plaintext", "QUILL_SASL_MECHANISMS": "SCRAM-SHA-512,OAUTHBEARER"},
            "QUILL_SECURITY=sasl_ssl only",
        ),
        ({"QUILL_OAUTH_JWKS_URL": "https://idp.test/jwks"}, "QUILL_OAUTH_JWKS_URL apply to"),
    ],
)
def test_sasl_mechanisms_the_stack_cannot_run_are_refused(tmp_path, env, message):
    base = {"QUILL_STATE_DIR": str(tmp_path), "QUILL_SECURITY": "sasl_ssl"}
    with pytest.raises(ConfigError, match=message):
        StackConfig.from_env({**base, **env})


def test_an_unknown_security_mode_is_refused_by_name(tmp_path):
    with pytest.raises(ConfigError, match="QUILL_SECURITY must be one of plaintext, sasl_ssl"):
        _stack(tmp_path, security="ssl_please")


# ---------------------------------------------------------------- client properties


def test_admin_properties_parse_and_librdkafka_accepts_them(tmp_path, clean_env):
    _stack(tmp_path)
    path = tmp_path / "client-admin.properties"
    assert path.stat().st_mode & 0o077 == 0
    props = read_properties_file(str(path))  # what --command-config reads
    assert props == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "admin",
        "sasl.password": (tmp_path / "secrets" / "admin.password").read_text(),
        "ssl.ca.location": str(tmp_path / "tls" / "ca.crt"),
    }
    clean_env.setenv("QUILL_CLIENT_CONFIG", str(path))
    assert client_security.librdkafka_config() == props
    # librdkafka checks the mechanism and loads the CA file when the client is made
    Producer({"bootstrap.servers": "127.0.0.1:1", **props}).flush(0)


def test_env_vars_map_to_client_properties_and_win_over_the_file(tmp_path, clean_env):
    path = tmp_path / "client.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.username=file-user\n")
    ca = tmp_path / "ca.crt"
    ca.write_text("not checked here")
    clean_env.setenv("QUILL_CLIENT_CONFIG", str(path))
    clean_env.setenv("QUILL_SECURITY_PROTOCOL", "sasl_ssl")
    clean_env.setenv("QUILL_SASL_MECHANISM", "scram-sha-256")
    clean_env.setenv("QUILL_SASL_PASSWORD", "s3cret")
    clean_env.setenv("QUILL_SSL_CA_LOCATION", str(ca))
    assert client_security.librdkafka_config() == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "file-user",
        "sasl.password": "s3cret",
        "ssl.ca.location": str(ca),
    }


def test_a_java_client_properties_file_becomes_librdkafka_config(tmp_path, clean_env):
    """Kafka users keep their files: the Java client's names become librdkafka's."""
    _stack(tmp_path)
    ca = tmp_path / "tls" / "ca.crt"
    path = tmp_path / "java.properties"
    path.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="alice-secret";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={ca}\n"
        "client.id=reports\n"
    )
    clean_env.setenv("QUILL_CLIENT_CONFIG", str(path))
    conf = client_security.librdkafka_config()
    assert conf == {
        "client.id": "reports",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": "alice-secret",
        "ssl.ca.location": str(ca),
    }
    Producer({"bootstrap.servers": "127.0.0.1:1", **conf}).flush(0)  # librdkafka takes it
    assert client_security.client_security().username == "alice"


def test_no_env_means_plaintext_clients_as_before(clean_env):
    assert client_security.librdkafka_config() == {}
    assert client_security.client_security().security_protocol == "PLAINTEXT"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"QUILL_SECURITY_PROTOCOL": "TLS"},
            "client security from QUILL_SECURITY_PROTOCOL: security.protocol=TLS is not one of",
        ),
        (
            {"QUILL_SECURITY_PROTOCOL": "SASL_SSL", "QUILL_SASL_MECHANISM": "GSSAPI"},
            "QUILL_SASL_MECHANISM: sasl.mechanism=GSSAPI: use one of PLAIN, SCRAM-SHA-256",
        ),
        (
            {"QUILL_SECURITY_PROTOCOL": "SASL_SSL", "QUILL_SASL_MECHANISM": "PLAIN"},
            "security.protocol=SASL_SSL needs sasl.username and sasl.password",
        ),
        (
            {"QUILL_SECURITY_PROTOCOL": "SSL", "QUILL_SSL_CA_LOCATION": "/nonexistent/ca.crt"},
            "QUILL_SSL_CA_LOCATION: ssl.ca.location: no such file /nonexistent/ca.crt",
        ),
        ({"QUILL_CLIENT_CONFIG": "/nonexistent/client.properties"}, "QUILL_CLIENT_CONFIG="),
    ],
)
def test_bad_client_security_env_is_named(clean_env, env, message):
    for name, value in env.items():
        clean_env.setenv(name, value)
    with pytest.raises(client_security.ClientSecurityError, match=re.escape(message)):
        client_security.librdkafka_config()


def test_the_pipeline_source_takes_the_env_credentials_and_options_win(tmp_path, clean_env):
    _stack(tmp_path)
    clean_env.setenv("QUILL_CLIENT_CONFIG", str(tmp_path / "client-admin.properties"))
    base = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t"}
    opts = parse_source_options(base)
    assert opts.kafka["security.protocol"] == "SASL_SSL"
    assert opts.kafka["sasl.username"] == "admin"
    opts = parse_source_options({**base, "kafka.sasl.username": "spark"})
    assert opts.kafka["sasl.username"] == "spark"


def test_the_console_settings_take_the_env_credentials(tmp_path):
    _stack(tmp_path)
    env = {"QUILL_CLIENT_CONFIG": str(tmp_path / "client-admin.properties"), "PATH": "/usr/bin"}
    env["QUILL_STATE_DIR"] = str(tmp_path)
    code = (
        "from django.conf import settings; print(settings.QUILL_CLIENT_SECURITY['sasl.username'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", f"import django, os; django.setup(); {code}"],
        env={**env, "DJANGO_SETTINGS_MODULE": "console.settings"},
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "admin"


# ---------------------------------------------------------------- SCRAM users in ZooKeeper


def _kafka_scram(password: str, salt: bytes, iterations: int) -> tuple[bytes, bytes]:
    """stored_key and server_key as Kafka's ScramFormatter computes them (RFC 5802)."""
    salted = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, iterations)
    client_key = hmac.digest(salted, b"Client Key", "sha512")
    return hashlib.sha512(client_key).digest(), hmac.digest(salted, b"Server Key", "sha512")


@pytest.fixture
def chroot_zk(secured_zookeeper, tmp_path):
    """A chroot on the secured ZooKeeper, whose `kafka` password the stack in tmp_path
    takes as its own (the stack's ZooKeeper would have the stack's)."""
    secret = secure.password_path(tmp_path, secure.ZOOKEEPER_SECRET)
    write_private(secret, secured_zookeeper.credentials.password.encode())
    chroot = f"/quill-secure-{uuid.uuid4().hex[:10]}"
    client = zk_client(secured_zookeeper.address, 10, secured_zookeeper.credentials)
    client.start(timeout=30)
    client.ensure_path(chroot)
    yield secured_zookeeper.address + chroot, client, chroot
    client.delete(chroot, recursive=True)
    client.stop()
    client.close()


def _run_users(state_dir, zk_connect) -> str:
    argv = [sys.executable, "-m", "quill_stack.secure", "users", "--state-dir", str(state_dir)]
    done = subprocess.run(
        [*argv, "--zookeeper", zk_connect],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stderr


def test_scram_users_are_written_in_kafkas_format_once(tmp_path, chroot_zk):
    zk_connect, zk, chroot = chroot_zk
    _stack(tmp_path)
    # a quota that an operator set before must stay
    quota = b'{"version":1,"config":{"producer_byte_rate":"1024"}}'
    zk.create(f"{chroot}/config/users/admin", quota, makepath=True, acl=OPEN_ACL_UNSAFE)
    out = _run_users(tmp_path, zk_connect)
    assert "SCRAM users written to /config/users: broker, admin" in out
    for user in ("broker", "admin"):
        raw, _ = zk.get(f"{chroot}/config/users/{user}")
        value = json.loads(raw)["config"]["SCRAM-SHA-512"]
        if user == "broker":  # the bytes kafka-configs --zookeeper wrote
            assert raw == b'{"version":1,"config":{"SCRAM-SHA-512":"' + value.encode() + b'"}}'

        m = re.fullmatch(
            r"salt=([^,]+),stored_key=([^,]+),server_key=([^,]+),iterations=4096", value
        )
        assert m, value
        salt, stored, server = (base64.b64decode(g) for g in m.groups())
        password = (tmp_path / "secrets" / f"{user}.password").read_text()
        assert (stored, server) == _kafka_scram(password, salt, 4096)
    admin = json.loads(zk.get(f"{chroot}/config/users/admin")[0])["config"]
    assert admin["producer_byte_rate"] == "1024"
    # the credentials are the brokers' principal's alone (Kafka's sensitive paths)
    only_kafka = [ACL(Permissions.ALL, Id("sasl", secure.ZOOKEEPER_USER))]
    assert zk.get_acls(f"{chroot}/config/users/broker")[0] == only_kafka
    changes = sorted(zk.get_children(f"{chroot}/config/changes"))
    assert len(changes) == 2 and all(re.fullmatch(r"config_change_\d{10}", c) for c in changes)
    paths = {json.loads(zk.get(f"{chroot}/config/changes/{c}")[0])["entity_path"] for c in changes}
    assert paths == {"users/broker", "users/admin"}
    # a restart finds them in place: nothing written, no notification
    assert "none (already there)" in _run_users(tmp_path, zk_connect)
    assert sorted(zk.get_children(f"{chroot}/config/changes")) == changes
