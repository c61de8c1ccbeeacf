from django.utils.translation import gettext_lazy as _
from oidc_provider.lib.claims import ScopeClaims


class GroupClaims(ScopeClaims):
    """The `groups` scope: the user's Django group names in a `groups` claim."""

    info_groups = (_("Groups"), _("The groups you are in."))

    def scope_groups(self):
        return {"groups": sorted(self.user.groups.values_list("name", flat=True))}


def userinfo(claims, user):
    """OIDC_USERINFO: the standard claims this provider knows about its users."""
    claims.update(preferred_username=user.username, email=user.email, name=user.username)
    return claims
