from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """The console's own app: landing page, health check, management commands."""

    name = "console"
    verbose_name = "Quill console"
