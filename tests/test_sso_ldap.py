"""LDAP sign-on against a real slapd: roles from group membership at every login,
refusals with their reason, the directory down, local logins beside it, the audit."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured
from django.test import Client, RequestFactory

from console.models import AuditEntry, SSOIdentity
from console.roles import ADMIN, OPERATOR, ROLES, VIEWER, role_of
from console.sso import accounts, config
from console.sso.backends import LDAPRoleBackend
from tests.sso_helpers import (
    apply_sso,
    group_dn,
    ldap_env,
    log_in_form,
    password,
    slapd,  # noqa: F401 - the module's directory
    tls_files,
    user_dn,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def ldap_console(settings, monkeypatch, slapd):  # noqa: F811
    apply_sso(settings, monkeypatch, ldap_env(slapd))
    return slapd


def logged_in_as(client) -> str | None:
    user_id = client.session.get("_auth_user_id")
    return get_user_model().objects.get(pk=user_id).username if user_id else None


def test_config_roles_are_the_consoles():
    assert config.ROLES == ROLES


@pytest.mark.parametrize(
    ("name", "role"), [("alice", ADMIN), ("oscar", OPERATOR), ("vera", VIEWER)]
)
def test_ldap_login_role_from_groups(ldap_console, name, role):
    client = Client()
    answer = log_in_form(client, name, password(name))
    assert answer.status_code == 302 and answer["Location"] == "/"
    assert logged_in_as(client) == name
    user = get_user_model().objects.get(username=name)
    assert role_of(user) == role
    assert not user.has_usable_password() and not user.is_superuser
    assert user.email == f"{name}@quill.test"
    entry = AuditEntry.objects.filter(action="login", username=name).get()
    assert entry.detail.startswith(f"via LDAP as {role} (from 127.0.0.1")
    if role == ADMIN:  # the users page says whose role the directory sets
        users = client.get("/users/").content.decode()
        assert "single sign-on</span>" in users and "from their groups at each login" in users
        change = {"action": "role", "username": name, "role": VIEWER}
        refused = client.post("/users/action", change).content.decode()
        assert "signs in with single sign-on: the role comes from their groups" in refused
        assert role_of(get_user_model().objects.get(username=name)) == ADMIN


def test_ldap_user_deactivated_in_the_console_is_refused(ldap_console):
    assert log_in_form(Client(), "vera", password("vera")).status_code == 302
    get_user_model().objects.filter(username="vera").update(is_active=False)
    client = Client()
    answer = log_in_form(client, "vera", password("vera"))
    assert answer.status_code == 200 and logged_in_as(client) is None
    assert b"vera is deactivated in the console." in answer.content


@pytest.mark.parametrize(("name", "secret"), [("alice", "wrong-pw"), ("zed", "pw-zed-7")])
def test_ldap_wrong_password_or_unknown_user(ldap_console, name, secret):
    client = Client()
    answer = log_in_form(client, name, secret)
    assert answer.status_code == 200
    assert b"Wrong username or password." in answer.content
    assert logged_in_as(client) is None
    entry = AuditEntry.objects.get(action="login.failed", target=f"login:{name}")
    assert entry.detail.startswith("wrong user name or password") and not entry.ok


def test_ldap_user_in_no_mapped_group_is_refused(ldap_console):
    client = Client()
    answer = log_in_form(client, "nora", password("nora"))
    assert answer.status_code == 200
    assert logged_in_as(client) is None
    text = "nora signed in with LDAP but is in none of the groups mapped to a console role"
    assert text.encode() in answer.content
    assert role_of(get_user_model().objects.get(username="nora")) is None
    assert text in AuditEntry.objects.get(action="login.failed", target="login:nora").detail


def test_ldap_role_follows_group_changes_at_each_login(ldap_console):
    """bob: viewer and admin -> admin; out of the admins -> viewer at the next login;
    out of every mapped group -> refused, his role taken away."""
    bob = user_dn("bob")

    def leave(group: str) -> None:
        ldap_console.modify(
            f"dn: {group_dn(group)}\nchangetype: modify\ndelete: member\nmember: {bob}\n"
        )

    def join(group: str) -> None:
        ldap_console.modify(
            f"dn: {group_dn(group)}\nchangetype: modify\nadd: member\nmember: {bob}\n"
        )

    User = get_user_model()
    assert log_in_form(Client(), "bob", password("bob")).status_code == 302
    assert role_of(User.objects.get(username="bob")) == ADMIN
    leave("quill-admins")
    try:
        assert log_in_form(Client(), "bob", password("bob")).status_code == 302
        assert role_of(User.objects.get(username="bob")) == VIEWER
        leave("quill-viewers")
        try:
            answer = log_in_form(Client(), "bob", password("bob"))
            assert answer.status_code == 200 and b"in none of the groups" in answer.content
            assert role_of(User.objects.get(username="bob")) is None
        finally:
            join("quill-viewers")
    finally:
        join("quill-admins")


def test_ldap_never_takes_over_an_api_only_account(ldap_console):
    """An account without a password (API tokens only) is not the directory's either."""
    get_user_model().objects.create_user("oscar")  # unusable password
    client = Client()
    answer = log_in_form(client, "oscar", password("oscar"))
    assert answer.status_code == 200 and logged_in_as(client) is None
    assert b"oscar is a local console account" in answer.content


def test_ldap_never_takes_over_a_local_account(ldap_console):
    """The directory has an `admin`; the console's local `admin` stays the local one."""
    local = get_user_model().objects.create_superuser("admin", password="local-admin-pw-9")
    client = Client()
    answer = log_in_form(client, "admin", password("admin"))
    assert answer.status_code == 200 and logged_in_as(client) is None
    assert b"admin is a local console account" in answer.content
    assert log_in_form(client, "admin", "local-admin-pw-9").status_code == 302
    assert logged_in_as(client) == "admin"
    local.refresh_from_db()
    assert local.is_superuser and local.has_usable_password()


def test_ldap_down_is_said_and_local_logins_still_work(ldap_console):
    get_user_model().objects.create_user("local-op", password="local-op-pw-9")
    ldap_console.stop()
    try:
        client = Client()
        answer = log_in_form(client, "alice", password("alice"))
        assert answer.status_code == 200 and logged_in_as(client) is None
        said = "The console could not use the LDAP directory (Can&#x27;t contact LDAP server)"
        assert said.encode() in answer.content
        entry = AuditEntry.objects.get(action="login.failed", target="login:alice")
        assert "(Can't contact LDAP server): directory accounts cannot log in" in entry.detail
        assert log_in_form(client, "local-op", "local-op-pw-9").status_code == 302
        assert logged_in_as(client) == "local-op"
    finally:
        ldap_console.start()
    assert log_in_form(Client(), "alice", password("alice")).status_code == 302


def _tls_env(slapd, how: str, ca) -> dict:  # noqa: F811
    """The directory over StartTLS or ldaps, its certificate checked against ``ca``."""
    env = {**ldap_env(slapd), "QUILL_LDAP_CA_FILE": str(ca)}
    if how == "starttls":
        env["QUILL_LDAP_START_TLS"] = "true"
    else:
        env["QUILL_LDAP_SERVER_URI"] = slapd.ldaps_uri
    return env


@pytest.mark.parametrize("how", ["starttls", "ldaps"])
def test_ldap_over_tls_with_the_directorys_ca(settings, monkeypatch, slapd, how):  # noqa: F811
    apply_sso(settings, monkeypatch, _tls_env(slapd, how, slapd.ca))
    client = Client()
    assert log_in_form(client, "oscar", password("oscar")).status_code == 302
    assert role_of(get_user_model().objects.get(username="oscar")) == OPERATOR


@pytest.mark.parametrize("how", ["starttls", "ldaps"])
def test_ldap_tls_refuses_a_certificate_of_another_ca(
    settings,
    monkeypatch,
    slapd,  # noqa: F811
    tmp_path,
    how,
):
    other_ca, _, _ = tls_files(tmp_path, "elsewhere")
    apply_sso(settings, monkeypatch, _tls_env(slapd, how, other_ca))
    client = Client()
    answer = log_in_form(client, "oscar", password("oscar"))
    assert answer.status_code == 200 and logged_in_as(client) is None
    assert b"The console could not use the LDAP directory" in answer.content


def test_sso_misconfiguration_names_the_variable(monkeypatch):
    monkeypatch.setenv("QUILL_LDAP_SERVER_URI", "ldap://127.0.0.1:1/")
    with pytest.raises(ImproperlyConfigured, match="QUILL_LDAP_USER_SEARCH_BASE"):
        config.ldap_settings()
    monkeypatch.setenv("QUILL_LDAP_USER_SEARCH_BASE", "ou=people,dc=x")
    monkeypatch.setenv("QUILL_LDAP_GROUP_SEARCH_BASE", "ou=groups,dc=x")
    with pytest.raises(ImproperlyConfigured, match="QUILL_LDAP_ADMIN_GROUPS"):
        config.ldap_settings()
    monkeypatch.setenv("QUILL_LDAP_GROUP_TYPE", "groupOfWonders")
    monkeypatch.setenv("QUILL_LDAP_VIEWER_GROUPS", "cn=v,ou=groups,dc=x")
    with pytest.raises(ImproperlyConfigured, match="QUILL_LDAP_GROUP_TYPE must be one of"):
        config.ldap_settings()
    monkeypatch.setenv("QUILL_OIDC_CLIENT_ID", "console")
    with pytest.raises(ImproperlyConfigured, match="QUILL_OIDC_ISSUER"):
        config.oidc_settings()


def test_higher_role_wins_for_a_group_named_twice(monkeypatch):
    monkeypatch.setenv("QUILL_OIDC_VIEWER_GROUPS", "devs; ops")
    monkeypatch.setenv("QUILL_OIDC_ADMIN_GROUPS", "ops")
    assert config.role_groups("QUILL_OIDC", fold_case=False) == {"devs": VIEWER, "ops": ADMIN}


def test_ldap_never_enters_an_account_oidc_made(ldap_console):
    """The account an OpenID provider's alice got (as its login leaves it) is not the
    directory's alice, whatever the case of the name typed."""
    alice = get_user_model().objects.create_user("alice")
    accounts.mark_sso(alice)
    accounts.remember(alice, accounts.OIDC, '["https://idp.test", "alice-sub"]')
    for typed in ("alice", "ALICE"):
        client = Client()
        answer = log_in_form(client, typed, password("alice"))
        assert answer.status_code == 200 and logged_in_as(client) is None
        said = "alice is a console account of OpenID Connect sign-on; it cannot be signed in with LDAP."
        assert said.encode() in answer.content
        entry = AuditEntry.objects.get(action="login.failed", target=f"login:{typed}")
        assert said in entry.detail and not entry.ok
    assert SSOIdentity.objects.get(user=alice).source == accounts.OIDC


def test_ldap_account_remembers_its_source(ldap_console):
    assert log_in_form(Client(), "oscar", password("oscar")).status_code == 302
    identity = SSOIdentity.objects.get(user__username="oscar")
    assert (identity.source, identity.subject) == (accounts.LDAP, user_dn("oscar"))
    assert log_in_form(Client(), "oscar", password("oscar")).status_code == 302


def test_ldap_empty_password_is_refused(ldap_console):
    """An empty password would be an unauthenticated bind, which many servers accept;
    django-auth-ldap refuses it before binding (the form requires a password too)."""
    request = RequestFactory().post("/accounts/login/")
    assert LDAPRoleBackend().authenticate(request, username="alice", password="") is None
    assert LDAPRoleBackend().authenticate(request, username="alice", password=password("alice"))
    assert LDAPRoleBackend().authenticate(request, username="alice", password="") is None
    client = Client()
    answer = log_in_form(client, "alice", "")
    assert answer.status_code == 200 and logged_in_as(client) is None


def test_sso_session_lasts_quill_sso_session_age(ldap_console, settings, monkeypatch):
    """Roles come from the groups at each login: an SSO session ends after
    QUILL_SSO_SESSION_AGE_S (8 h by default), a local one keeps Django's two weeks."""
    assert settings.QUILL_SSO_SESSION_AGE_S == config.session_age() == 8 * 3600
    client = Client()
    assert log_in_form(client, "vera", password("vera")).status_code == 302
    assert client.session.get_expiry_age() == 8 * 3600
    assert client.session["_session_expiry"] == 8 * 3600
    settings.QUILL_SSO_SESSION_AGE_S = 600
    client = Client()
    assert log_in_form(client, "vera", password("vera")).status_code == 302
    assert client.session.get_expiry_age() == 600
    get_user_model().objects.create_user("local-op", password="local-op-pw-9")
    client = Client()
    assert log_in_form(client, "local-op", "local-op-pw-9").status_code == 302
    assert "_session_expiry" not in client.session
    assert client.session.get_expiry_age() == settings.SESSION_COOKIE_AGE
    for bad in ("8h", "10", "-5"):
        monkeypatch.setenv("QUILL_SSO_SESSION_AGE_S", bad)
        with pytest.raises(ImproperlyConfigured, match="QUILL_SSO_SESSION_AGE_S must be"):
            config.session_age()
