"""The SSO settings, read from the environment: `ldap_settings()` and `oidc_settings()`
return the Django settings (AUTH_LDAP_*, OIDC_*) to merge, {} when not configured."""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

from console.env import env_bool

LDAP_BACKEND = "console.sso.backends.LDAPRoleBackend"
OIDC_BACKEND = "console.sso.backends.OIDCRoleBackend"
# console.roles.ROLES, lowest first (settings cannot import console.roles: it loads
# django.contrib.auth, which needs the settings; tests/test_sso_ldap.py checks they agree)
ROLES = ("viewer", "operator", "admin")


def _get(name: str, default: str = "") -> str:
    return (os.environ.get(name) or default).strip()


def _secret(name: str) -> str:
    """NAME, or the first line of the file NAME_FILE names (keeps it out of `ps e`)."""
    path = _get(f"{name}_FILE")
    if path:
        with open(path) as f:
            return f.readline().strip()
    return _get(name)


def _required(prefix: str, names: tuple[str, ...]) -> dict[str, str]:
    values = {name: _get(f"{prefix}_{name}") for name in names}
    missing = [f"{prefix}_{n}" for n, v in values.items() if not v]
    if missing:
        raise ImproperlyConfigured(f"{prefix} sign-on needs {', '.join(missing)}")
    return values


def role_groups(prefix: str, fold_case: bool) -> dict[str, str]:
    """{group: role} from PREFIX_VIEWER_GROUPS, _OPERATOR_GROUPS, _ADMIN_GROUPS (each a
    ';'-separated list: LDAP DNs hold commas). A group named for two roles gives the
    higher one."""
    mapping: dict[str, str] = {}
    for role in ROLES:  # viewer, operator, admin: later (higher) roles win
        for group in _get(f"{prefix}_{role.upper()}_GROUPS").split(";"):
            group = group.strip()
            if group:
                mapping[group.lower() if fold_case else group] = role
    if not mapping:
        raise ImproperlyConfigured(
            f"{prefix} sign-on maps no group to a role: set {prefix}_ADMIN_GROUPS, "
            f"{prefix}_OPERATOR_GROUPS or {prefix}_VIEWER_GROUPS"
        )
    return mapping


def ldap_settings() -> dict:
    """django-auth-ldap's settings from QUILL_LDAP_* ({} without QUILL_LDAP_SERVER_URI)."""
    uri = _get("QUILL_LDAP_SERVER_URI")
    if not uri:
        return {}
    import ldap
    from django_auth_ldap.config import (
        GroupOfNamesType,
        GroupOfUniqueNamesType,
        LDAPSearch,
        PosixGroupType,
    )

    need = _required("QUILL_LDAP", ("USER_SEARCH_BASE", "GROUP_SEARCH_BASE"))
    group_type = _get("QUILL_LDAP_GROUP_TYPE", "groupOfNames")
    kinds = {
        "groupOfNames": GroupOfNamesType,
        "groupOfUniqueNames": GroupOfUniqueNamesType,
        "posixGroup": PosixGroupType,
    }
    if group_type not in kinds:
        raise ImproperlyConfigured(f"QUILL_LDAP_GROUP_TYPE must be one of {', '.join(kinds)}")
    timeout = float(_get("QUILL_LDAP_TIMEOUT_S", "5"))
    options = {ldap.OPT_NETWORK_TIMEOUT: timeout, ldap.OPT_TIMEOUT: timeout}
    ca_file = _get("QUILL_LDAP_CA_FILE")
    if ca_file:
        options[ldap.OPT_X_TLS_CACERTFILE] = ca_file
        options[ldap.OPT_X_TLS_REQUIRE_CERT] = ldap.OPT_X_TLS_DEMAND
        options[ldap.OPT_X_TLS_NEWCTX] = 0  # last: applies the TLS options above
    return {
        "AUTH_LDAP_SERVER_URI": uri,
        "AUTH_LDAP_BIND_DN": _get("QUILL_LDAP_BIND_DN"),
        "AUTH_LDAP_BIND_PASSWORD": _secret("QUILL_LDAP_BIND_PASSWORD"),
        "AUTH_LDAP_START_TLS": env_bool("QUILL_LDAP_START_TLS", False),
        "AUTH_LDAP_CONNECTION_OPTIONS": options,
        "AUTH_LDAP_USER_SEARCH": LDAPSearch(
            need["USER_SEARCH_BASE"],
            ldap.SCOPE_SUBTREE,
            _get("QUILL_LDAP_USER_SEARCH_FILTER", "(uid=%(user)s)"),
        ),
        "AUTH_LDAP_GROUP_SEARCH": LDAPSearch(
            need["GROUP_SEARCH_BASE"], ldap.SCOPE_SUBTREE, f"(objectClass={group_type})"
        ),
        "AUTH_LDAP_GROUP_TYPE": kinds[group_type](),
        "AUTH_LDAP_USER_ATTR_MAP": {"first_name": "givenName", "last_name": "sn", "email": "mail"},
        "AUTH_LDAP_ALWAYS_UPDATE_USER": True,
        # group DNs as django-auth-ldap reports them (lower case) -> role
        "QUILL_LDAP_ROLE_GROUPS": role_groups("QUILL_LDAP", fold_case=True),
    }


def oidc_settings() -> dict:
    """mozilla-django-oidc's settings from QUILL_OIDC_* ({} without QUILL_OIDC_CLIENT_ID):
    the authorization code flow with PKCE (S256), state and nonce, the id token's
    signature checked against the provider's JWKS."""
    client_id = _get("QUILL_OIDC_CLIENT_ID")
    if not client_id:
        return {}
    need = _required(
        "QUILL_OIDC",
        ("ISSUER", "AUTHORIZATION_ENDPOINT", "TOKEN_ENDPOINT", "JWKS_URI"),
    )
    ca_file = _get("QUILL_OIDC_CA_FILE")
    return {
        "OIDC_RP_CLIENT_ID": client_id,
        "OIDC_RP_CLIENT_SECRET": _secret("QUILL_OIDC_CLIENT_SECRET"),
        "OIDC_OP_AUTHORIZATION_ENDPOINT": need["AUTHORIZATION_ENDPOINT"],
        "OIDC_OP_TOKEN_ENDPOINT": need["TOKEN_ENDPOINT"],
        "OIDC_OP_JWKS_ENDPOINT": need["JWKS_URI"],
        "OIDC_OP_USER_ENDPOINT": _get("QUILL_OIDC_USERINFO_ENDPOINT") or None,
        "OIDC_RP_SIGN_ALGO": _get("QUILL_OIDC_SIGN_ALGO", "RS256"),
        "OIDC_RP_SCOPES": _get("QUILL_OIDC_SCOPES", "openid email profile"),
        "OIDC_USE_PKCE": True,
        "OIDC_USE_NONCE": True,
        "OIDC_VERIFY_SSL": ca_file or True,
        "OIDC_TIMEOUT": float(_get("QUILL_OIDC_TIMEOUT_S", "10")),
        "OIDC_AUTHENTICATION_CALLBACK_URL": "oidc-callback",
        "LOGIN_REDIRECT_URL_FAILURE": "login",
        "QUILL_OIDC_ISSUER": need["ISSUER"],
        "QUILL_OIDC_PROVIDER_NAME": _get("QUILL_OIDC_PROVIDER_NAME", "single sign-on"),
        "QUILL_OIDC_GROUPS_CLAIM": _get("QUILL_OIDC_GROUPS_CLAIM", "groups"),
        "QUILL_OIDC_USERNAME_CLAIM": _get("QUILL_OIDC_USERNAME_CLAIM", "preferred_username"),
        "QUILL_OIDC_ROLE_GROUPS": role_groups("QUILL_OIDC", fold_case=False),
    }


def session_age() -> int:
    """QUILL_SSO_SESSION_AGE_S (default 8 h): how long an SSO login lasts. Roles come
    from the groups at each login, so this bounds how long a directory change waits."""
    raw = _get("QUILL_SSO_SESSION_AGE_S", str(8 * 3600))
    if not raw.isdigit() or int(raw) < 60:
        raise ImproperlyConfigured(
            f"QUILL_SSO_SESSION_AGE_S must be a number of seconds, 60 or more, got {raw!r}"
        )
    return int(raw)


def backends(ldap: dict, oidc: dict) -> list[str]:
    """The SSO backends to append after the local one (local logins are tried first, so
    they never wait on a directory)."""
    return ([LDAP_BACKEND] if ldap else []) + ([OIDC_BACKEND] if oidc else [])


def oidc_callback_not_rate_limited(request, credentials=None) -> bool:
    """AXES_WHITELIST_CALLABLE: the OIDC callback is left out of django-axes' lockout.
    It carries no user name, so its failures would lock everyone at the address out
    (an office behind one NAT); each callback needs a state from this browser's session
    and a code from the provider, whose own login form is where passwords are tried."""
    return request is not None and request.path_info.startswith("/accounts/oidc/")
