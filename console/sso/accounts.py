"""Which console users are SSO accounts: those an SSO backend made, kept in the Django
group SSO_GROUP (not a role). Their role is set from their groups at each login, so the
users page and API do not change it; an SSO login never enters any other account (a
local one, or one used only with API tokens)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

SSO_GROUP = "single sign-on"


def mark_sso(user) -> None:
    user.groups.add(Group.objects.get_or_create(name=SSO_GROUP)[0])


def is_sso(user) -> bool:
    return user.pk is not None and user.groups.filter(name=SSO_GROUP).exists()


def sso_user_ids() -> set[int]:
    return set(get_user_model().objects.filter(groups__name=SSO_GROUP).values_list("pk", flat=True))
