from django.apps import AppConfig
from django.db.models.signals import post_migrate, post_save


def _ensure_role_groups(sender, **kwargs):
    from console.roles import ensure_groups

    ensure_groups()


class ConsoleConfig(AppConfig):
    """The console's own app: pages, API, live updates, the monitor, roles and audit."""

    name = "console"
    verbose_name = "Quill console"

    def ready(self):
        from django.contrib.admin.models import LogEntry
        from django.contrib.auth.signals import user_logged_in, user_login_failed
        from django_auth_ldap.backend import ldap_error

        from console import audit
        from console.sso.accounts import expire_sso_session
        from console.sso.refusal import ldap_unreachable

        # After every migrate (permissions exist by then): the viewer, operator and admin
        # groups with their permissions.
        post_migrate.connect(_ensure_role_groups, sender=self)
        # Failed logins (with the name tried) and every change made in /admin/.
        user_login_failed.connect(audit.login_failed, dispatch_uid="quill-login-failed")
        # Sign-on: LDAP and OIDC logins, and a directory that cannot be reached.
        user_logged_in.connect(audit.sso_login, dispatch_uid="quill-sso-login")
        user_logged_in.connect(expire_sso_session, dispatch_uid="quill-sso-session-age")
        ldap_error.connect(ldap_unreachable, dispatch_uid="quill-ldap-error")
        post_save.connect(audit.admin_change, sender=LogEntry, dispatch_uid="quill-admin")
