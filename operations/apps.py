from django.apps import AppConfig


class OperationsConfig(AppConfig):
    """Long cluster jobs: the Operation record, the job framework and kinds, their tasks."""

    name = "operations"
    verbose_name = "Quill operations"
    default_auto_field = "django.db.models.BigAutoField"
