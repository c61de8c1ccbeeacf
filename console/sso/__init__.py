"""Single sign-on for the console: LDAP (django-auth-ldap) and OpenID Connect
(mozilla-django-oidc) logins beside the local ones. The directory's groups (LDAP) or the
provider's groups claim (OIDC) give the viewer, operator or admin role at every login;
a user in none of the mapped groups is refused. Configured from QUILL_LDAP_* and
QUILL_OIDC_* (config.py); with neither set the console has local logins only."""
