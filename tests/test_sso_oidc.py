"""OpenID Connect sign-on against a real provider (django-oidc-provider in its own
process, tests/oidc_provider): the code flow with PKCE, state and nonce, driven over
HTTP through the console's live server; roles from the groups claim at every login;
spoiled id tokens, a wrong state and a user in no mapped group refused with a reason and
audited; without configuration the login page is as it was."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlparse

import pytest
import requests
from django.contrib.auth import get_user_model
from django.test import Client

from cluster_client import clusters
from console.models import AuditEntry, SSOIdentity
from console.roles import ADMIN, OPERATOR, VIEWER, role_of
from console.sso import accounts
from quill_stack.ports import free_port
from tests.sso_helpers import (
    PROVIDER_NAME,
    TokenRelay,
    apply_sso,
    oidc_env,
    op,  # noqa: F401 - the module's provider
    password,
    to_callback,
)

pytestmark = pytest.mark.django_db(transaction=True)
LANDING = "/account/tokens/"  # a page that needs a role and no cluster


@pytest.fixture
def console(settings, monkeypatch, op, live_server):  # noqa: F811
    apply_sso(settings, monkeypatch, oidc_env(op))
    return live_server.url


def sign_in(console: str, user: str, secret: str | None = None):
    """The whole flow; returns the last answer (the landing page or the login page)."""
    session = requests.Session()
    _, callback = to_callback(session, console, user, secret or password(user), LANDING)
    assert callback is not None, "the provider did not send the browser back"
    return session.get(callback)


def failures() -> list[str]:
    return list(
        AuditEntry.objects.filter(action="login.failed", target=f"login:{PROVIDER_NAME}")
        .order_by("id")
        .values_list("detail", flat=True)
    )


def test_login_page_unchanged_without_sso(db):
    client = Client()
    page = client.get("/accounts/login/")
    assert page.status_code == 200 and b"Sign in with" not in page.content
    assert client.get("/accounts/oidc/start").status_code == 404
    assert client.get("/accounts/oidc/callback?code=x&state=y").status_code == 404


def test_login_page_offers_the_provider(console):
    page = requests.get(f"{console}/accounts/login/", timeout=10)
    assert f"Sign in with {PROVIDER_NAME}" in page.text
    assert 'name="password"' in page.text  # the local form stays beside it


def test_authorize_request_carries_state_nonce_and_pkce(console, op):  # noqa: F811
    session = requests.Session()
    authorize, _ = to_callback(session, console, "vera", password("vera"), LANDING)
    query = parse_qs(urlparse(authorize).query)
    assert authorize.startswith(op.discovery["authorization_endpoint"])
    assert query["response_type"] == ["code"] and query["client_id"] == ["quill-console"]
    assert len(query["state"][0]) >= 32 and len(query["nonce"][0]) >= 32
    assert query["code_challenge_method"] == ["S256"] and len(query["code_challenge"][0]) == 43


@pytest.mark.parametrize(
    ("name", "role"), [("alice", ADMIN), ("oscar", OPERATOR), ("vera", VIEWER)]
)
def test_oidc_login_role_from_groups_claim(console, name, role):
    answer = sign_in(console, name)
    assert answer.status_code == 200 and answer.url == f"{console}{LANDING}"
    assert f"<span>{name}</span>" in answer.text
    user = get_user_model().objects.get(username=name)
    assert role_of(user) == role and not user.has_usable_password()
    entry = AuditEntry.objects.get(action="login", username=name)
    assert entry.detail.startswith(f"via OpenID Connect as {role} (from 127.0.0.1")


def test_oidc_role_follows_the_claim_at_each_login(console, op):  # noqa: F811
    op.set_groups("bob", ["quill-admins"])
    assert sign_in(console, "bob").url == f"{console}{LANDING}"
    assert role_of(get_user_model().objects.get(username="bob")) == ADMIN
    op.set_groups("bob", ["quill-operators"])
    assert sign_in(console, "bob").url == f"{console}{LANDING}"
    assert role_of(get_user_model().objects.get(username="bob")) == OPERATOR
    op.set_groups("bob", ["staff"])
    answer = sign_in(console, "bob")
    assert answer.url == f"{console}/accounts/login/"
    assert "bob signed in with Quill IdP but is in none of the groups" in answer.text
    assert role_of(get_user_model().objects.get(username="bob")) is None


def test_oidc_user_in_no_mapped_group_is_refused(console):
    answer = sign_in(console, "nora")
    assert answer.url == f"{console}/accounts/login/"
    text = "nora signed in with Quill IdP but is in none of the groups mapped to a console role"
    assert f"Sign-in with {PROVIDER_NAME} failed: {text}" in answer.text
    assert any(text in d for d in failures())


def test_oidc_never_takes_over_a_local_account(console):
    get_user_model().objects.create_superuser("admin", password="local-admin-pw-9")
    answer = sign_in(console, "admin")
    assert answer.url == f"{console}/accounts/login/"
    assert "admin is a local console account" in answer.text
    local = get_user_model().objects.get(username="admin")
    assert local.is_superuser and local.has_usable_password()


def test_provider_refuses_wrong_password_and_unknown_user(console):
    for user, secret in (("alice", "wrong-pw"), ("zed", "pw-zed-7")):
        session = requests.Session()
        _, callback = to_callback(session, console, user, secret, LANDING)
        assert callback is None  # the provider kept the browser on its login page
        assert not get_user_model().objects.filter(username=user).exists()


def test_wrong_state_is_refused(console):
    session = requests.Session()
    _, callback = to_callback(session, console, "alice", password("alice"), LANDING)
    answer = session.get(callback.replace("state=", "state=x"))
    assert answer.url == f"{console}/accounts/login/"
    assert "Sign-in with Quill IdP failed: OIDC callback state not found" in answer.text
    assert not get_user_model().objects.filter(username="alice").exists()
    assert "state not found" in failures()[-1]


def test_provider_error_is_shown(console):
    session = requests.Session()
    _, callback = to_callback(session, console, "alice", password("alice"), LANDING)
    state = parse_qs(urlparse(callback).query)["state"][0]
    answer = session.get(
        f"{console}/accounts/oidc/callback",
        params={"error": "access_denied", "error_description": "the user said no", "state": state},
    )
    assert answer.url == f"{console}/accounts/login/"
    assert "Sign-in with Quill IdP failed: the user said no" in answer.text


@pytest.fixture
def relay(op):  # noqa: F811
    relay = TokenRelay(op)
    yield relay
    relay.close()


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("flip-signature", "Signature verification failed"),
        ("other-key", "Signature verification failed"),
        ("alg-none", "signed with 'none', not RS256"),
        ("expired", "Signature has expired"),
        ("wrong-audience", "Audience doesn't match"),
    ],
)
def test_spoiled_id_token_is_refused(settings, monkeypatch, op, live_server, relay, mode, reason):  # noqa: F811
    apply_sso(settings, monkeypatch, oidc_env(op, token_endpoint=relay.url))
    relay.mode = mode
    answer = sign_in(live_server.url, "alice")
    assert answer.url == f"{live_server.url}/accounts/login/"
    assert "Sign-in with Quill IdP failed:" in answer.text
    assert reason in failures()[-1]
    assert not get_user_model().objects.filter(username="alice").exists()


def test_relay_passing_the_token_unchanged_logs_in(settings, monkeypatch, op, live_server, relay):  # noqa: F811
    """The relay alone is no reason for the refusals above."""
    apply_sso(settings, monkeypatch, oidc_env(op, token_endpoint=relay.url))
    assert sign_in(live_server.url, "alice").url == f"{live_server.url}{LANDING}"


def test_provider_unreachable_is_said(settings, monkeypatch, op, live_server):  # noqa: F811
    """The token endpoint down (after the browser came back): a sentence, no 500."""
    closed = f"http://127.0.0.1:{free_port()}/token"
    apply_sso(settings, monkeypatch, oidc_env(op, token_endpoint=closed))
    answer = sign_in(live_server.url, "alice")
    assert answer.status_code == 200 and answer.url == f"{live_server.url}/accounts/login/"
    said = "Sign-in with Quill IdP failed: the provider could not be reached or refused"
    assert said in answer.text
    assert "ConnectionError" in failures()[-1]


def test_refusals_do_not_lock_other_users_out(console, settings):
    """Login rate limiting (django-axes) counts per user name and address; failed OIDC
    callbacks carry no name, so they must not lock everyone at the address out."""
    for _ in range(settings.AXES_FAILURE_LIMIT + 1):
        assert sign_in(console, "nora").url == f"{console}/accounts/login/"
    assert sign_in(console, "alice").url == f"{console}{LANDING}"


@pytest.fixture
def two_clusters(settings):
    """Clusters "a" (the default) and "b"; the sign-on pages touch neither."""
    closed = [f"127.0.0.1:{free_port()}" for _ in range(2)]
    specs = [
        {"name": n, "bootstrap.servers": c, "zookeeper.connect": c}
        for n, c in zip("ab", closed, strict=True)
    ]
    settings.QUILL_CLUSTERS = clusters.parse(json.dumps(specs))


def test_sign_on_from_a_cluster_page_comes_back_to_it(console, two_clusters):
    """The login page and the OIDC callback belong to no cluster (the provider knows one
    redirect URI); next= keeps cluster b's page, where the user lands after login."""
    session = requests.Session()
    page = session.get(f"{console}/c/b/topics/")
    assert page.url == f"{console}/accounts/login/?next=/c/b/topics/"
    assert 'href="/accounts/oidc/start?next=/c/b/topics/"' in page.text
    moved = session.get(f"{console}/c/b/accounts/login/?next=/c/b/topics/", allow_redirects=False)
    assert moved.status_code == 302
    assert moved.headers["Location"] == "/accounts/login/?next=/c/b/topics/"
    authorize, callback = to_callback(session, console, "alice", password("alice"), "/c/b/topics/")
    redirect_uri = parse_qs(urlparse(authorize).query)["redirect_uri"][0]
    assert redirect_uri == f"{console}/accounts/oidc/callback"
    assert callback.startswith(f"{console}/accounts/oidc/callback?")
    landed = session.get(callback, allow_redirects=False)
    assert landed.status_code == 302 and landed.headers["Location"] == "/c/b/topics/"
    assert "Max-Age=28800;" in landed.headers["Set-Cookie"]  # QUILL_SSO_SESSION_AGE_S
    assert AuditEntry.objects.filter(action="login", username="alice").exists()


def test_oidc_never_enters_an_account_ldap_made(console):
    """The directory's alice (her account as an LDAP login leaves it) is not the
    provider's alice."""
    alice = get_user_model().objects.create_user("Alice")
    accounts.mark_sso(alice)
    accounts.remember(alice, accounts.LDAP, "uid=alice,ou=people,dc=quill,dc=test")
    answer = sign_in(console, "alice")
    assert answer.url == f"{console}/accounts/login/"
    said = "Alice is a console account of LDAP sign-on; it cannot be signed in with OpenID Connect."
    assert said in answer.text and said in failures()[-1]
    assert list(get_user_model().objects.values_list("username", flat=True)) == ["Alice"]
    assert role_of(alice) is None


def test_oidc_never_enters_the_account_of_another_subject(console, op):  # noqa: F811
    assert sign_in(console, "alice").url == f"{console}{LANDING}"
    identity = SSOIdentity.objects.get(user__username="alice")
    iss, sub = json.loads(identity.subject)
    assert identity.source == accounts.OIDC and iss == op.discovery["issuer"] and sub
    identity.subject = json.dumps([iss, "someone-else"])  # the name was another's first
    identity.save()
    answer = sign_in(console, "alice")
    assert answer.url == f"{console}/accounts/login/"
    said = "alice belongs to another identity at the provider (another issuer or subject)"
    assert said in answer.text and said in failures()[-1]


def test_provider_error_text_needs_a_pending_state(console):
    """The callback is open to anyone: an error without a sign-in of this browser
    pending gets a fixed reason, not the sender's text; the provider's text is capped."""
    junk = "call 555-0100 to restore access " * 60
    for params in ({}, {"state": "made-up"}):
        answer = requests.get(
            f"{console}/accounts/oidc/callback",
            params={"error": "access_denied", "error_description": junk, **params},
            timeout=10,
        )
        assert answer.url == f"{console}/accounts/login/"
        assert "555-0100" not in answer.text
        assert "belongs to no sign-in started in this browser" in answer.text
        assert "555-0100" not in failures()[-1]
    session = requests.Session()
    _, callback = to_callback(session, console, "alice", password("alice"), LANDING)
    state = parse_qs(urlparse(callback).query)["state"][0]
    params = {"error": "access_denied", "error_description": junk, "state": state}
    answer = session.get(f"{console}/accounts/oidc/callback", params=params)
    assert "Sign-in with Quill IdP failed: call 555-0100" in answer.text
    assert junk[:200] in failures()[-1] and junk[:201] not in failures()[-1]
    again = session.get(f"{console}/accounts/oidc/callback", params=params)  # used up
    assert "belongs to no sign-in started in this browser" in again.text
