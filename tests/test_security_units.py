"""The security pieces on their own: JAAS configs, ssl.principal.mapping.rules, client
security properties in both families' keys, SASL mechanisms driven by real clients'
messages (scramp's client), and the start-up refusals naming their keys."""

from __future__ import annotations

import pytest
from scramp import ScramClient

from broker.client.security import ClientSecurity, ClientSecurityError
from broker.security.credential_cache import CredentialCache
from broker.security.jaas import parse_jaas_config
from broker.security.principal_mapping import NoMatchingRule, SslPrincipalMapper
from broker.security.sasl_errors import SaslAuthenticationError
from broker.security.sasl_plain import PlainServer
from broker.security.sasl_scram import ScramServer
from broker.security.scram_credentials import ScramCredential
from broker.server.config import BrokerConfig, ConfigError

BASE = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181"}


def test_jaas_config_options_and_plain_users():
    cfg = parse_jaas_config(
        "org.apache.kafka.common.security.plain.PlainLoginModule required\n"
        '  username="admin" password="a\\"b;c" user_admin="x" user_alice=bare;'
    )
    assert cfg.flag == "required"
    assert (cfg.username, cfg.password) == ("admin", 'a"b;c')
    assert cfg.plain_users() == {"admin": "x", "alice": "bare"}


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Module",
        "Module mandatory;",
        'Module required username="x"',  # no closing semicolon
        'Module required username="x"; Other required;',
        "Module required =x;",
    ],
)
def test_bad_jaas_configs_are_refused(text):
    with pytest.raises(ValueError):
        parse_jaas_config(text)


def test_principal_mapping_rules_as_kafka():
    mapper = SslPrincipalMapper(
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1@$2/L,"
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, DEFAULT"
    )
    assert mapper.name("CN=kafka-svc,OU=ServiceUsers,O=Org") == "kafka-svc"
    assert mapper.name("CN=Duke,OU=JavaSoft,O=Sun") == "duke@javasoft"
    assert mapper.name("OU=x,cn=abc.def,O=y,L=z") == "ABC.DEF"
    assert mapper.name("O=nothing") == "O=nothing"
    with pytest.raises(NoMatchingRule):
        SslPrincipalMapper("RULE:^CN=(.*)$/$1/").name("O=other")
    with pytest.raises(ValueError):
        SslPrincipalMapper("RULE:[unclosed/$1/")
    with pytest.raises(ValueError):
        SslPrincipalMapper("NONSENSE")


def test_client_security_from_librdkafka_and_java_keys():
    rd = ClientSecurity.from_properties(
        {
            "bootstrap.servers": "x:9092",
            "security.protocol": "sasl_ssl",
            "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": "alice",
            "sasl.password": "secret",
            "ssl.ca.location": "/tmp/ca.crt",
        }
    )
    assert (rd.security_protocol, rd.sasl_mechanism, rd.username, rd.password) == (
        "SASL_SSL",
        "SCRAM-SHA-512",
        "alice",
        "secret",
    )
    assert rd.ssl_cafile == "/tmp/ca.crt" and rd.tls and rd.sasl
    java = ClientSecurity.from_properties(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
            'required username="bob" password="pw";',
            "ssl.truststore.type": "PEM",
            "ssl.endpoint.identification.algorithm": "",
        }
    )
    assert (java.username, java.password, java.ssl_check_hostname) == ("bob", "pw", False)
    assert ClientSecurity.from_properties({}).security_protocol == "PLAINTEXT"


@pytest.mark.parametrize(
    ("props", "named"),
    [
        ({"security.protocol": "TLS"}, "security.protocol"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"}, "sasl.mechanism"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, "sasl.username"),
        ({"ssl.truststore.type": "BKS"}, "ssl.truststore.type"),
        ({"ssl.cipher.suites": "x"}, "ssl.cipher.suites"),
    ],
)
def test_client_security_refuses_what_it_cannot_honour(props, named):
    with pytest.raises(ClientSecurityError, match=named.replace(".", r"\.")):
        ClientSecurity.from_properties(props)


def test_plain_server():
    ok = PlainServer({"alice": "pw"})
    assert ok.evaluate(b"\0alice\0pw") == b"" and ok.complete and ok.authorization_id == "alice"
    assert PlainServer({"alice": "pw"}).evaluate(b"alice\0alice\0pw") == b""
    for token in (b"\0alice\0nope", b"\0bob\0pw", b"x\0alice\0pw", b"\0\0pw", b"\0alice\0", b"a"):
        with pytest.raises(SaslAuthenticationError):
            PlainServer({"alice": "pw"}).evaluate(token)
    with pytest.raises(SaslAuthenticationError):
        ok.evaluate(b"\0alice\0pw")  # one exchange per server


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_server_against_scramp_client(mechanism):
    cache = CredentialCache()
    stored = ScramCredential.from_password(mechanism, "pw").to_config_value()
    cache.update("a,b=c", {mechanism: stored, "producer_byte_rate": "10"})
    server = ScramServer(mechanism, cache)
    client = ScramClient([mechanism], "a,b=c", "pw")  # sent as a=2Cb=3Dc
    client.set_server_first(server.evaluate(client.get_client_first().encode()).decode())
    client.set_server_final(server.evaluate(client.get_client_final().encode()).decode())
    assert server.complete and server.authorization_id == "a,b=c"
    cache.update("a,b=c", {})  # the user is gone: refused at the first message
    client = ScramClient([mechanism], "a,b=c", "pw")
    with pytest.raises(SaslAuthenticationError):
        ScramServer(mechanism, cache).evaluate(client.get_client_first().encode())


@pytest.mark.parametrize(
    ("props", "named"),
    [
        (
            {
                "listeners": "PLAINTEXT://:0,SASL_PLAINTEXT://:0",
                "sasl.enabled.mechanisms": "SCRAM-SHA-256",
                "listener.name.sasl_plaintext.scram-sha-256.connections.max.reauth.ms": "-1",
            },
            "listener.name.sasl_plaintext.scram-sha-256.connections.max.reauth.ms",
        ),
        (
            {"listener.name.plaintext.gssapi.connections.max.reauth.ms": "1000"},
            "listener.name.plaintext.gssapi",
        ),
        ({"listener.name.plaintext.ssl.cipher.suites": "x"}, "listener.name.plaintext"),
        ({"listener.name.nosuch.sasl.enabled.mechanisms": "PLAIN"}, "listener.name.nosuch"),
        (
            {
                "listeners": "PLAINTEXT://:0,SASL_PLAINTEXT://:0",
                "sasl.enabled.mechanisms": "PLAIN",
            },
            "listener.name.sasl_plaintext.plain.sasl.jaas.config",
        ),
        (
            {
                "listeners": "PLAINTEXT://:0,SASL_PLAINTEXT://:0",
                "sasl.enabled.mechanisms": "SCRAM-SHA-256,GSSAPI",
            },
            "sasl.enabled.mechanisms",
        ),
        (
            {
                "listeners": "SASL_PLAINTEXT://:0",
                "security.inter.broker.protocol": "SASL_PLAINTEXT",
                "sasl.enabled.mechanisms": "SCRAM-SHA-256",
            },
            "sasl.mechanism.inter.broker.protocol",
        ),
        (
            {
                "listeners": "SASL_PLAINTEXT://:0",
                "security.inter.broker.protocol": "SASL_PLAINTEXT",
                "sasl.enabled.mechanisms": "SCRAM-SHA-256",
                "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
            },
            "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config",
        ),
        (
            {
                "listeners": "PLAINTEXT://:0,SSL://:0",
                "ssl.keystore.type": "BKS",
                "ssl.keystore.location": "/nonexistent",
            },
            "ssl.keystore.type",
        ),
        (
            {
                "listeners": "PLAINTEXT://:0,SSL://:0",
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": "/nonexistent",
            },
            "ssl.keystore.location",
        ),
        (
            {
                "connection.failed.authentication.delay.ms": "600000",
                "connections.max.idle.ms": "600000",
            },
            "connection.failed.authentication.delay.ms",
        ),
    ],
)
def test_security_settings_that_cannot_work_refuse_start_up(props, named):
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        BrokerConfig({**BASE, **props})


def test_a_plain_listener_with_its_jaas_config_is_accepted():
    cfg = BrokerConfig(
        {
            **BASE,
            "listeners": "PLAINTEXT://:0,SASL_PLAINTEXT://:0",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
                'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";'
            ),
        }
    )
    assert cfg.unknown == []


def _kcat_style_final(mechanism: str, password: str, first_bare: str, server_first: str, r: str):
    """A client-final message with nonce ``r``, its proof computed as RFC 5802 says."""
    import base64
    import hashlib
    import hmac

    name = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[mechanism]
    attrs = dict(a.split("=", 1) for a in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(
        name, password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"])
    )
    client_key = hmac.digest(salted, b"Client Key", name)
    without_proof = f"c=biws,r={r}"
    auth = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.digest(hashlib.new(name, client_key).digest(), auth, name)
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def test_scram_final_nonce_that_ends_with_the_servers_is_accepted_as_kafka_does():
    """librdkafka 1.x sends r=<client nonce><server's r>; Kafka checks endsWith."""
    mechanism = "SCRAM-SHA-256"
    cache = CredentialCache()
    cache.update("u", {mechanism: ScramCredential.from_password(mechanism, "pw").to_config_value()})
    for prefix, accepted in (("cnonce", True), ("", True), ("x", True)):
        server = ScramServer(mechanism, cache)
        server_first = server.evaluate(b"n,,n=u,r=cnonce").decode()
        r = dict(a.split("=", 1) for a in server_first.split(","))["r"]
        final = _kcat_style_final(mechanism, "pw", "n=u,r=cnonce", server_first, prefix + r)
        assert server.evaluate(final) and server.complete is accepted
    server = ScramServer(mechanism, cache)
    server_first = server.evaluate(b"n,,n=u,r=cnonce").decode()
    r = dict(a.split("=", 1) for a in server_first.split(","))["r"]
    with pytest.raises(SaslAuthenticationError):  # a nonce that does not end with the server's
        server.evaluate(_kcat_style_final(mechanism, "pw", "n=u,r=cnonce", server_first, r + "x"))
    server = ScramServer(mechanism, cache)
    server_first = server.evaluate(b"n,,n=u,r=cnonce").decode()
    r = dict(a.split("=", 1) for a in server_first.split(","))["r"]
    with pytest.raises(SaslAuthenticationError):  # the right nonce, the wrong password
        server.evaluate(_kcat_style_final(mechanism, "nope", "n=u,r=cnonce", server_first, r))


def test_pem_text_without_line_breaks_still_loads(tmp_path):
    """ssl.keystore.certificate.chain / .key / ssl.truststore.certificates as a
    properties file gives them after a backslash continuation: one line each."""
    from broker.security.ssl_factory import server_context
    from quill_stack import tls

    issued = tls.issue(tmp_path, "broker", ("localhost",))

    def one_line(path) -> str:
        return " ".join(path.read_text().split("\n"))

    ctx = server_context(
        {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.certificate.chain": one_line(issued.cert),
            "ssl.keystore.key": one_line(issued.key),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.certificates": one_line(tmp_path / "ca.crt"),
            "ssl.client.auth": "required",
        }
    )
    assert len(ctx.get_ca_certs()) == 1
