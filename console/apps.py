from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _ensure_role_groups(sender, **kwargs):
    from console.roles import ensure_groups

    ensure_groups()


class ConsoleConfig(AppConfig):
    """The console's own app: pages, API, live updates, the monitor, roles and audit."""

    name = "console"
    verbose_name = "Quill console"

    def ready(self):
        # After every migrate (permissions exist by then): the viewer, operator and admin
        # groups with their permissions.
        post_migrate.connect(_ensure_role_groups, sender=self)
