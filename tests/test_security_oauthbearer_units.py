"""OAUTHBEARER's pieces without a broker: the RFC 7628 client initial response parser
under fuzzing (bounded inputs, only SaslAuthenticationError ever), the unsecured and
OIDC validators on tokens signed here, the JWKS read from a file: URL, and the
start-up refusals naming their keys."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.client.security import ClientSecurity, ClientSecurityError
from broker.security.jwks import JwksCache
from broker.security.oauthbearer import (
    OAuthBearerServer,
    TokenRefused,
    client_initial_response,
    parse_client_initial_response,
)
from broker.security.oauthbearer_tokens import JwtValidator, UnsecuredValidator
from broker.security.sasl_errors import SaslAuthenticationError
from broker.server.config import BrokerConfig, ConfigError
from tests.oauth_helpers import AUDIENCE, ISSUER, SigningKey, client_first, unsecured_token

BASE = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181"}
LISTENER = {"listeners": "PLAINTEXT://:0,SASL_PLAINTEXT://:0"}
PREFIX = "listener.name.sasl_plaintext.oauthbearer."
OAUTH_JAAS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
OIDC = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"

_kv_key = st.text(alphabet="abcdefXYZ", min_size=1, max_size=8).filter(lambda k: k != "auth")
_kv_value = st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2048))
def test_any_bytes_parse_or_fail_with_a_sasl_error(data):
    try:
        parsed = parse_client_initial_response(data)
    except SaslAuthenticationError:
        return
    assert parsed.token and len(parsed.token) < len(data)


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet="abcXYZ019-_.", min_size=1, max_size=300),
    st.text(alphabet="abc,=xyz", max_size=20),
    st.dictionaries(_kv_key, _kv_value, max_size=4),
)
def test_built_messages_parse_back(token, authzid, extensions):
    saslname = authzid.replace("=", "=3D").replace(",", "=2C")
    parsed = parse_client_initial_response(client_first(token, saslname, **extensions))
    assert (parsed.token, parsed.authorization_id, parsed.extensions) == (
        token,
        authzid,
        extensions,
    )


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=1, max_value=400), st.sampled_from([b"\x01", b"=", b",", b"a="]))
def test_long_repetitive_messages_are_refused_in_bounded_work(n, chunk):
    """Inputs built to make a backtracking parser slow (a regex without nested
    repetition reads them in one pass): each is refused."""
    message = b"n,," + b"\x01" + b"k=" + chunk * (n * 100)
    with pytest.raises(SaslAuthenticationError):
        parse_client_initial_response(message)


def _validate(validator, token):
    return asyncio.run(validator.validate(token))


def test_unsecured_validator_options():
    v = UnsecuredValidator(
        {
            "unsecuredValidatorPrincipalClaimName": "user",
            "unsecuredValidatorScopeClaimName": "roles",
            "unsecuredValidatorRequiredScope": "a b",
            "unsecuredValidatorAllowableClockSkewMs": "5000",
        }
    )
    token = _validate(v, unsecured_token(None, 2, user="ann", roles=["a", "b", "c"]))
    assert (token.principal_name, token.scope) == ("ann", frozenset("abc"))
    # expired 2 s ago, inside the 5 s skew
    past = time.time() - 60
    assert _validate(v, unsecured_token(None, -2, user="ann", roles=["a", "b"], iat=past))
    with pytest.raises(TokenRefused, match="minus allowable clock skew"):
        _validate(v, unsecured_token(None, -10, user="ann", roles=["a", "b"], iat=past))
    with pytest.raises(TokenRefused, match="was not after the Issued At"):
        _validate(v, unsecured_token(None, -2, user="ann", roles=["a", "b"]))
    with pytest.raises(TokenRefused) as refused:
        _validate(v, unsecured_token(None, user="ann", roles="a"))
    assert (refused.value.status, refused.value.scope) == ("insufficient_scope", "a b")
    with pytest.raises(TokenRefused, match="No principal name"):
        _validate(v, unsecured_token("sub-is-not-the-claim", roles=["a", "b"]))


def test_oidc_validator_with_a_file_jwks(tmp_path):
    key = SigningKey("k1", "ES256")
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [key.jwk, {"kty": "oct", "kid": "hmac", "k": "AA"}]}))
    cache = JwksCache(path.as_uri(), 3600000)
    v = JwtValidator(cache, ISSUER, [AUDIENCE, "other"], "client_id", "scp", 0)

    async def run():
        ok = await v.validate(key.token("ignored", client_id="svc-1", scp=["x"]))
        with pytest.raises(TokenRefused, match="ImmatureSignatureError"):
            await v.validate(key.token("a", client_id="svc-1", iat=2**40))
        with pytest.raises(TokenRefused, match="'HS256' is not allowed"):
            import jwt

            await v.validate(jwt.encode({"sub": "a"}, "s" * 32, headers={"kid": "hmac"}))
        cache.close()
        return ok

    token = asyncio.run(run())
    assert (token.principal_name, token.scope) == ("svc-1", frozenset({"x"}))
    assert cache.fetches == 1


def test_an_unreachable_jwks_refuses_tokens_with_the_reason():
    cache = JwksCache("http://127.0.0.1:9/jwks.json", 3600000)  # the discard port: closed
    server = OAuthBearerServer(JwtValidator(cache))

    async def run():
        first = await server.evaluate(client_first(SigningKey("k").token("a")))
        cache.close()
        with pytest.raises(SaslAuthenticationError) as failed:
            await server.evaluate(b"\x01")
        return first, failed.value

    challenge, failure = asyncio.run(run())
    assert challenge == b'{"status":"invalid_token"}'
    assert "could not be fetched" in failure.detail


@pytest.mark.parametrize(
    ("props", "named"),
    [
        ({PREFIX + "sasl.server.callback.handler.class": OIDC}, "jwks.endpoint.url"),
        ({PREFIX + "sasl.server.callback.handler.class": "com.acme.Handler"}, "com.acme.Handler"),
        (
            {
                PREFIX + "sasl.server.callback.handler.class": OIDC,
                "sasl.oauthbearer.jwks.endpoint.url": "ftp://127.0.0.1/jwks",
            },
            "sasl.oauthbearer.jwks.endpoint.url",
        ),
        (
            {PREFIX + "sasl.jaas.config": f'{OAUTH_JAAS} required unsecuredValidatorX="1";'},
            "unsecuredValidatorX",
        ),
        (
            {
                PREFIX + "sasl.jaas.config": (
                    f'{OAUTH_JAAS} required unsecuredValidatorAllowableClockSkewMs="-1";'
                )
            },
            "unsecuredValidatorAllowableClockSkewMs",
        ),
        (
            {PREFIX + "sasl.oauthbearer.clock.skew.seconds": "-3"},
            PREFIX + "sasl.oauthbearer.clock.skew.seconds",
        ),
        (
            {"listener.name.sasl_plaintext.plain.sasl.server.callback.handler.class": OIDC},
            "listener.name.sasl_plaintext.plain.sasl.server.callback.handler.class",
        ),
    ],
)
def test_oauthbearer_settings_that_cannot_work_refuse_start_up(props, named):
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        BrokerConfig({**BASE, **LISTENER, "sasl.enabled.mechanisms": "OAUTHBEARER", **props})


def test_an_oidc_listener_is_accepted_with_kafkas_keys():
    cfg = BrokerConfig(
        {
            **BASE,
            **LISTENER,
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            PREFIX + "sasl.jaas.config": f"{OAUTH_JAAS} required;",
            PREFIX + "sasl.server.callback.handler.class": OIDC.replace(
                ".OAuthBearerValidator", ".secured.OAuthBearerValidator"
            ),
            PREFIX + "sasl.oauthbearer.jwks.endpoint.url": "https://127.0.0.1/jwks.json",
            "sasl.oauthbearer.expected.audience": "a,b",
        }
    )
    assert cfg.unknown == []


def test_client_unsecured_tokens_from_both_families_keys():
    base = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER"}
    java = ClientSecurity.from_properties(
        {
            **base,
            "sasl.jaas.config": (
                f'{OAUTH_JAAS} required unsecuredLoginStringClaim_sub="alice" '
                'unsecuredLoginListClaim_scope="|a|b" unsecuredLoginLifetimeSeconds="60";'
            ),
        }
    )
    rdkafka = ClientSecurity.from_properties(
        {**base, "sasl.oauthbearer.config": "principal=alice scope=a,b lifeSeconds=60"}
    )
    validator = UnsecuredValidator({"unsecuredValidatorRequiredScope": "a b"})
    for security in (java, rdkafka):
        token = _validate(validator, security.oauthbearer.token())
        assert (token.principal_name, token.scope) == ("alice", frozenset("ab"))
        assert 59_000 <= token.lifetime_ms - time.time() * 1000 <= 60_000
    again = ClientSecurity.from_properties(
        {**base, "sasl.oauthbearer.config": java.oauthbearer.librdkafka_config()}
    )
    assert again.oauthbearer == rdkafka.oauthbearer
    message = client_initial_response("t.o.", "a,b", {"x": "1"})
    parsed = parse_client_initial_response(message)
    assert (parsed.token, parsed.authorization_id, parsed.extensions) == ("t.o.", "a,b", {"x": "1"})


@pytest.mark.parametrize(
    "props",
    [
        {},
        {"sasl.oauthbearer.config": "scope=a"},
        {"sasl.oauthbearer.config": "principal=a lifeSeconds=x"},
        {"sasl.oauthbearer.config": "principal=a nosuch=1"},
        {"sasl.jaas.config": f"{OAUTH_JAAS} required;"},
    ],
)
def test_client_oauthbearer_settings_that_cannot_make_a_token(props):
    with pytest.raises(ClientSecurityError):
        ClientSecurity.from_properties(
            {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER", **props}
        )


INTER_BROKER = {
    "listeners": "SASL_PLAINTEXT://:0",
    "security.inter.broker.protocol": "SASL_PLAINTEXT",
    "sasl.enabled.mechanisms": "OAUTHBEARER",
    "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
}


@pytest.mark.parametrize(
    ("props", "named"),
    [
        ({}, "unsecuredLoginStringClaim_sub"),
        (
            {
                PREFIX + "sasl.jaas.config": (
                    f'{OAUTH_JAAS} required unsecuredLoginStringClaim_sub="broker";'
                ),
                PREFIX + "sasl.server.callback.handler.class": OIDC,
                PREFIX + "sasl.oauthbearer.jwks.endpoint.url": "file:///jwks.json",
            },
            "validates OIDC tokens",
        ),
    ],
)
def test_oauthbearer_between_brokers_needs_unsecured_tokens(props, named):
    with pytest.raises(ConfigError, match=named):
        BrokerConfig({**BASE, **INTER_BROKER, **props})


def test_the_jwks_is_refreshed_in_the_background_and_kept_when_a_fetch_fails(tmp_path):
    """refresh.ms 50: the set is fetched again without any token asking; once the
    endpoint fails, the last good keys stay in use while retries back off."""
    first, second = SigningKey("k1", "ES256"), SigningKey("k2", "ES256")
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps({"keys": [first.jwk]}))
    cache = JwksCache(path.as_uri(), 50, 10, 40)

    async def run():
        assert await cache.key("k1") is not None
        path.write_text(json.dumps({"keys": [first.jwk, second.jwk]}))
        for _ in range(400):  # up to ~20 s
            if cache.fetches >= 2 and "k2" in cache.key_ids:
                break
            await asyncio.sleep(0.05)
        fetched = cache.fetches
        path.unlink()
        await asyncio.sleep(0.5)  # failed refreshes, retried
        kept = await cache.key("k2")
        cache.close()
        return fetched, kept

    fetched, kept = asyncio.run(run())
    assert fetched >= 2 and kept is not None


def test_a_java_oauthbearer_client_file_becomes_librdkafka_config(tmp_path):
    from confluent_kafka import Producer

    from cluster_client import client_security

    path = tmp_path / "client.properties"
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
        f'sasl.jaas.config={OAUTH_JAAS} required unsecuredLoginStringClaim_sub="alice" '
        'unsecuredLoginListClaim_scope=",kafka";\n'
    )
    conf = client_security.librdkafka_config({"QUILL_CLIENT_CONFIG": str(path)})
    assert conf == {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.config": "principalClaimName=sub principal=alice scope=kafka "
        "lifeSeconds=3600",
        "enable.sasl.oauthbearer.unsecure.jwt": "true",
    }
    Producer({"bootstrap.servers": "127.0.0.1:1", **conf}).flush(0)  # librdkafka takes it
