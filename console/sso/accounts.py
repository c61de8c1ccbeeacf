"""Which console users are SSO accounts: those an SSO backend made, kept in the Django
group SSO_GROUP (not a role). Their role is set from their groups at each login, so the
users page and API do not change it; an SSO login never enters any other account (a
local one, or one used only with API tokens).

Each SSO account also remembers whose it is (console.models.SSOIdentity): the source
that made it (LDAP or OpenID Connect) and, for OIDC, the provider's (iss, sub). The user
name alone does not let an OIDC identity named alice into the account LDAP made for
alice (or the reverse), nor another subject of the provider into it. Accounts made
before identities were recorded take the identity of their next SSO login."""

from __future__ import annotations

import json

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from console.models import SSOIdentity
from console.sso.config import LDAP_BACKEND, OIDC_BACKEND

SSO_GROUP = "single sign-on"
LDAP, OIDC = "ldap", "oidc"
SOURCE_NAMES = dict(SSOIdentity.SOURCES)


def mark_sso(user) -> None:
    user.groups.add(Group.objects.get_or_create(name=SSO_GROUP)[0])


def is_sso(user) -> bool:
    return user.pk is not None and user.groups.filter(name=SSO_GROUP).exists()


def sso_user_ids() -> set[int]:
    return set(get_user_model().objects.filter(groups__name=SSO_GROUP).values_list("pk", flat=True))


def oidc_subject(claims) -> str:
    return json.dumps([claims.get("iss", ""), claims.get("sub", "")])


def identity_conflict(user, source: str, subject: str) -> str:
    """Why a login from `source` as `subject` may not enter `user` ("" when it may)."""
    known = SSOIdentity.objects.filter(user=user).first() if user.pk is not None else None
    if known is None:
        return ""
    name = user.get_username()
    if known.source != source:
        return (
            f"{name} is a console account of {SOURCE_NAMES[known.source]} sign-on; "
            f"it cannot be signed in with {SOURCE_NAMES[source]}."
        )
    if source == OIDC and known.subject != subject:
        return (
            f"{name} belongs to another identity at the provider (another issuer or "
            "subject); this sign-in cannot enter it."
        )
    return ""


def remember(user, source: str, subject: str) -> None:
    SSOIdentity.objects.update_or_create(user=user, defaults={"source": source, "subject": subject})


def expire_sso_session(sender, request=None, user=None, **kwargs) -> None:
    """user_logged_in: an SSO login's session ends after QUILL_SSO_SESSION_AGE_S, so a
    role taken away in the directory is gone by then (local logins keep Django's age)."""
    if request is not None and getattr(user, "backend", "") in (LDAP_BACKEND, OIDC_BACKEND):
        request.session.set_expiry(settings.QUILL_SSO_SESSION_AGE_S)
