from django.apps import AppConfig


class AlertsConfig(AppConfig):
    """Lag alerts: rules, their events, the webhook and e-mail notifiers, the beat task."""

    name = "alerts"
    verbose_name = "Quill lag alerts"
    default_auto_field = "django.db.models.BigAutoField"
