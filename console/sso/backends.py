"""The SSO authentication backends. Both set the user's role from the groups the
directory or the provider names at every login, refuse a user in no mapped group (and
take any role they held away), and never log in to an account they did not make
(console.sso.accounts): a directory entry named `admin` does not become the local admin.

Why a login was refused is left on the request (console.sso.refusal) for the login
page and the audit log."""

from __future__ import annotations

import jwt
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import SuspiciousOperation
from django_auth_ldap.backend import LDAPBackend
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from console.roles import ROLES, set_role
from console.sso.accounts import (
    LDAP,
    OIDC,
    identity_conflict,
    is_sso,
    mark_sso,
    oidc_subject,
    remember,
)
from console.sso.refusal import refusal, refuse


def role_for(groups, mapping: dict[str, str]) -> str | None:
    """The highest role any of `groups` maps to, or None."""
    found = {mapping[g] for g in groups if g in mapping}
    return next((r for r in reversed(ROLES) if r in found), None)


def apply_role(request, user, role: str | None, source: str, identity: tuple[str, str]):
    """Give `user` exactly `role` (None: no role, and the login is refused); `identity`
    is the (source, subject) the account is bound to (console.sso.accounts)."""
    user.is_superuser = user.is_staff = False  # the directory decides, not a flag
    user.save(update_fields=["is_superuser", "is_staff"])
    mark_sso(user)
    remember(user, *identity)
    set_role(user, role)
    if not user.is_active:
        refuse(request, f"{user.get_username()} is deactivated in the console.")
        return None
    if role is None:
        refuse(
            request,
            f"{user.get_username()} signed in with {source} but is in none of the groups "
            "mapped to a console role (viewer, operator, admin); ask an administrator.",
        )
        return None
    return user


def is_local(user) -> bool:
    """An existing account no SSO login made (a password, or API tokens only)."""
    return user.pk is not None and not is_sso(user)


def refuse_local(request, username: str, source: str) -> None:
    refuse(
        request,
        f"{username} is a local console account; it cannot be signed in with {source}.",
    )


class LDAPRoleBackend(LDAPBackend):
    """django-auth-ldap, roles from QUILL_LDAP_*_GROUPS (group DNs)."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        self.request = request
        return super().authenticate(request, username, password, **kwargs)

    def get_or_build_user(self, username, ldap_user):
        user, built = super().get_or_build_user(username, ldap_user)
        if not built and is_local(user):
            refuse_local(self.request, username, "LDAP")
            raise ldap_user.AuthenticationFailed("a local account of that name exists")
        conflict = identity_conflict(user, LDAP, ldap_user.dn)
        if conflict:
            refuse(self.request, conflict)
            raise ldap_user.AuthenticationFailed("another identity's account")
        return user, built

    def authenticate_ldap_user(self, ldap_user, password):
        user = super().authenticate_ldap_user(ldap_user, password)
        if user is None:
            return None
        role = role_for(ldap_user.group_dns, settings.QUILL_LDAP_ROLE_GROUPS)
        return apply_role(self.request, user, role, "LDAP", (LDAP, ldap_user.dn))


class OIDCRoleBackend(OIDCAuthenticationBackend):
    """mozilla-django-oidc, users named by QUILL_OIDC_USERNAME_CLAIM, roles from the
    QUILL_OIDC_GROUPS_CLAIM claim (id token and userinfo) and QUILL_OIDC_*_GROUPS."""

    def verify_token(self, token, **kwargs):
        """Refuses a token not signed with the configured algorithm (alg none, HS256
        with the public key...) before looking for its key in the JWKS."""
        try:
            header = jwt.get_unverified_header(token or "")
        except jwt.InvalidTokenError as exc:
            raise SuspiciousOperation(f"the id token is malformed: {exc}") from exc
        alg = header.get("alg")
        if alg != self.OIDC_RP_SIGN_ALGO:
            raise SuspiciousOperation(
                f"the id token is signed with {alg!r}, not {self.OIDC_RP_SIGN_ALGO}"
            )
        if "kid" not in header:
            raise SuspiciousOperation("the id token names no key (kid)")
        return super().verify_token(token, **kwargs)

    def _verify_jws(self, payload, key):
        """The signature (with the provider's JWKS key), and also the issuer, audience
        (our client id) and expiry, which the library leaves out."""
        try:
            return jwt.decode(
                payload,
                key,
                algorithms=[self.OIDC_RP_SIGN_ALGO],
                audience=self.OIDC_RP_CLIENT_ID,
                issuer=settings.QUILL_OIDC_ISSUER,
                options={"require": ["exp", "iat", "iss", "aud", "sub"]},
            )
        except jwt.InvalidTokenError as exc:
            raise SuspiciousOperation(f"the id token was refused: {exc}") from exc

    def get_userinfo(self, access_token, id_token, payload):
        """The id token's claims, with the userinfo endpoint's over them when there is one."""
        if not self.OIDC_OP_USER_ENDPOINT:
            return dict(payload)
        info = super().get_userinfo(access_token, id_token, payload)
        if info.get("sub") != payload.get("sub"):
            raise SuspiciousOperation("userinfo is about another subject than the id token")
        return {**payload, **info}

    def username_of(self, claims) -> str:
        return str(claims.get(settings.QUILL_OIDC_USERNAME_CLAIM) or "")[:150]

    def verify_claims(self, claims):
        if self.username_of(claims):
            return True
        refuse(self.request, f"the provider sent no {settings.QUILL_OIDC_USERNAME_CLAIM} claim")
        return False

    def filter_users_by_claims(self, claims):
        username = self.username_of(claims)
        users = get_user_model().objects.filter(username__iexact=username)
        if any(is_local(u) for u in users):
            refuse_local(self.request, username, settings.QUILL_OIDC_PROVIDER_NAME)
            return get_user_model().objects.none()
        for user in users:
            conflict = identity_conflict(user, OIDC, oidc_subject(claims))
            if conflict:
                refuse(self.request, conflict)
                return get_user_model().objects.none()
        return users

    def get_or_create_user(self, access_token, id_token, payload):
        if refusal(self.request):
            return None
        return super().get_or_create_user(access_token, id_token, payload)

    def create_user(self, claims):
        if refusal(self.request):  # a local account of that name: never take it over
            return None
        user = get_user_model().objects.create_user(
            self.username_of(claims), email=claims.get("email", "")
        )
        return self.update_user(user, claims)

    def update_user(self, user, claims):
        groups = claims.get(settings.QUILL_OIDC_GROUPS_CLAIM) or []
        if isinstance(groups, str):
            groups = [groups]
        role = role_for(groups, settings.QUILL_OIDC_ROLE_GROUPS)
        name = settings.QUILL_OIDC_PROVIDER_NAME
        return apply_role(self.request, user, role, name, (OIDC, oidc_subject(claims)))
